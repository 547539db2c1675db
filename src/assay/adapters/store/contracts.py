"""A task's dispatch contract, kept in the ledger with the task.

A worker on another machine has the ledger and nothing of the queueing machine's ``.assay``,
so the contract a task was queued with is stored in its row (``Ledger.add_task(task,
contract=...)``). Tasks queued before that have their contract in a file,
``<home>/tasks/<id>.contract.json``; it is still read when the ledger has none for the task,
and the first read stores it in the ledger (the file is left as it is).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from assay.adapters.store.sql import Ledger, UnreadableContract
from assay.core.contract import Contract

LEGACY_FOLDER = "tasks"


def legacy_contract_path(home: Path, task_id: str) -> Path:
    """Where a task queued by an older assay had its contract written."""
    return home / LEGACY_FOLDER / f"{task_id}.contract.json"


def contract_document(contract: Contract) -> dict[str, Any]:
    """The contract as stored: only what was set. A default is not a setting the operator
    chose, so reading it back never warns that a coder ignores it, and a newer assay's
    defaults apply to it."""
    return contract.model_dump(mode="json", exclude_unset=True)


class ContractUnavailable(LookupError):
    """The task's contract cannot be read: none is stored (``cause`` None), or the stored one
    is not a valid contract. ``where`` says which place was read."""

    def __init__(self, task_id: str, where: str, cause: Exception | None = None) -> None:
        self.task_id = task_id
        self.where = where
        self.cause = cause
        if cause is None:
            message = f"task {task_id} has no stored contract (none {where})"
        else:
            detail = " ".join(str(cause).split())
            message = f"task {task_id}: its stored contract {where} is unreadable: {detail}"
        super().__init__(message)


def load_task_contract(ledger: Ledger, task_id: str, *, home: Path | None = None) -> Contract:
    """The contract of ``task_id``: the ledger's, else (an older task) its file under
    ``home``, adopted into the ledger; a machine without that folder passes None and reads
    the ledger only.

    Raises :class:`ContractUnavailable` when neither holds a readable contract, and
    ``TaskNotFound`` for a task the ledger does not know.
    """
    where = "in the ledger"
    try:
        document = ledger.task_contract(task_id)
    except UnreadableContract as exc:
        raise ContractUnavailable(task_id, where, ValueError(exc.problem)) from exc
    if document is not None:
        try:
            return Contract.model_validate(document)
        except ValidationError as exc:
            raise ContractUnavailable(task_id, where, exc) from exc
    if home is None:
        raise ContractUnavailable(task_id, where)
    path = legacy_contract_path(home, task_id)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContractUnavailable(task_id, f"{where}, nor at {path}") from None
    except OSError as exc:
        raise ContractUnavailable(task_id, str(path), exc) from exc
    try:
        contract = Contract.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise ContractUnavailable(task_id, str(path), exc) from exc
    # Kept in the ledger from now on, so a worker on another machine can run this task too.
    ledger.adopt_contract(task_id, contract_document(contract))
    return contract
