"""Alembic migrations of the ledger database (run through ``Ledger.migrate()``)."""
