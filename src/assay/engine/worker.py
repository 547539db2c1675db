"""The queue worker: claim, run, recover — what ``assay serve`` does, without the printing.

It scans the ledger, hands each runnable task to a *step* (N at a time, each in a thread of
its own), and repeats until the process is asked to stop (or, with ``once``, until nothing
is runnable and every step has returned). The step is the one thing that differs between
executors: the local one runs the task here (``runner.run_task``); the Temporal one submits
the task's workflow and waits for it. Everything else — which tasks are runnable, how many at
once, telling a wait or an unreadable task once, collecting what closed runs left — is here,
once, and told to a :class:`QueueEvents` (the CLI prints it).

A task two workers both pick is run by one: the step's claim (``Ledger.start_run``) refuses
the second with ``LedgerConflict``, which the worker takes as "someone else has it". A worker
given its ``repository`` sees only that repository's tasks and those that name none: another
repository's task is its own workers' to run, never touched here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from assay.adapters.process import stop_requested, wait_unless_stopped
from assay.adapters.store.sql import Everywhere, Ledger, LedgerConflict, TaskNotFound
from assay.core.tasks import Task
from assay.engine.admission import Unrunnable
from assay.engine.local.interrupt import RunInterrupted

R = TypeVar("R")

BUSY_PAUSE_SECONDS = 0.05
"""How soon the queue is looked at again after handing out work (a step may free a slot)."""


class QueueEvents(Generic[R]):
    """What the worker has to say; every method is a no-op here, for a caller to override."""

    def recovered(self, run_id: str) -> None:
        """An open run left by a dead process was closed before any work began."""

    def unreadable(self, task_id: str, problem: str) -> None:
        """A task row that is not a valid task: said once; the other tasks still run."""

    def waiting(self, task: Task, now: datetime) -> None:
        """A task waits (its provider's quota, a backoff): said once per wait."""

    def finished(self, task_id: str, result: R) -> None:
        """A step returned: what it made of the task."""

    def interrupted(self, task_id: str, stop: RunInterrupted) -> None:
        """A stop request ended the task's run; it was closed as interrupted."""

    def unrunnable(self, task_id: str, held: Unrunnable) -> None:
        """The step found the task's settings cannot run on this machine and held it."""

    def stopping(self) -> None:
        """An interrupt arrived outside a run: the worker waits for the runs in progress."""


@dataclass
class Served:
    """What a worker did, counted as each step returned."""

    runs: int = 0  # steps that ran and closed a run, interrupted ones included
    interrupted: int = 0


@dataclass(frozen=True)
class Cadence:
    """Something the worker does between scans every ``every`` seconds (0: never), the first
    time at once: a worker restarted often still does it."""

    action: Callable[[], None]
    every: float


class QueueWorker(Generic[R]):
    """Works the ledger's queue with ``step`` until stopped.

    ``step(task)`` runs one task (the task as just read, runnable) and returns what it made of
    it; it runs in a worker thread, at most ``concurrency`` at once. A step that finds the
    task cannot run here holds it and raises :class:`Unrunnable` (told, the worker goes on).
    An exception from a step other than a lost claim, a held task or an interrupted run ends
    :meth:`run` with that exception, after
    the steps in progress returned (a step that refuses a task it cannot run, exit 2, does so).
    """

    def __init__(
        self,
        ledger: Ledger,
        step: Callable[[Task], R],
        *,
        concurrency: int = 1,
        once: bool = False,
        poll: float = 2.0,
        recover: Callable[[], Iterable[str]] | None = None,
        every: Iterable[Cadence] = (),
        events: QueueEvents[R] | None = None,
        clock: Callable[[], datetime] | None = None,
        stopping: Callable[[], bool] = lambda: stop_requested() is not None,
        abandon: Callable[[], None] | None = None,
        repository: str | Everywhere | None = Everywhere.EVERY,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.ledger = ledger
        self.step = step
        self.concurrency = concurrency
        self.once = once
        self.poll = poll
        self.recover = recover
        self.every = list(every)
        self.events: QueueEvents[R] = events or QueueEvents()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.stopping = stopping  # SIGINT / SIGTERM by default (see ``assay.cli.signals``)
        # Tells the steps in flight to stop waiting on work that goes on elsewhere (Temporal's
        # workflows): a stop must not wait out that work. The local steps need none: the stop
        # ends their runs itself.
        self.abandon = abandon
        self.repository = repository  # whose tasks it runs (EVERY: all, for a submitter)
        self.served = Served()
        self._busy: set[str] = set()
        self._announced: dict[str, datetime] = {}  # task -> the wait already told
        self._skipped: set[str] = set()  # unreadable tasks already told
        self._guard = threading.Lock()

    def run(self) -> Served:
        """Recover, then work the queue until a stop request (or, with ``once``, until idle)."""
        if self.recover is not None:
            for run_id in self.recover():
                self.events.recovered(run_id)
        due = [time.monotonic() for _ in self.every]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures: list[Future[None]] = []
            try:
                while not self.stopping():
                    for n, cadence in enumerate(self.every):
                        if cadence.every and time.monotonic() >= due[n]:
                            cadence.action()
                            due[n] = time.monotonic() + cadence.every
                    handed = self._hand_out(pool, futures)
                    for future in [f for f in futures if f.done()]:
                        futures.remove(future)
                        future.result()  # a step's own failure ends the worker
                    if self.once and not handed and not futures:
                        break
                    self._pause(BUSY_PAUSE_SECONDS if handed else self.poll, futures)
            except KeyboardInterrupt:
                self.events.stopping()
                interrupted = True
            else:
                interrupted = self.stopping()
            if interrupted and self.abandon is not None:
                self.abandon()  # before the pool waits for the steps in flight
        return self.served

    def _pause(self, seconds: float, futures: list[Future[None]]) -> None:
        """Wait ``seconds``, or less when a step returns first (its slot is free and, with
        ``once``, the queue may be done) or a stop is asked for (a SIGINT the kernel gave a
        step's thread is acted on at the next tick, not after a whole poll)."""
        wait_unless_stopped(futures, seconds, self.stopping)

    def _hand_out(self, pool: ThreadPoolExecutor, futures: list[Future[None]]) -> list[str]:
        """One scan: tell what is new, and start a step for each runnable task a slot allows."""
        now = self.clock()
        tasks, unreadable = self.ledger.scan_tasks(runs_in=self.repository)
        for task_id, problem in unreadable:
            if task_id not in self._skipped:
                self._skipped.add(task_id)
                self.events.unreadable(task_id, problem)
        for task in tasks:
            if task.waiting(now) and self._announced.get(task.id) != task.not_before:
                assert task.not_before is not None
                self._announced[task.id] = task.not_before
                self.events.waiting(task, now)
        with self._guard:
            # Asked under the guard a step frees its slot with: a step that saw the stop and
            # returned since the loop looked is seen here, and no task starts after a stop.
            if self.stopping():
                return []
            free = self.concurrency - len(self._busy)
            chosen = [t.id for t in tasks if t.runnable(now) and t.id not in self._busy][:free]
            self._busy.update(chosen)
        futures.extend(pool.submit(self._work, task_id) for task_id in chosen)
        return chosen

    def _elsewhere(self, task: Task) -> bool:
        return not isinstance(self.repository, Everywhere) and task.belongs_elsewhere(
            self.repository
        )

    def _work(self, task_id: str) -> None:
        try:
            # Read again: another worker may have run it since the scan.
            task = self.ledger.get_task(task_id)
            if not task.runnable(self.clock()) or self._elsewhere(task):
                return
            result = self.step(task)
            with self._guard:
                self.served.runs += 1
            self.events.finished(task_id, result)
        except LedgerConflict:
            pass  # another worker claimed it first
        except TaskNotFound:
            pass  # deleted since the scan (`assay task delete|prune`): nothing to run
        except Unrunnable as held:  # held, never started: nothing ran
            self.events.unrunnable(task_id, held)
        except RunInterrupted as stop:
            with self._guard:
                self.served.runs += 1
                self.served.interrupted += 1
            self.events.interrupted(task_id, stop)
        finally:
            with self._guard:
                self._busy.discard(task_id)
