"""The worker's activities against a real ledger, in Temporal's activity environment (no
server): open holds the run here; a lost run is closed once, refunded, and the refund streak
holds the task in the end; a stop holds it as the operator asked."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from support.repo import Repo, make_repo
from support.workers import add_task, service_env
from temporalio.testing import ActivityEnvironment

from assay.adapters.repo_identity import repository_id
from assay.adapters.store.contracts import load_task_contract
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.tasks import Task
from assay.engine.effects import OpenRequest
from assay.engine.local.executor import LocalEffects
from assay.engine.temporal.activities import Activities
from assay.engine.temporal.calls import CloseIn


def _activities(repo: Path, ledger: Ledger) -> Activities:
    home = repo / ".assay"

    def effects_for(task: Task, contract: Contract) -> LocalEffects:
        return LocalEffects(
            repo=repo,
            home=home,
            ledger=ledger,
            task=task,
            contract=contract,
            operator_env=os.environ,
        )

    return Activities(
        queue="assay-test-worker",
        repository=repository_id(repo),  # a worker of the repository its tasks belong to
        repo=repo,
        home=home,
        ledger=ledger,
        effects_for=effects_for,
        contract_for=lambda task_id: load_task_contract(ledger, task_id, home=home),
    )


def _queued(tmp_path: Path, postgres_url: str) -> tuple[Repo, str, Ledger, Activities]:
    """A repository with one queued instant task on PostgreSQL, and a worker's activities."""
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "c.yaml",
        'task: x\nscope: {allow: ["src/**"]}\ncoder: {kind: command, command: "true"}\n'
        'validators:\n  - {id: ok, kind: command, run: "true"}\nland: none\nsandbox: none\n',
    )
    task_id = add_task(repo.root, contract, service_env(postgres_url))
    ledger = Ledger.open(postgres_url)
    return repo, task_id, ledger, _activities(repo.root, ledger)


def test_lost_runs_close_once_refunded_until_the_streak_holds_the_task(
    tmp_path: Path, postgres_url: str
) -> None:
    repo, task_id, ledger, acts = _queued(tmp_path, postgres_url)
    env = ActivityEnvironment()
    for n in range(1, 4):
        run_id = f"r-lost-{n}"
        opened = asyncio.run(env.run(acts.open, OpenRequest(task_id, run_id)))
        assert opened.handle is not None and opened.handle.worker == "assay-test-worker"
        assert opened.prepared and run_id in acts.runs  # its seats are held here
        for held in acts.runs.values():  # the worker is gone: nobody holds it any more
            held.fx.close()
        acts.runs.clear()
        lost = CloseIn(task_id, run_id, f"environment error: the worker was lost ({n})")
        closed = asyncio.run(env.run(acts.close, lost))
        assert closed.closed_now and closed.status == "failed"
        again = asyncio.run(env.run(acts.close, lost))  # a retried close: nothing twice
        assert not again.closed_now and again.status == "failed"
        expected = "failed" if n < 3 else "held"  # max_refunds 3: the third refund holds it
        assert closed.task.status.value == expected, closed.task
        assert closed.task.attempts == 0  # every lost run refunded
        assert closed.runnable is (n < 3)
    held = ledger.get_task(task_id)
    assert held.hold_source is not None and held.hold_source.value == "machine"
    runs = ledger.runs(task_id)
    assert [r.status.value for r in runs] == ["failed"] * 3 and not any(r.open for r in runs)
    interrupted = [e for e in ledger.events(task_id) if e.kind == "run.interrupted"]
    assert len(interrupted) == 3  # each closed exactly once
    payload = json.loads((repo.root / ".assay" / "runs" / "r-lost-3" / "payload.json").read_text())
    assert payload["halt_type"] == "environment_error" and payload["attempt_spent"] is False


def test_a_stop_closes_the_held_run_here_and_holds_the_task(
    tmp_path: Path, postgres_url: str
) -> None:
    _, task_id, _, acts = _queued(tmp_path, postgres_url)
    env = ActivityEnvironment()
    opened = asyncio.run(env.run(acts.open, OpenRequest(task_id, "r-stop")))
    assert opened.handle is not None
    # A second open of the same task is refused by the ledger's claim: never two runs.
    other = asyncio.run(env.run(acts.open, OpenRequest(task_id, "r-other")))
    assert other.handle is None and other.not_runnable
    stop = CloseIn(
        task_id, "r-stop", "interrupted: cancelled", hold="cancelled by an operator",
        by="ada", via="web", action="cancel",
    )  # fmt: skip
    closed = asyncio.run(env.run(acts.close, stop))
    assert closed.closed_now and "r-stop" not in acts.runs  # let go here
    assert (
        closed.task.status.value == "held" and closed.task.hold_reason == "cancelled by an operator"
    )
    assert not closed.runnable
    # The hold is recorded with who sent the stop, as an operator's move records one.
    saved = [e.data for e in acts.ledger.events(task_id) if e.kind.value == "task.saved"]
    assert saved[-1] == {
        "status": "held", "action": "cancel", "by": "ada", "via": "web",
        "reason": "cancelled by an operator",
    }  # fmt: skip


def test_open_refuses_a_contract_that_would_hand_on_the_ledgers_password(
    tmp_path: Path, postgres_url: str
) -> None:
    """The worker's own environment decides (its ledger URL may hold a password the machine
    that queued the task never had): nothing of the run starts, and the reason never says it."""
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "c.yaml",
        'task: x\nscope: {allow: ["src/**"]}\ncoder: {kind: command, command: "true"}\n'
        "env: {DB_PASSWORD: $PGPASSWORD}\nland: none\nsandbox: none\n",
    )
    task_id = add_task(repo.root, contract, service_env(postgres_url))
    ledger = Ledger.open(postgres_url)
    acts = _activities(repo.root, ledger)
    acts.env = {
        "ASSAY_DATABASE_URL": "postgresql+psycopg://assay:worker-pw-1234@db/assay",
        "PGPASSWORD": "worker-pw-1234",
    }
    opened = asyncio.run(ActivityEnvironment().run(acts.open, OpenRequest(task_id, "r-leak")))
    assert opened.handle is None and opened.not_runnable is not None
    assert "env: DB_PASSWORD holds the ledger's password" in opened.not_runnable
    assert "worker-pw-1234" not in opened.not_runnable
    assert not acts.runs and ledger.runs(task_id) == []
    assert ledger.get_task(task_id).status.value == "queued"


def test_open_holds_a_task_this_worker_cannot_run_and_starts_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    """Queued elsewhere (`task add --no-check`), met by a worker without the coder's program:
    held (machine) with the problem, as `assay serve` holds it; never refunded or retried."""
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "c.yaml",
        'task: x\ncoder: {kind: command, command: "assay-no-such-agent --go"}\n'
        "land: none\nsandbox: none\n",
    )
    task_id = add_task(repo.root, contract, service_env(postgres_url), "--no-check")
    ledger = Ledger.open(postgres_url)
    acts = _activities(repo.root, ledger)
    opened = asyncio.run(ActivityEnvironment().run(acts.open, OpenRequest(task_id, "r-unset")))
    assert opened.handle is None and opened.not_runnable is not None
    assert "assay-no-such-agent not found on PATH" in opened.not_runnable
    assert not acts.runs and ledger.runs(task_id) == []
    held = ledger.get_task(task_id)
    assert (held.status.value, held.hold_source, held.attempts) == ("held", "machine", 0)
    assert held.hold_reason is not None and "assay-no-such-agent" in held.hold_reason
