"""``assay task delete`` and ``assay task prune``: a deleted task leaves nothing behind (its
ledger rows, run folders, halt state, seats, the branches of candidates kept for a look, an
older assay's contract file), but a branch a run left for the user; a running task is never
deleted; prune removes only finished tasks older than asked. In-process through
``assay.cli.main.main``, on real runs (``--sandbox none``) in a real repository."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.in_process import fresh_repo, ledger_of, run_main
from support.repo import git

from assay.adapters.store.records import RunClose
from assay.adapters.store.sql import Ledger
from assay.core.settle import Verdict, settle
from assay.core.tasks import Task
from assay.core.vocab import RunStatus, TaskStatus
from assay.engine.operations.task_removal import prune_tasks
from assay.engine.worker import QueueWorker

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "cli.schema.json").read_text()
)


def valid(name: str, document: object) -> None:
    jsonschema.Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{name}"}).validate(document)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = fresh_repo(tmp_path, monkeypatch)
    return root


assay = run_main


def run(capsys: pytest.CaptureFixture[str], title: str, *flags: str) -> dict[str, Any]:
    """One real run; its payload."""
    _, out, err = assay(
        capsys, "run", title, "--coder", "command", "--sandbox", "none", "--json", *flags
    )
    assert out, err
    payload: dict[str, Any] = json.loads(out)
    return payload


def held_with_a_kept_candidate(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    flags = ["--coder-command", "echo b > b.txt", "--validator", "false", "--max-attempts", "1"]
    return run(capsys, "fails", *flags)


def done_with_a_branch_for_you(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    flags = ["--coder-command", "echo c > c.txt", "--validator", "true", "--land", "branch"]
    return run(capsys, "lands", *flags)


def branches(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/assay/").split()


def mentions(repo: Path, *names: str) -> list[str]:
    """Every path under the home naming one of ``names`` (a task or a run id)."""
    home = repo / ".assay"
    return [str(p) for p in home.rglob("*") if any(n in p.name for n in names)]


def test_a_deleted_task_leaves_nothing_but_a_branch_left_for_you(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed = held_with_a_kept_candidate(capsys)
    landed = done_with_a_branch_for_you(capsys)
    other = held_with_a_kept_candidate(capsys)
    ids = [p["task_id"] for p in (failed, landed)]
    runs = [p["run_id"] for p in (failed, landed)]
    assert f"assay/{failed['run_id']}/seat-1" in branches(repo)
    assert mentions(repo, *runs)  # run folders and halt state
    legacy = repo / ".assay" / "tasks" / f"{ids[0]}.contract.json"
    legacy.parent.mkdir()
    legacy.write_text("{}")  # what an older assay wrote beside the ledger

    code, out, err = assay(capsys, "task", "delete", *ids, "--json")
    assert code == 0, err
    document = json.loads(out)
    valid("task_delete", document)
    assert [t["id"] for t in document["deleted"]] == ids
    assert document["deleted"][0]["runs"] == [failed["run_id"]]
    removed = {(x["kind"], x["run_id"]) for x in document["removed"]}
    assert ("branch", failed["run_id"]) in removed
    assert {("run_folder", r) for r in runs} <= removed and ("halt_state", runs[0]) in removed
    assert ("contract", None) in removed
    (left,) = document["left"]
    assert (left["kind"], left["target"]) == ("branch", f"assay/{landed['run_id']}/seat-1")

    assert mentions(repo, *ids, *runs) == []
    assert sorted(branches(repo)) == sorted(
        [f"assay/{landed['run_id']}/seat-1", f"assay/{other['run_id']}/seat-1"]
    )
    with ledger_of(repo) as ledger:
        assert [t.id for t in ledger.list_tasks()] == [other["task_id"]]
        assert {e.task_id for e in ledger.events()} == {other["task_id"]}
        assert {u.key.task_id for u in ledger.usage()} <= {other["task_id"]}
    assert git(repo, "status", "--porcelain") == ""


def test_the_words_and_a_dry_run(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed = held_with_a_kept_candidate(capsys)
    task_id, run_id = failed["task_id"], failed["run_id"]
    code, out, _ = assay(capsys, "task", "delete", task_id, "--dry-run")
    assert code == 0
    assert out.startswith(f"would delete {task_id}: fails (held; 1 run(s), ")
    assert f"would remove branch assay/{run_id}/seat-1\n" in out
    assert out.endswith("would delete 1 task(s)\n")
    assert branches(repo) and mentions(repo, run_id)  # nothing removed
    code, out, _ = assay(capsys, "task", "delete", task_id)
    assert code == 0 and out.startswith(f"deleted {task_id}: fails")
    assert f"removed run folder {repo / '.assay' / 'runs' / run_id}\n" in out
    assert branches(repo) == [] and mentions(repo, run_id) == []


def test_refused_all_or_nothing(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failed = held_with_a_kept_candidate(capsys)
    with ledger_of(repo) as ledger:
        now = datetime.now(UTC)
        running = Task.new(id="t-running", title="r", instruction="r", now=now)
        ledger.add_task(running)
        running.start(now, run_id="r-open")
        ledger.start_run(running, "r-open")
    code, out, err = assay(capsys, "task", "delete", failed["task_id"], "t-running", "t-nope")
    assert code == 2 and out == ""
    assert err.startswith("assay: nothing deleted: t-running: it is running (run r-open is open)")
    # The way is to stop its run: `task cancel` refuses a running task whose run it cannot reach.
    assert "stop its run first: `assay task stop t-running` on the machine that runs it" in err
    assert "Ctrl-C the `assay run` or `assay serve` that runs it" in err
    assert "a run whose process is gone is closed by `assay run --resume`" in err
    assert "t-nope: no such task (see `assay task list`)" in err
    with ledger_of(repo) as ledger:
        assert len(ledger.list_tasks()) == 2
    assert mentions(repo, failed["run_id"])
    for move in ("cancel", "hold", "release"):  # each says the same way, never each other
        code, out, err = assay(capsys, "task", move, "t-running")
        assert code == 2 and out == "", move
        assert "it is running" in err and "(its run settles it; stop the run first: " in err
        assert "Ctrl-C the `assay run` or `assay serve` that runs it" in err, move


# -- prune ----------------------------------------------------------------------------------


def test_prune_removes_only_finished_tasks_older_than_asked(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = held_with_a_kept_candidate(capsys)
    done = done_with_a_branch_for_you(capsys)
    queued = assay(capsys, "task", "add", "later", "--coder", "claude", "--no-check", "--json")
    queued_id = json.loads(queued[1])["id"]

    code, out, _ = assay(capsys, "task", "prune", "--older-than", "1h")
    assert (code, out) == (0, "nothing to prune: no done task unchanged for 1h\n")
    code, out, _ = assay(capsys, "task", "prune", "--older-than", "0", "--json")
    document = json.loads(out)
    valid("task_prune", document)
    assert [t["id"] for t in document["deleted"]] == [done["task_id"]]
    assert (document["older_than"], document["statuses"]) == ("0", ["done"])
    code, out, _ = assay(capsys, "task", "prune", "--older-than", "0", "--status", "held")
    assert out.startswith(f"deleted {held['task_id']}: fails (held;")
    with ledger_of(repo) as ledger:
        assert [t.id for t in ledger.list_tasks()] == [queued_id]  # queued: never pruned
    assert mentions(repo, held["run_id"], done["run_id"]) == []
    code, out, _ = assay(capsys, "task", "prune", "--older-than", "0", "--status", "done")
    assert (code, out) == (0, "nothing to prune: no done task\n")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--older-than", "0", "--status", "queued"], "prune never removes queued or running"),
        (["--older-than", "0", "--status", "running"], "prune never removes queued or running"),
        (["--older-than", "0", "--status", "dnoe"], "--status dnoe: no such status"),
        (["--older-than", "7"], "--older-than: '7' is not a duration"),
        ([], "Missing option '--older-than'"),
    ],
)
def test_prune_refuses_what_it_would_guess(
    repo: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    code, _, err = assay(capsys, "task", "prune", *args)
    assert code == 2 and said in err
    assert not (repo / ".assay").exists()


def test_prune_judges_age_by_the_last_change_checked_under_the_lock(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task that changed after the cutoff stays, even when it was old when listed."""
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for task_id, age_days in (("old", 10), ("young", 1)):
        created = t0 - timedelta(days=age_days)
        task = Task.new(id=task_id, title=task_id, instruction="i", now=created)
        ledger.add_task(task)
        task.start(created, run_id=f"{task_id}-r")
        ledger.start_run(task, f"{task_id}-r")
    for task_id, age_days in (("old", 10), ("young", 1)):
        when = t0 - timedelta(days=age_days)
        task = ledger.get_task(task_id)
        settlement = settle(task, Verdict(status=RunStatus.MERGED), "ok", 3, when)
        ledger.close_run(
            RunClose(run_id=f"{task_id}-r", status=RunStatus.MERGED, task=task,
                     settlement=settlement, finished_at=when)
        )  # fmt: skip
    # As listed, "young" looked old (it changed after the listing): the lock's check keeps it.
    listed, _ = ledger.scan_tasks()
    stale = [t.model_copy(update={"updated_at": t0 - timedelta(days=9)}) for t in listed]
    monkeypatch.setattr(ledger, "scan_tasks", lambda status=None: (stale, []))
    removal = prune_tasks(
        repo=repo, home=tmp_path / "home", ledger=ledger, older_than=5 * 86400, now=t0,
        is_alive=lambda _: False,
    )  # fmt: skip
    assert [t.id for t in removal.deletion.deleted] == ["old"]
    assert removal.deletion.kept == [("young", "it changed less than 5d ago")]
    with Ledger.open(ledger.url) as fresh:
        assert [t.id for t in fresh.list_tasks()] == ["young"]
        assert fresh.get_task("young").status is TaskStatus.DONE


# -- deleting while serve works the queue -----------------------------------------------------


def test_a_task_deleted_under_a_queue_worker_is_skipped_not_fatal(tmp_path: Path) -> None:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    now = datetime.now(UTC)
    for task_id in ("gone", "stays"):
        ledger.add_task(Task.new(id=task_id, title=task_id, instruction="i", now=now))
    ran: list[str] = []

    def step(task: Task) -> None:
        if task.id == "gone":  # deleted by another process between the scan and the claim
            ledger.delete_tasks(["gone"])
        task.start(datetime.now(UTC), run_id=f"{task.id}-r")
        ledger.start_run(task, f"{task.id}-r")
        ran.append(task.id)

    served = QueueWorker(ledger, step, once=True, poll=0.01).run()
    assert ran == ["stays"] and served.runs == 1
    assert [t.id for t in ledger.list_tasks()] == ["stays"]


def test_the_statuses_prune_offers_are_the_ones_it_removes() -> None:
    from assay.cli import tasks
    from assay.engine.operations import task_removal

    assert [s.value for s in task_removal.PRUNABLE] == tasks.PRUNABLE
