"""What the SQL ledger raises: every refusal is a ``LedgerError`` and writes nothing."""

from __future__ import annotations


class LedgerError(Exception):
    """The ledger refused an operation; nothing of it was written."""


class TaskNotFound(LedgerError, LookupError):
    pass


class RunNotFound(LedgerError, LookupError):
    pass


class UnreadableTask(LedgerError, LookupError):
    """The task's row exists but is not a valid task (edited by hand, or by a newer version)."""

    def __init__(self, task_id: str, problem: str) -> None:
        super().__init__(f"task {task_id!r} is unreadable in the ledger: {problem}")
        self.task_id = task_id
        self.problem = problem


class UnreadableContract(LedgerError, ValueError):
    """The contract stored with a task is not a contract document."""

    def __init__(self, task_id: str, problem: str) -> None:
        super().__init__(f"task {task_id!r}: the contract in the ledger is unreadable: {problem}")
        self.task_id = task_id
        self.problem = problem


class LedgerConflict(LedgerError):
    """The write disagrees with what the ledger holds (a duplicate, a stale or wrong count)."""
