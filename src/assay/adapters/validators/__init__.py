"""Validator adapters."""
