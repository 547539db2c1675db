"""Alembic revisions of the ledger database, oldest first."""
