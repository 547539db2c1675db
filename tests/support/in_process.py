"""Driving the CLI in-process: ``main(argv)`` with captured output, for the unit tier.

:func:`run_assay` is what an ``assay`` process would do, without the process: the same
argument list, working folder and environment, its exit code and both streams captured.
:func:`run_main` and :func:`fresh_repo` serve the tests written against pytest's ``capsys``;
:func:`watch_while` looks at a run from another thread while it runs.
"""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, TypeVar

import pytest

from assay.adapters.store.sql import Ledger
from assay.cli.main import main
from support.repo import git

R = TypeVar("R")
T = TypeVar("T")

_ASSAY_SETTINGS = ("ASSAY_HOME", "ASSAY_DATABASE_URL", "ASSAY_TEMPORAL", "ASSAY_DEBUG")


def run_assay(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """``assay ARGS`` run in this process in ``cwd`` with exactly ``env`` as its environment;
    everything it changed (environment, working folder, streams) is put back afterwards."""
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin = io.StringIO(stdin)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as done:
                code = done.code
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    if code is None:
        code = 0
    elif not isinstance(code, int):
        err.write(f"{code}\n")
        code = 1
    return subprocess.CompletedProcess(["assay", *args], code, out.getvalue(), err.getvalue())


def show_json(repo: Path, *args: str, env: Mapping[str, str]) -> Any:
    """``assay ARGS --json`` in this process in ``repo`` with ``env``: what it printed, parsed
    (the end-to-end tests read the ledger this way, a process less each time)."""
    done = run_assay([*args, "--json"], cwd=repo, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"assay {' '.join(args)} failed: {done.stderr}")
    return json.loads(done.stdout)


def fresh_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with one commit on main, made the working folder, no assay setting set."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("a\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "init")
    for name in _ASSAY_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    return root


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[object, str, str]:
    """``assay ARGS`` in this process: its exit code, stdout and stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return done.value.code, out, err


def ledger_of(repo: Path) -> Ledger:
    return Ledger.open(f"sqlite:///{repo / '.assay' / 'assay.db'}")


def watch_while(
    run: Callable[[], R], look: Callable[[], T | None], *, timeout: float = 30
) -> tuple[R, T | None]:
    """``run()`` in this thread (the CLI sets signal handlers, which only the main thread may)
    while another thread calls ``look()`` until it answers (anything but None), ``run`` ends or
    ``timeout`` passes: what ``run`` returned and ``look``'s answer (None: it never answered)."""
    ended, seen = threading.Event(), queue.SimpleQueue[tuple[T | None, BaseException | None]]()

    def keep_looking() -> None:
        deadline = time.monotonic() + timeout
        try:
            while not ended.is_set() and time.monotonic() < deadline:
                found = look()
                if found is not None:
                    seen.put((found, None))
                    return
                time.sleep(0.05)
            seen.put((None, None))
        except BaseException as failed:  # raised again in the caller's thread
            seen.put((None, failed))

    looker = threading.Thread(target=keep_looking, daemon=True)
    looker.start()
    try:
        result = run()
    finally:
        ended.set()
        looker.join(timeout)
    found, failed = seen.get(timeout=1)
    if failed is not None:
        raise failed
    return result, found
