"""The unit tier runs in-process: no ``assay`` process and no server process is started here.

A test that needs one belongs in ``tests/e2e``. Like pip's refusal of its ``script`` fixture in
unit tests, the fixtures that start processes are refused at setup, and so is any start of the
``assay`` program (``Repo.main`` runs the CLI in-process instead of ``Repo.assay``).

The start is refused by an audit hook, not by patching ``subprocess``: every way a process is
started (``subprocess`` with or without a shell, ``asyncio``, ``os.system``, ``os.posix_spawn``,
``os.exec*`` after a fork) raises one of a few audit events with the program and its arguments.
The hook is on for the setup, call and teardown of each unit test, so a session-scoped
fixture set up for a unit test is refused as well.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Fixtures that start a process of assay's or a server's (a dev server, a worker, a browser).
PROCESS_FIXTURES = frozenset({"temporal_server", "assay", "workers", "page", "browser"})

SHELLS = frozenset({"sh", "bash", "dash", "zsh"})
# Programs that run the command after their own options: `env X=1 assay`, `timeout 5 assay`.
WRAPPERS = frozenset({"env", "exec", "command", "nohup", "nice", "setsid", "timeout", "stdbuf"})
SHELL_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})
SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn"})
# A child that only imports a library module of assay (to test a process limit) is fine.
RUNS_THE_CLI = re.compile(r"\bassay\.cli\b")
ASSAY_SCRIPT = Path(sys.executable).parent / "assay"


def _is_assay(program: str) -> bool:
    if Path(program).name == "assay":
        return True
    path = Path(program)
    return path.is_absolute() and path.exists() and path.resolve() == ASSAY_SCRIPT.resolve()


def _shell_commands(text: str) -> Iterator[list[str]]:
    """The simple commands of a shell command line, split at ``;``, ``&&``, ``|`` and so on."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace = " \t"  # a newline separates commands
    try:
        words = list(lexer)
    except ValueError:  # unbalanced quotes: the shell refuses it too
        return
    command: list[str] = []
    for word in words:
        if word in SHELL_SEPARATORS:
            yield command
            command = []
        else:
            command.append(word)
    yield command


def starts_assay(argv: Sequence[Any]) -> bool:
    """Whether ``argv`` runs the ``assay`` program: directly, through a link, a shell, a wrapper
    such as ``env`` or ``timeout``, ``python -m assay`` or ``python -c`` code that runs its CLI."""
    words = [os.fsdecode(w) if isinstance(w, (bytes, os.PathLike)) else str(w) for w in argv]
    while words and "=" in words[0] and not words[0].startswith("-"):  # a shell's X=1 prefix
        words = words[1:]
    if not words:
        return False
    program, rest = Path(words[0]).name, words[1:]
    if _is_assay(words[0]):
        return True
    if program in WRAPPERS:
        while rest and (rest[0].startswith("-") or "=" in rest[0] or rest[0][:1].isdigit()):
            rest = rest[1:]
        return starts_assay(rest)
    if program == "bwrap" and "--" in rest:  # the sandbox: the command follows its options
        return starts_assay(rest[rest.index("--") + 1 :])
    if program in SHELLS and "-c" in rest[:-1]:
        script = rest[rest.index("-c") + 1]
        return any(starts_assay(command) for command in _shell_commands(script))
    if program.startswith("python"):
        if "-m" in rest[:-1]:
            module = rest[rest.index("-m") + 1]  # python -m assay, python -m assay.cli.main
            return module == "assay" or bool(RUNS_THE_CLI.match(module))
        if "-c" in rest[:-1]:
            return bool(RUNS_THE_CLI.search(rest[rest.index("-c") + 1]))
    return False


def _started_argv(event: str, args: tuple[Any, ...]) -> Sequence[Any] | None:
    """The argument vector of a process start, from its audit event (None: not a start)."""
    if event == "subprocess.Popen":  # (executable, args, cwd, env); a shell's args are a list too
        executable, argv = args[0], args[1]
        argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv)
        return [executable or argv[0], *argv[1:]] if argv else [executable]
    if event == "os.system":  # (command,)
        return ["sh", "-c", os.fsdecode(args[0])]
    if event in ("os.posix_spawn", "os.exec", "os.spawn"):  # ([mode,] path, argv, env)
        path, argv = args[-3], list(args[-2])
        return [path, *argv[1:]]
    return None


class _Guard:
    """On while a unit test is set up, run and torn down; the audit hook cannot be removed."""

    on = False
    pid = 0  # the test process's, set when the guard is turned on

    @classmethod
    def audit(cls, event: str, args: tuple[Any, ...]) -> None:
        if not cls.on or event not in SPAWN_EVENTS:
            return
        argv = _started_argv(event, args)
        if argv is None or not starts_assay(argv):
            return
        refusal = (
            f"a unit test started the assay program ({list(argv)!r}): "
            "drive the CLI in-process (Repo.main, support.in_process) or move it to tests/e2e"
        )
        if os.getpid() != cls.pid:  # a forked child about to exec: end it, it has no test to fail
            os.write(2, f"{refusal}\n".encode())
            os._exit(3)
        raise RuntimeError(refusal)


sys.addaudithook(_Guard.audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    used = PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used:
        raise RuntimeError(
            f"{item.nodeid} uses {sorted(used)}, which start processes: "
            "a unit test runs in-process (move it to tests/e2e)"
        )
    with _guarded():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with _guarded():
        return (yield)


@contextmanager
def _guarded() -> Iterator[None]:
    _Guard.on, _Guard.pid = True, os.getpid()
    try:
        yield
    finally:
        _Guard.on = False


@pytest.fixture(autouse=True)
def quick_provider_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A provider fault is retried on the production count, with waits of milliseconds, not
    the 1 s and 2 s a real provider is given: the unit tier proves which calls are made and
    what is counted, and ``test_llm_client`` proves the schedule with an injected sleep. A
    ``Retry-After`` the scripted server sends is still honoured (up to 20 s)."""
    from assay.adapters import llm_client

    monkeypatch.setattr(llm_client, "DEFAULT_RETRY", llm_client.RetryPolicy(base_seconds=0.005))
