"""Persistence: the halt state files and the SQL ledger."""
