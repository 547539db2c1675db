"""``assay task stop`` and ``assay task retry``, in-process through ``assay.cli.main.main``:
refusals with their exit codes, a retry that clears a failed task's wait (recorded with who),
and a stop that reaches a real ``assay run`` on this machine (its coder ended, the run closed
as interrupted and refunded, the task held with the reason, the request and the hold recorded
with who asked)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.in_process import fresh_repo, ledger_of, run_main
from support.ledger_driver import Driver

from assay.adapters.process_groups import GROUPS_FILE, stop_recorded_groups
from assay.adapters.stop_request import STOP_FILE, WATCHED_FILE
from assay.core.settle import Verdict
from assay.core.tasks import Task
from assay.core.vocab import EventKind, HoldSource, RunStatus, TaskStatus
from assay.engine.local.interrupt import RunInterrupted

assay = run_main
ROOT = Path(__file__).resolve().parents[3]


def _valid(name: str, document: object) -> None:
    """``document`` is what the CLI schema's ``$defs`` entry ``name`` says."""
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    schemas = [json.loads((ROOT / "schemas" / f).read_text()) for f in _SCHEMAS]
    registry: Registry[object] = Registry().with_resources(
        (s["$id"], Resource.from_contents(s, default_specification=DRAFT202012)) for s in schemas
    )
    ref = {"$ref": f"{schemas[0]['$id']}#/$defs/{name}"}
    errors = list(jsonschema.Draft202012Validator(ref, registry=registry).iter_errors(document))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]


_SCHEMAS = ("cli.schema.json", "payload.schema.json")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fresh_repo(tmp_path, monkeypatch)


def _add(repo: Path, capsys: pytest.CaptureFixture[str], command: str = "true") -> str:
    code, out, err = assay(
        capsys, "task", "add", "do it", "--coder", "command", "--coder-command", command,
        "--sandbox", "none", "--json",
    )  # fmt: skip
    assert code == 0, err
    task_id: str = json.loads(out)["id"]
    return task_id


def _failed_and_waiting(repo: Path, task_id: str) -> Task:
    """The task as a quota-lost run leaves it: failed, refunded, waiting an hour."""
    with ledger_of(repo) as ledger:
        driver = Driver(ledger)
        task = driver.start(task_id, "r1")
        close = driver.close_for(task, "r1", Verdict(status=RunStatus.STALLED, quota_hit=True))
        close.task.wait_until(datetime.now(UTC) + timedelta(hours=1), close.finished_at)
        ledger.close_run(close)
        return ledger.get_task(task_id)


