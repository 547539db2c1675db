"""One line for an exception that escaped a command, so no raw driver message reaches a user.

Every command ends up here (``assay.cli.main``), so the database's errors are worded in one
place: a locked ledger names its file, any other SQLAlchemy error shows only the driver's
own one-line reason (never the SQL statement or SQLAlchemy's help links).
"""

from __future__ import annotations


def describe(exc: BaseException) -> str:
    """``exc`` as one line, without the ``assay:`` prefix."""
    return database_error(exc) or f"internal error: {type(exc).__name__}: {_one_line(str(exc))}"


def database_error(exc: BaseException) -> str | None:
    """One line for an error of the ledger's database, or None for any other error."""
    from assay.adapters.store.connect import LedgerLocked

    if isinstance(exc, LedgerLocked):
        return str(exc)
    if type(exc).__module__.split(".")[0] == "sqlalchemy":
        cause = getattr(exc, "orig", None) or exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause else type(exc).__name__
        return f"the ledger database failed: {_one_line(detail)}"
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]
