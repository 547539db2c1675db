"""Temporal workers and the submitter as real ``assay`` processes, for tests and benchmarks.

A :class:`Worker` is ``assay worker --temporal ADDRESS --json`` in a process (and process
group) of its own, serving one repository with a home of its own, as on another machine; it
is ready once it prints its ``ready`` line. Its stdout is drained by a thread (so a chatty
worker never blocks on a full pipe) and its stderr goes to a file kept for the failure
message. Nothing here imports pytest: ``bench/scale.py`` uses it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ASSAY = Path(sys.executable).with_name("assay")
READY_TIMEOUT = 60.0


def service_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a worker or a CLI call: this process's, without its ``ASSAY_*``
    settings, with the ledger on ``database_url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env["ASSAY_DATABASE_URL"] = database_url
    env.update(extra)
    return env


@dataclass
class Worker:
    address: str
    repo: Path
    home: Path
    database_url: str
    task_queue: str
    max_dispatches: int = 4
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)  # more flags (the Temporal credentials)
    proc: subprocess.Popen[str] | None = None
    worker_queue: str | None = None
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    _stderr: IO[str] | None = None

    @property
    def stderr_path(self) -> Path:
        return self.home / "worker.stderr"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> Worker:
        self.home.mkdir(parents=True, exist_ok=True)
        self._stderr = self.stderr_path.open("a")
        args = [str(ASSAY), "worker", "--temporal", self.address, "--json"]
        args += ["--task-queue", self.task_queue, "--max-dispatches", str(self.max_dispatches)]
        args += ["--repo", str(self.repo), "--home", str(self.home), *self.args]
        self.proc = subprocess.Popen(
            args,
            cwd=self.repo,
            env=service_env(self.database_url, **self.env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            start_new_session=True,  # a kill of its group never reaches the test
        )
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"the worker did not get ready: {self.tail()}") from None
            if not line:
                raise RuntimeError(f"the worker exited before it was ready: {self.tail()}")
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict) and doc.get("event") == "ready":
                    self.worker_queue = doc.get("worker_queue")
                    return self

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return "(no stderr)"
        return "\n".join(text.splitlines()[-lines:])

    def terminate(self) -> None:
        """SIGTERM the worker, only it (its coders are its to stop); :meth:`stop` waits."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """kill -9 the worker and everything it started (its coders): a machine lost."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # at once (a SIGTERM would drain its runs)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # leftovers of its group
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


@dataclass
class Workers:
    """The workers a test starts for one repository and ledger, on a task queue of their own
    (the dev server may be the whole suite's), each with a home of its own under ``homes``;
    :meth:`stop` (or leaving the ``with``) stops them all."""

    address: str
    repo: Path
    database_url: str
    homes: Path
    task_queue: str = field(default_factory=lambda: f"test-{uuid.uuid4().hex[:10]}")
    started: list[Worker] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """What a CLI call of this test runs with (:func:`service_env`)."""
        return service_env(self.database_url)

    def start(self, max_dispatches: int = 4, args: list[str] | None = None) -> Worker:
        home = self.homes / f"machine-{len(self.started) + 1}"
        worker = Worker(
            self.address, self.repo, home, self.database_url, self.task_queue, max_dispatches,
            args=list(args or []),
        )  # fmt: skip
        self.started.append(worker)
        return worker.start()

    def stop(self) -> None:
        for worker in self.started:
            worker.stop()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def assay(
    repo: Path, *args: str, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ASSAY), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def add_task(repo: Path, contract: Path, env: dict[str, str], *flags: str) -> str:
    added = assay(repo, "task", "add", "--contract", str(contract), "--json", *flags, env=env)
    if added.returncode != 0:
        raise RuntimeError(f"assay task add failed: {added.stderr}")
    task_id: str = json.loads(added.stdout)["id"]
    return task_id


def serve_args(address: str, task_queue: str, poll: float | None = None) -> list[str]:
    """``serve --temporal ADDRESS --task-queue QUEUE --once`` (``--poll`` when given)."""
    args = ["serve", "--temporal", address, "--task-queue", task_queue, "--once"]
    return [*args, "--poll", str(poll)] if poll is not None else args


def serve_once(
    repo: Path,
    address: str,
    task_queue: str,
    env: dict[str, str],
    timeout: float = 120,
    poll: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """``assay serve --temporal ADDRESS --once``: every runnable task submitted, and waited
    for until its workflow closed."""
    return assay(repo, *serve_args(address, task_queue, poll), env=env, timeout=timeout)


def submit(
    repo: Path, address: str, task_queue: str, env: dict[str, str], poll: float | None = None
) -> subprocess.Popen[str]:
    """:func:`serve_once` in the background (a test acts while it runs): its process."""
    return subprocess.Popen(
        [str(ASSAY), *serve_args(address, task_queue, poll)],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def show(repo: Path, *args: str, env: dict[str, str]) -> Any:
    done = assay(repo, *args, "--json", env=env)
    if done.returncode != 0:
        raise RuntimeError(f"assay {' '.join(args)} failed: {done.stderr}")
    return json.loads(done.stdout)