def test_stop_refuses_a_task_that_is_not_running(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = _add(repo, capsys)
    code, out, err = assay(capsys, "task", "stop", task_id)
    assert (code, out) == (5, "")
    assert f"task {task_id!r} is queued, not running: there is no run to stop" in err
    assert f"`assay task hold {task_id}` parks it" in err
    code, _, err = assay(capsys, "task", "stop", task_id, "--cancel")
    assert code == 5 and f"`assay task cancel {task_id}`" in err
    code, _, err = assay(capsys, "task", "stop", "t-nope")
    assert code == 2 and "no task 't-nope'" in err
    with ledger_of(repo) as ledger:
        assert ledger.get_task(task_id).status is TaskStatus.QUEUED
        assert not [e for e in ledger.events(task_id) if e.kind == EventKind.TASK_STOP_REQUESTED]


def test_stop_refuses_a_running_task_whose_process_is_gone(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = _add(repo, capsys)
    with ledger_of(repo) as ledger:
        task = ledger.get_task(task_id)
        task.start(datetime.now(UTC), run_id="r-dead")
        ledger.start_run(task, "r-dead")
    (repo / ".assay" / "runs" / "r-dead").mkdir(parents=True)
    (repo / ".assay" / "runs" / "r-dead" / WATCHED_FILE).touch()  # a local run's, as it left it
    code, out, err = assay(capsys, "task", "stop", task_id)
    assert (code, out) == (2, "")
    assert "the process of its run r-dead is gone; `assay run --resume` closes the run" in err
    assert not (repo / ".assay" / "runs" / "r-dead" / STOP_FILE).exists()


def test_retry_refuses_a_task_that_is_not_failed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = _add(repo, capsys)
    code, out, err = assay(capsys, "task", "retry", task_id)
    assert (code, out) == (5, "")
    assert f"task {task_id!r} is queued, not failed: there is nothing to re-run" in err
    assert assay(capsys, "task", "hold", task_id)[0] == 0
    code, _, err = assay(capsys, "task", "retry", task_id)
    assert code == 5 and f"`assay task release {task_id}` lets a held task run again" in err
    code, _, err = assay(capsys, "task", "retry", "t-nope")
    assert code == 2 and "no task 't-nope'" in err


def test_retry_lets_a_waiting_failed_task_run_now_and_records_who(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id = _add(repo, capsys)
    waiting = _failed_and_waiting(repo, task_id)
    assert waiting.status is TaskStatus.FAILED and waiting.waiting(datetime.now(UTC))
    attempts = waiting.attempts
    code, out, err = assay(capsys, "task", "retry", task_id, "--json")
    assert code == 0, err
    said = json.loads(out)
    _valid("task_move", said)
    assert (said["action"], said["via"], said["reason"]) == ("retry", "cli", None)
    assert said["by"].count("@") == 1
    assert said["task"]["status"] == "failed" and said["task"]["not_before"] is None
    with ledger_of(repo) as ledger:
        task = ledger.get_task(task_id)
        assert task.runnable(datetime.now(UTC)) and task.attempts == attempts
        saved = [e.data for e in ledger.events(task_id) if e.kind == EventKind.TASK_SAVED]
    assert saved[-1]["action"] == "retry" and saved[-1]["via"] == "cli"
    code, out, _ = assay(capsys, "task", "retry", task_id)
    assert code == 0 and "runnable now (wait cleared; attempts kept" in out


@dataclass
class LiveRun:
    """A run of the local executor in a thread of this process, as ``assay serve`` runs one:
    its task, and how it ended (the exception it raised, once it did)."""

    task_id: str
    thread: threading.Thread
    ended: list[BaseException | None] = field(default_factory=list)


@pytest.fixture
def live_run(repo: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[LiveRun]:
    """A task whose coder sleeps 120 s, running, once its coder is running."""
    from assay.cli.workspace import Workspace
    from assay.engine.local.runner import run_task

    task_id = _add(repo, capsys, "sleep 120")
    workspace = Workspace.find()
    ledger = workspace.ledger()
    live = LiveRun(task_id, threading.Thread(target=lambda: None))

    def run() -> None:
        try:
            run_task(
                repo=workspace.repo, home=workspace.home, ledger=ledger,
                task=ledger.get_task(task_id), contract=workspace.load_contract(task_id),
            )  # fmt: skip
            live.ended.append(None)
        except BaseException as exc:  # what the test looks at
            live.ended.append(exc)

    live.thread = threading.Thread(target=run, daemon=True)
    live.thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            groups = list((repo / ".assay" / "runs").glob(f"*/{GROUPS_FILE}"))
            if groups and groups[0].read_text().strip():
                break
            assert not live.ended, live.ended
            time.sleep(0.1)
        else:
            pytest.fail("the coder never started")
        yield live
    finally:
        if live.thread.is_alive():  # stop it the way the test would have
            for run_dir in (repo / ".assay" / "runs").iterdir():
                (run_dir / STOP_FILE).write_text("{}")
                stop_recorded_groups(run_dir / GROUPS_FILE)
            live.thread.join(30)
        ledger.close()


def test_stop_reaches_a_local_run_and_holds_its_task_recording_who(
    repo: Path, capsys: pytest.CaptureFixture[str], live_run: LiveRun
) -> None:
    task_id = live_run.task_id
    started = time.monotonic()
    code, out, err = assay(
        capsys, "task", "stop", task_id, "--cancel", "--reason", "wrong branch", "--json"
    )
    assert code == 0, err
    assert time.monotonic() - started < 30  # the coder's sleep 120 was ended, not waited out
    said = json.loads(out)
    _valid("task_stop", said)
    assert said["action"] == "cancel" and said["reason"] == "wrong branch"
    assert said["executor"] == "local" and said["stopped"] is True and said["via"] == "cli"
    assert said["task"]["status"] == "held"
    live_run.thread.join(30)
    (ended,) = live_run.ended
    assert isinstance(ended, RunInterrupted) and ended.ask is not None
    assert str(ended).startswith("stopped by ") and str(ended).endswith("(cli)")
    with ledger_of(repo) as ledger:
        task = ledger.get_task(task_id)
        (run,) = ledger.runs(task_id)
        events = ledger.events(task_id)
    assert (task.status, task.hold_source, task.hold_reason) == (
        TaskStatus.HELD,
        HoldSource.MANUAL,
        "wrong branch",
    )
    assert task.attempts == 0 and not run.open and run.attempt_spent is False  # refunded
    assert run.reason is not None and "stopped by" in run.reason
    asked = [e.data for e in events if e.kind == EventKind.TASK_STOP_REQUESTED]
    assert [(a["action"], a["reason"], a["via"], a["on"]) for a in asked] == [
        ("cancel", "wrong branch", "cli", "local")
    ]
    saved = [e.data for e in events if e.kind == EventKind.TASK_SAVED]
    assert saved[-1] | {"by": "?"} == {
        "status": "held", "action": "cancel", "by": "?", "via": "cli", "reason": "wrong branch",
    }  # fmt: skip
    assert saved[-1]["by"] == asked[0]["by"]
    # `task hold` of it now is the plain refusal of a held task, and release runs it again.
    assert assay(capsys, "task", "stop", task_id)[0] == 5
    assert assay(capsys, "task", "release", task_id)[0] == 0
