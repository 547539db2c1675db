"""Drive tasks through runs against a ``Ledger`` the way the engine will: start, settle, close.

Shared by the ledger tests, their subprocesses and ``bench/ledger.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from alembic import command
from alembic.config import Config

from assay.adapters.store.records import DispatchRecord, EventIn, RunClose, RunRecord
from assay.adapters.store.sql import MIGRATIONS, Ledger
from assay.core.attempts import AttemptRecord
from assay.core.settle import Verdict, settle
from assay.core.tasks import Task
from assay.core.vocab import AttemptOutcome, RunStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class LedgerTarget:
    """One empty database to test against; ``open()`` may be called more than once."""

    backend: str
    url: str
    schema: str | None = None
    opened: list[Ledger] = field(default_factory=list)

    def open(self, *, migrate: bool = True) -> Ledger:
        ledger = Ledger(self.url, schema=self.schema)
        if migrate:
            ledger.migrate()
        self.opened.append(ledger)
        return ledger


@dataclass(frozen=True)
class Wave:
    """One attempt to record: its outcome, how many coders it dispatched, what it found."""

    outcome: AttemptOutcome = AttemptOutcome.BLOCKED
    dispatches: int = 1
    findings: Sequence[str] = ()


BENCH_WAVES = (
    Wave(AttemptOutcome.BLOCKED, 2, ("test_a failed",)),
    Wave(AttemptOutcome.BLOCKED, 1, ("test_b failed",)),
    Wave(AttemptOutcome.PASSED, 1, ()),
)
"""Three attempts, four dispatches: the shape the benchmark records per close."""


class Driver:
    def __init__(self, ledger: Ledger, *, start: datetime = T0) -> None:
        self.ledger = ledger
        self.clock = start

    def now(self) -> datetime:
        self.clock += timedelta(seconds=1)
        return self.clock

    def add(self, task_id: str) -> Task:
        task = Task.new(id=task_id, title=f"title {task_id}", instruction="do it", now=self.now())
        self.ledger.add_task(task)
        return task

    def start(self, task_id: str, run_id: str) -> Task:
        task = self.ledger.get_task(task_id)
        task.start(self.now(), run_id=run_id)
        self.ledger.start_run(task, run_id)
        return task

    def close_for(
        self,
        task: Task,
        run_id: str,
        verdict: Verdict,
        waves: Sequence[Wave] = (Wave(),),
        *,
        max_attempts: int = 3,
        judge_calls: int = 0,
        land_attempts: int = 0,
        events: Sequence[EventIn] = (),
    ) -> RunClose:
        """Settle ``task`` (in memory) and build the close of ``run_id``."""
        now = self.now()
        settlement = settle(task, verdict, f"run {run_id}: {verdict.status}", max_attempts, now)
        attempts = [
            AttemptRecord(
                attempt=n,
                outcome=wave.outcome,
                coder_dispatches=wave.dispatches,
                failures=list(wave.findings),
                finding_signatures=list(wave.findings),
            )
            for n, wave in enumerate(waves, start=1)
        ]
        dispatches = [
            DispatchRecord(
                dispatch_id=f"{run_id}-a{n}-s{seat}",
                attempt=n,
                seat=seat,
                coder="command",
                viable=wave.outcome is not AttemptOutcome.ERROR,
                tokens_used=1000,
                wall_time_ms=1500,
            )
            for n, wave in enumerate(waves, start=1)
            for seat in range(wave.dispatches)
        ]
        return RunClose(
            run_id=run_id,
            status=verdict.status,
            task=task,
            settlement=settlement,
            reason=f"run {run_id}",
            attempts=attempts,
            dispatches=dispatches,
            judge_calls=judge_calls,
            land_attempts=land_attempts,
            payload_path=f"runs/{run_id}/payload.json",
            finished_at=now,
            events=list(events),
        )

    def cycle(
        self,
        task_id: str,
        run_id: str,
        status: RunStatus = RunStatus.BLOCKED,
        waves: Sequence[Wave] = (Wave(),),
        **kwargs: object,
    ) -> RunRecord:
        """Start, settle and close one run of ``task_id``."""
        task = self.start(task_id, run_id)
        verdict = kwargs.pop("verdict", None) or Verdict(status=status)
        assert isinstance(verdict, Verdict)
        close = self.close_for(task, run_id, verdict, waves, **kwargs)  # type: ignore[arg-type]
        return self.ledger.close_run(close)


def work(url: str, schema: str | None, prefix: str, tasks: int, runs: int) -> None:
    """Drive ``tasks`` tasks through ``runs`` failed runs each (one worker's share)."""
    ledger = Ledger(url, schema=schema)
    try:
        driver = Driver(ledger)
        for t in range(tasks):
            driver.add(f"{prefix}-t{t}")
        for r in range(runs):
            for t in range(tasks):
                driver.cycle(
                    f"{prefix}-t{t}",
                    f"{prefix}-t{t}-r{r}",
                    RunStatus.FAILED,
                    BENCH_WAVES,
                    max_attempts=runs + 1,
                    judge_calls=1,
                )
    finally:
        ledger.close()


if __name__ == "__main__":
    import sys

    _url, _schema, _prefix, _tasks, _runs = sys.argv[1:]
    work(_url, _schema or None, _prefix, int(_tasks), int(_runs))


def alembic_to(ledger: Ledger, revision: str, *, down: bool = False) -> None:
    """Upgrade (or, ``down``, downgrade) ``ledger``'s schema to ``revision`` with Alembic."""
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    with ledger._engine.begin() as conn:
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, revision)
