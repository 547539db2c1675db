"""A task's contract kept in the ledger, and the file an older assay wrote still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from ledger_driver import Driver, LedgerTarget

from assay.adapters.store.contracts import (
    ContractUnavailable,
    contract_document,
    legacy_contract_path,
    load_task_contract,
)
from assay.adapters.store.schema import tasks
from assay.adapters.store.sql import (
    HEAD_REVISION,
    MIGRATIONS,
    Ledger,
    LedgerConflict,
    TaskNotFound,
    UnreadableContract,
)
from assay.core.contract import Contract
from assay.core.tasks import Task

CONTRACT = Contract.model_validate(
    {
        "task": "make slugify keep digits",
        "coder": {"kind": "command", "command": "true"},
        "validators": [{"id": "tests", "kind": "command", "run": "pytest -q"}],
        "land": "branch",
        "seats": 2,
    }
)


def _task(driver: Driver, task_id: str) -> Task:
    return Task.new(id=task_id, title=task_id, instruction="do it", now=driver.now())


def _write_legacy(home: Path, task_id: str, text: str) -> Path:
    path = legacy_contract_path(home, task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_contract_is_stored_with_the_task_and_read_back(ledger: Ledger, driver: Driver) -> None:
    ledger.add_task(_task(driver, "t1"), contract=contract_document(CONTRACT))
    document = ledger.task_contract("t1")
    assert document == contract_document(CONTRACT)
    assert "max_recovery" not in json.dumps(document)  # only what was set: defaults stay new
    loaded = load_task_contract(ledger, "t1")  # no home at all: a worker elsewhere
    assert loaded == CONTRACT
    assert loaded.model_fields_set == CONTRACT.model_fields_set


def test_a_worker_on_another_machine_reads_it_from_the_same_ledger(
    target: LedgerTarget, tmp_path: Path
) -> None:
    queueing = target.open()
    queueing.add_task(_task(Driver(queueing), "t1"), contract=contract_document(CONTRACT))
    elsewhere = target.open()  # its own connection, an empty home of its own
    home = tmp_path / "other-machine" / ".assay"
    assert load_task_contract(elsewhere, "t1", home=home) == CONTRACT
    assert not home.exists()


def test_task_reads_never_load_the_contract(ledger: Ledger, driver: Driver) -> None:
    ledger.add_task(_task(driver, "t1"), contract=contract_document(CONTRACT))
    task = ledger.get_task("t1")
    assert "contract" not in task.model_dump()
    assert [t.id for t in ledger.list_tasks()] == ["t1"]


def test_a_duplicate_id_keeps_the_first_tasks_contract(ledger: Ledger, driver: Driver) -> None:
    ledger.add_task(_task(driver, "t1"), contract=contract_document(CONTRACT))
    other = Contract.model_validate({"task": "something else"})
    with pytest.raises(LedgerConflict):
        ledger.add_task(_task(driver, "t1"), contract=contract_document(other))
    assert load_task_contract(ledger, "t1") == CONTRACT


def test_a_task_without_one_falls_back_to_the_old_file(
    ledger: Ledger, driver: Driver, tmp_path: Path
) -> None:
    driver.add("old")  # queued by an older assay: no contract in the ledger
    assert ledger.task_contract("old") is None
    with pytest.raises(ContractUnavailable, match="no stored contract") as missing:
        load_task_contract(ledger, "old", home=tmp_path)
    assert missing.value.cause is None and str(legacy_contract_path(tmp_path, "old")) in str(
        missing.value
    )
    with pytest.raises(ContractUnavailable, match=r"none in the ledger\)$"):
        load_task_contract(ledger, "old")  # no home: only the ledger was asked
    path = _write_legacy(tmp_path, "old", json.dumps(contract_document(CONTRACT)))
    assert load_task_contract(ledger, "old", home=tmp_path) == CONTRACT
    # Read once, it is the ledger's from now on: a machine without the file runs it too.
    assert ledger.task_contract("old") == contract_document(CONTRACT)
    path.unlink()
    assert load_task_contract(ledger, "old") == CONTRACT


def test_adopting_never_replaces_a_stored_contract(ledger: Ledger, driver: Driver) -> None:
    ledger.add_task(_task(driver, "t1"), contract=contract_document(CONTRACT))
    assert not ledger.adopt_contract("t1", {"task": "another"})
    assert ledger.task_contract("t1") == contract_document(CONTRACT)
    driver.add("old")
    assert ledger.adopt_contract("old", {"task": "x"})
    assert not ledger.adopt_contract("old", {"task": "y"})
    assert ledger.task_contract("old") == {"task": "x"}
    assert not ledger.adopt_contract("nope", {"task": "x"})


def test_the_ledger_wins_over_a_stale_file(ledger: Ledger, driver: Driver, tmp_path: Path) -> None:
    ledger.add_task(_task(driver, "t1"), contract=contract_document(CONTRACT))
    _write_legacy(tmp_path, "t1", "{not json")
    assert load_task_contract(ledger, "t1", home=tmp_path) == CONTRACT


@pytest.mark.parametrize(
    ("text", "problem"),
    [("{not json", "Expecting property name"), ('{"task": ""}', "task"), ("[1]", "Contract")],
)
def test_an_unreadable_old_file_says_which_file_and_why(
    ledger: Ledger, driver: Driver, tmp_path: Path, text: str, problem: str
) -> None:
    driver.add("old")
    path = _write_legacy(tmp_path, "old", text)
    with pytest.raises(ContractUnavailable, match="is unreadable") as unreadable:
        load_task_contract(ledger, "old", home=tmp_path)
    assert unreadable.value.where == str(path)
    assert problem in str(unreadable.value.cause)


def test_an_unreadable_file_that_is_a_folder(
    ledger: Ledger, driver: Driver, tmp_path: Path
) -> None:
    driver.add("old")
    legacy_contract_path(tmp_path, "old").mkdir(parents=True)
    with pytest.raises(ContractUnavailable, match="is unreadable"):
        load_task_contract(ledger, "old", home=tmp_path)


def test_an_invalid_contract_in_the_ledger_is_unreadable_not_a_crash(
    ledger: Ledger, driver: Driver, tmp_path: Path
) -> None:
    ledger.add_task(_task(driver, "t1"), contract={"task": "x", "seats": "many"})
    _write_legacy(tmp_path, "t1", json.dumps(contract_document(CONTRACT)))  # never consulted
    with pytest.raises(ContractUnavailable, match="in the ledger is unreadable") as bad:
        load_task_contract(ledger, "t1", home=tmp_path)
    assert "seats" in str(bad.value.cause)


@pytest.mark.parametrize("stored", ['"just text"', "[1, 2]", "{broken"])
def test_a_hand_edited_contract_cell_is_unreadable(
    ledger: Ledger, driver: Driver, stored: str
) -> None:
    ledger.add_task(_task(driver, "t1"), contract=contract_document(CONTRACT))
    ledger.add_task(_task(driver, "t2"), contract=contract_document(CONTRACT))
    postgres = ledger._engine.dialect.name == "postgresql"
    edit = sa.text(
        f"UPDATE tasks SET contract = {'CAST(:v AS jsonb)' if postgres else ':v'} WHERE id = 't1'"
    )
    if postgres and stored == "{broken":  # jsonb itself refuses text that is not JSON
        with pytest.raises(sa.exc.DataError), ledger._engine.begin() as conn:
            conn.execute(edit, {"v": stored})
        assert load_task_contract(ledger, "t1") == CONTRACT
        return
    with ledger._engine.begin() as conn:
        conn.execute(edit, {"v": stored})
    with pytest.raises(UnreadableContract, match="not an object"):
        ledger.task_contract("t1")
    with pytest.raises(ContractUnavailable, match="in the ledger is unreadable"):
        load_task_contract(ledger, "t1")
    assert load_task_contract(ledger, "t2") == CONTRACT  # the others still read
    assert [t.id for t in ledger.list_tasks()] == ["t1", "t2"]


def test_an_unknown_task_is_not_a_missing_contract(ledger: Ledger) -> None:
    with pytest.raises(TaskNotFound):
        ledger.task_contract("nope")
    with pytest.raises(TaskNotFound):
        load_task_contract(ledger, "nope")


def test_migrating_from_0003_keeps_every_task_with_no_contract(
    target: LedgerTarget, tmp_path: Path
) -> None:
    ledger = target.open(migrate=False)
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    with ledger._engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0003")
    with ledger._engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO tasks (id, title, instruction, status, created_at, updated_at) "
                "VALUES ('old', 'old task', 'do it', 'queued', :at, :at)"
            ),
            {"at": "2026-01-01 00:00:00"},
        )
    assert ledger.migrate() == HEAD_REVISION
    with ledger._engine.connect() as conn:
        assert conn.execute(sa.select(tasks.c.contract)).scalar_one() is None  # SQL NULL
        assert (
            conn.execute(sa.select(sa.func.count()).where(tasks.c.contract.is_(None))).scalar_one()
            == 1
        )
    assert ledger.get_task("old").title == "old task"
    _write_legacy(tmp_path, "old", json.dumps(contract_document(CONTRACT)))
    assert load_task_contract(ledger, "old", home=tmp_path) == CONTRACT
