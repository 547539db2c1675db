"""Coder adapters."""
