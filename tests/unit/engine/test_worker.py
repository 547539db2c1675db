"""The queue worker against a real SQLite ledger, with steps that claim and close real runs."""

from __future__ import annotations

import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.adapters.process import STOP_TICK_SECONDS
from assay.adapters.store.records import RunClose
from assay.adapters.store.sql import Ledger
from assay.core.settle import Verdict, settle
from assay.core.tasks import Task
from assay.core.vocab import RunStatus, TaskStatus
from assay.engine.admission import Unrunnable, hold_unrunnable
from assay.engine.local.interrupt import RunInterrupted
from assay.engine.worker import Cadence, QueueEvents, QueueWorker

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Heard(QueueEvents[TaskStatus]):
    """Everything the worker said, in order."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def _note(self, what: str, detail: str) -> None:
        with self._lock:
            self.said.append((what, detail))

    def recovered(self, run_id: str) -> None:
        self._note("recovered", run_id)

    def unreadable(self, task_id: str, problem: str) -> None:
        self._note("unreadable", task_id)

    def waiting(self, task: Task, now: datetime) -> None:
        self._note("waiting", task.id)

    def finished(self, task_id: str, result: TaskStatus) -> None:
        self._note("finished", f"{task_id}={result}")

    def interrupted(self, task_id: str, stop: RunInterrupted) -> None:
        self._note("interrupted", task_id)

    def unrunnable(self, task_id: str, held: Unrunnable) -> None:
        self._note("unrunnable", f"{task_id}: {held}")

    def of(self, what: str) -> list[str]:
        return [detail for kind, detail in self.said if kind == what]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")


def add(ledger: Ledger, *ids: str) -> None:
    for n, task_id in enumerate(ids):
        ledger.add_task(Task.new(id=task_id, title=task_id, instruction="i", now=NOW + _s(n)))


def _s(n: int) -> timedelta:
    return timedelta(seconds=n)


def run_to(ledger: Ledger, task: Task, status: RunStatus = RunStatus.MERGED) -> TaskStatus:
    """A real run of ``task``: claimed in the ledger, settled, closed."""
    run_id = f"r-{task.id}-{len(task.run_ids) + 1}"
    task.start(NOW, run_id=run_id)
    ledger.start_run(task, run_id, started_at=NOW)
    settlement = settle(task, Verdict(status=status), f"{status}", 3, NOW)
    ledger.close_run(
        RunClose(run_id=run_id, status=status, task=task, settlement=settlement, finished_at=NOW)
    )
    return task.status


def worker(ledger: Ledger, step, **options) -> tuple[QueueWorker[TaskStatus], Heard]:  # type: ignore[no-untyped-def]
    heard = Heard()
    options.setdefault("once", True)
    options.setdefault("poll", 0.01)
    return QueueWorker(ledger, step, events=heard, clock=lambda: NOW, **options), heard


def test_every_runnable_task_runs_once_and_is_told(ledger: Ledger) -> None:
    add(ledger, "a", "b", "c")
    done, heard = worker(ledger, lambda task: run_to(ledger, task))
    served = done.run()
    assert (served.runs, served.interrupted) == (3, 0)
    assert sorted(heard.of("finished")) == ["a=done", "b=done", "c=done"]
    assert [len(ledger.runs(t)) for t in "abc"] == [1, 1, 1]


def test_a_failed_task_is_run_again_until_settle_holds_it(ledger: Ledger) -> None:
    add(ledger, "a")
    done, heard = worker(ledger, lambda task: run_to(ledger, task, RunStatus.STALLED))
    assert done.run().runs == 3  # max_attempts 3: failed, failed, then held
    assert heard.of("finished") == ["a=failed", "a=failed", "a=held"]
    assert ledger.get_task("a").status is TaskStatus.HELD


def test_no_more_than_concurrency_steps_at_once(ledger: Ledger) -> None:
    add(ledger, *(f"t{n}" for n in range(6)))
    running, peak, guard = [0], [0], threading.Lock()

    def step(task: Task) -> TaskStatus:
        with guard:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with guard:
            running[0] -= 1
        return run_to(ledger, task)

    done, _ = worker(ledger, step, concurrency=2)
    assert done.run().runs == 6
    assert peak[0] == 2


def test_a_returning_step_wakes_the_worker_before_its_poll_is_out(ledger: Ledger) -> None:
    add(ledger, "a", "b")
    gate = threading.Semaphore(0)

    def step(task: Task) -> TaskStatus:
        gate.acquire(timeout=5)  # returns only once the worker is waiting on it
        return run_to(ledger, task)

    done, _ = worker(ledger, step, poll=30.0)
    threading.Timer(0.2, gate.release).start()
    threading.Timer(0.4, gate.release).start()
    start = time.monotonic()
    assert done.run().runs == 2
    assert time.monotonic() - start < 5  # never a 30 s poll after a step returned


def test_a_claim_another_worker_won_is_silent_and_not_counted(
    ledger: Ledger, tmp_path: Path
) -> None:
    add(ledger, "a")
    other = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")

    def step(task: Task) -> TaskStatus:
        mine = task.model_copy(deep=True)
        rival = other.get_task(task.id)
        rival.start(NOW, run_id="r-rival")
        other.start_run(rival, "r-rival", started_at=NOW)  # the other worker got there first
        return run_to(ledger, mine)  # LedgerConflict at the claim

    done, heard = worker(ledger, step)
    assert done.run().runs == 0
    assert heard.said == []
    assert [r.id for r in ledger.runs("a")] == ["r-rival"]


def test_a_waiting_task_is_told_once_and_does_not_keep_once_running(ledger: Ledger) -> None:
    add(ledger, "a", "b")
    task = ledger.get_task("a")  # a run lost to quota: refunded, and waits an hour
    task.start(NOW, run_id="r-quota")
    ledger.start_run(task, "r-quota", started_at=NOW)
    lost = Verdict(status=RunStatus.STALLED, quota_hit=True)
    settlement = settle(task, lost, "quota", 3, NOW)
    task.wait_until(NOW + timedelta(hours=1), NOW)
    ledger.close_run(
        RunClose(
            run_id="r-quota",
            status=RunStatus.STALLED,
            task=task,
            settlement=settlement,
            finished_at=NOW,
        )
    )
    slow = threading.Event()

    def step(task: Task) -> TaskStatus:
        slow.wait(0.2)  # several scans pass meanwhile
        return run_to(ledger, task)

    done, heard = worker(ledger, step)
    assert done.run().runs == 1
    assert heard.of("waiting") == ["a"]
    assert heard.of("finished") == ["b=done"]
    assert ledger.get_task("a").status is TaskStatus.FAILED  # still waiting, not run
    assert len(ledger.runs("a")) == 1


def test_an_unreadable_task_is_told_once_and_the_others_run(ledger: Ledger) -> None:
    add(ledger, "bad", "good")
    with ledger._engine.begin() as conn:
        conn.execute(sa.text("UPDATE tasks SET status = 'bogus' WHERE id = 'bad'"))

    def step(task: Task) -> TaskStatus:
        time.sleep(0.2)  # several scans pass meanwhile
        return run_to(ledger, task)

    done, heard = worker(ledger, step)
    assert done.run().runs == 1
    assert heard.of("unreadable") == ["bad"]
    assert heard.of("finished") == ["good=done"]


def test_an_interrupted_run_counts_and_is_told(ledger: Ledger) -> None:
    add(ledger, "a")

    asked = threading.Event()

    def step(task: Task) -> TaskStatus:
        asked.set()  # SIGTERM arrived while the run worked: the worker stops after it
        raise RunInterrupted(signal.SIGTERM)

    done, heard = worker(ledger, step, once=False, stopping=asked.is_set)
    served = done.run()
    assert (served.runs, served.interrupted) == (1, 1)
    assert heard.of("interrupted") == ["a"]


def test_a_step_that_saw_the_stop_while_the_loop_scanned_is_not_started_again(
    ledger: Ledger,
) -> None:
    add(ledger, "a")
    asked = threading.Event()
    scanning = threading.Event()
    steps: list[str] = []
    done: QueueWorker[TaskStatus]
    scan = ledger.scan_tasks

    def slow_scan(**chosen):  # type: ignore[no-untyped-def]
        found = scan(**chosen)
        if steps:  # the loop looked before the stop; the step returns while it scans
            scanning.set()
            while done._busy:
                time.sleep(0.005)
        return found

    def step(task: Task) -> TaskStatus:
        steps.append(task.id)
        if len(steps) == 1:
            scanning.wait(10)
        asked.set()  # SIGTERM: this run ends interrupted, its task runnable again
        raise RunInterrupted(signal.SIGTERM)

    ledger.scan_tasks = slow_scan  # type: ignore[method-assign]
    done, _ = worker(ledger, step, once=False, stopping=asked.is_set)
    served = done.run()
    assert steps == ["a"] and (served.runs, served.interrupted) == (1, 1)


def test_a_task_this_machine_cannot_run_is_held_told_and_never_run_again(ledger: Ledger) -> None:
    add(ledger, "broken", "good")
    steps: list[str] = []

    def step(task: Task) -> TaskStatus:
        steps.append(task.id)
        if task.id == "broken":
            problems = ["nosuchprog not found"]
            raise Unrunnable(hold_unrunnable(ledger, task.id, problems, NOW), problems)
        return run_to(ledger, task)

    done, heard = worker(ledger, step)
    served = done.run()
    assert served.runs == 1 and sorted(steps) == ["broken", "good"]  # asked once, never again
    assert heard.of("unrunnable") == [
        "broken: this machine cannot run the task as set: nosuchprog not found"
    ]
    held = ledger.get_task("broken")
    assert (held.status, held.attempts, ledger.runs("broken")) == (TaskStatus.HELD, 0, [])


def test_a_steps_own_failure_ends_the_worker_after_the_others_return(ledger: Ledger) -> None:
    add(ledger, "bad", "slow")
    finished = threading.Event()

    def step(task: Task) -> TaskStatus:
        if task.id == "bad":
            raise RuntimeError("refused: this machine cannot confine it")
        time.sleep(0.2)
        status = run_to(ledger, task)
        finished.set()
        return status

    done, _ = worker(ledger, step, concurrency=2)
    with pytest.raises(RuntimeError, match="cannot confine"):
        done.run()
    assert finished.is_set()  # the run in progress closed before the error surfaced
    assert ledger.get_task("bad").status is TaskStatus.QUEUED  # untouched


def test_recovery_comes_first_and_cadences_run_at_once_then_on_time(ledger: Ledger) -> None:
    add(ledger, "a")
    order: list[str] = []

    def step(task: Task) -> TaskStatus:
        order.append(f"run {task.id}")
        time.sleep(0.25)
        return run_to(ledger, task)

    def recover() -> list[str]:
        order.append("recover")
        return ["r-old"]

    done, heard = worker(
        ledger,
        step,
        recover=recover,
        every=[
            Cadence(lambda: order.append("gc"), 0.1),
            Cadence(lambda: order.append("never"), 0),
        ],
    )
    done.run()
    assert order[:3] == ["recover", "gc", "run a"]
    assert 2 <= order.count("gc") <= 5  # at start, then about every 0.1 s of a 0.25 s run
    assert "never" not in order
    assert heard.of("recovered") == ["r-old"]


def test_a_stop_request_ends_the_loop_before_any_work(ledger: Ledger) -> None:
    add(ledger, "a")
    done, heard = worker(ledger, lambda task: run_to(ledger, task), stopping=lambda: True)
    assert done.run().runs == 0
    assert ledger.get_task("a").status is TaskStatus.QUEUED and heard.said == []


def test_concurrency_must_be_positive(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        QueueWorker(ledger, lambda task: task.status, concurrency=0)


def test_a_signal_the_kernel_gives_a_steps_thread_is_handled_within_a_tick(
    ledger: Ledger,
) -> None:
    """Python runs a signal's handler only in the main thread; a SIGINT the kernel hands to a
    step's thread must not wait for the worker's poll to run it (``serve`` polls every 2 s)."""
    add(ledger, "a")
    heard = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda *_: heard.set())

    def step(task: Task) -> TaskStatus:
        time.sleep(0.3)  # the worker waits out its poll by now
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        heard.wait(10)  # a coder that ends only when the stop reaches it
        return run_to(ledger, task)

    try:
        done, _ = worker(ledger, step, poll=30.0)
        start = time.monotonic()
        assert done.run().runs == 1
        assert time.monotonic() - start < 0.3 + 5 * STOP_TICK_SECONDS
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_stop_tells_the_steps_in_flight_to_give_up_and_does_not_wait_them_out(
    ledger: Ledger,
) -> None:
    """A step that waits on work elsewhere (a Temporal workflow, which goes on without this
    process) is told to stop waiting; the worker never waits out the work itself."""
    add(ledger, "a")
    given_up, stop = threading.Event(), threading.Event()

    def step(task: Task) -> TaskStatus:
        stop.set()  # the operator's Ctrl-C, while the step waits
        given_up.wait(10)
        return task.status

    done, _ = worker(ledger, step, once=False, stopping=stop.is_set, abandon=given_up.set)
    start = time.monotonic()
    done.run()
    assert given_up.is_set() and time.monotonic() - start < 5


def test_a_worker_of_a_repository_runs_its_own_and_unplaced_tasks_never_another_s(
    ledger: Ledger,
) -> None:
    """Another repository's task is skipped silently (its own workers run it): never claimed,
    held, waited on or told; a task that names no repository runs anywhere, as before."""
    for n, (task_id, repository) in enumerate(
        [("mine", "gh.io/o/a"), ("theirs", "gh.io/o/b"), ("anyone", None)]
    ):
        task = Task.new(id=task_id, title=task_id, instruction="i", now=NOW + _s(n))
        ledger.add_task(task.model_copy(update={"repository": repository, "branch": "main"}))
    done, heard = worker(ledger, lambda task: run_to(ledger, task), repository="gh.io/o/a")
    served = done.run()
    assert served.runs == 2 and sorted(heard.of("finished")) == ["anyone=done", "mine=done"]
    theirs = ledger.get_task("theirs")
    assert theirs.status is TaskStatus.QUEUED and theirs.run_ids == [] and theirs.attempts == 0
    assert not [detail for _, detail in heard.said if "theirs" in detail]


def test_a_stale_pick_of_another_repository_s_task_is_left_alone(ledger: Ledger) -> None:
    """Read again before its step (as after any scan): a task that is another repository's
    by then never reaches the step."""
    ledger.add_task(Task.new(id="t", title="t", instruction="i", now=NOW, repository="gh.io/o/b"))
    steps: list[str] = []
    done, _ = worker(ledger, lambda task: steps.append(task.id), repository="gh.io/o/a")
    done._work("t")
    assert steps == [] and ledger.get_task("t").status is TaskStatus.QUEUED
