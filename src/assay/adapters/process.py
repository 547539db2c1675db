"""Running a child process the way coders and validators need it.

The child gets its own process group, so a timeout kills everything it started (a coder's
shells, test runners, language servers), not just the direct child. Output is streamed to a
log file as it arrives, so what was written before a timeout or crash is kept.

Every live child's group is registered, so a stop request (SIGINT or SIGTERM to assay) can end
them all: TERM at once, KILL after a grace period; a child started after the request is
stopped as soon as it starts.

When the machine rather than the child fails (a log hits the file-size limit, the disk is
full, the log folder is not writable, bwrap is missing) :class:`EnvironmentFault` says so by
name, never "could not start".

A child given a :class:`SandboxSpec` runs inside bubblewrap (:mod:`assay.adapters.sandbox`).

A child given an :class:`OutputWatch` has its output read as it arrives
(:mod:`assay.adapters.process_watch`); when the watch says why, its group is stopped as on a
timeout, and the result says why.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import resource
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from concurrent.futures import Future

from assay.adapters.process_groups import record_group
from assay.adapters.process_watch import OutputWatch, Tail, finish_watching, wait_watching
from assay.adapters.safe_files import create_file, write_file
from assay.adapters.sandbox import (
    MISSING_MESSAGE,
    bwrap_command,
    bwrap_path,
    confines,
    prepare,
    sandbox_env,
)
from assay.adapters.sandbox_spec import SandboxSpec
from assay.adapters.seat_network import seat_network

TAIL_CHARS = 4000
# What the host reads back of one output stream of a child (the tail): a bound on its memory.
MAX_OUTPUT_READ = 16 * 1024 * 1024
KILL_GRACE_SECONDS = 3.0
SHELL = "/bin/sh"  # a command line of the contract runs as [SHELL, "-c", line]
# POSIX shells exit 127 for "command not found" and 126 for "found but not executable".
SHELL_NOT_FOUND = 127
SHELL_NOT_EXECUTABLE = 126
STOP_GRACE_SECONDS = 5.0
STOP_TICK_SECONDS = 0.1
"""How often a wait a stop request must cut short looks for one. Python runs a signal's handler
only when the main thread runs bytecode, and the kernel may hand SIGINT or SIGTERM to another
thread: a main thread asleep in one long wait would act on the stop only when it woke."""

_live_groups: set[int] = set()
_groups_guard = threading.Lock()
_stop: list[int] = []  # the signal that asked this process to stop, once received


class EnvironmentFault(Exception):
    """The machine failed the process, not the process itself: its log hit the file-size limit
    (RLIMIT_FSIZE), the disk is full, or the log folder is not writable.

    Deliberately not an ``OSError``: callers that map ``OSError`` onto "the program could not
    start" must not swallow it; the engine records it as an environment error (refunded).
    """


def environment_fault(exc: OSError, path: Path) -> EnvironmentFault | None:
    """The machine fault ``exc`` (raised writing ``path``) is, or None for any other error."""
    if exc.errno == errno.EFBIG:
        return EnvironmentFault(f"a log hit the file-size limit (RLIMIT_FSIZE) writing {path}")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return EnvironmentFault(f"no space left on device writing {path}")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return EnvironmentFault(f"the run folder is not writable: {path} ({exc.strerror})")
    return None


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """Name a machine fault met while writing ``path``; other errors pass unchanged."""
    try:
        yield
    except OSError as exc:
        fault = environment_fault(exc, path)
        if fault is None:
            raise
        raise fault from exc


def _hit_size_limit(*logs: tuple[Path, BinaryIO]) -> Path | None:
    """The log that reached the file-size limit (its writer was stopped there), if any."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return None
    for path, handle in logs:
        with contextlib.suppress(OSError):
            if os.fstat(handle.fileno()).st_size >= soft:
                return path
    return None


def _read_back(handle: BinaryIO, limit: int = MAX_OUTPUT_READ) -> str:
    """What the child wrote to ``handle``, as text (undecodable bytes replaced, newlines
    universal, as ``Path.read_text`` reads it): its last ``limit`` bytes at most, after a line
    saying how much came before, so a child that prints gigabytes never fills the host's
    memory (the whole output stays in its file)."""
    size = handle.seek(0, io.SEEK_END)
    skipped = max(0, size - limit)
    handle.seek(skipped)
    text = io.TextIOWrapper(io.BytesIO(handle.read(limit)), errors="replace").read()
    if not skipped:
        return text
    return f"[assay] {skipped:,} earlier bytes of this output are not read back\n" + text


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int | None  # None when it was killed (a timeout, or stopped by its watch)
    stdout: str
    stderr: str
    timed_out: bool
    wall_time_ms: int
    log_path: Path
    refused: tuple[str, ...] = ()  # what the seat's proxy refused to connect to
    stopped: str | None = None  # why its watch had it stopped before it ended, if it did

    @property
    def printed(self) -> str:
        """What the process wrote, stdout then stderr: its own output, never the command line
        it was started with (the log's first line), which is the operator's."""
        if self.stdout and self.stderr and not self.stdout.endswith("\n"):
            return self.stdout + "\n" + self.stderr
        return self.stdout + self.stderr

    def tail(self, chars: int = TAIL_CHARS) -> str:
        text = "\n".join(part.strip() for part in (self.stdout, self.stderr) if part.strip())
        return text[-chars:]


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    log_path: Path,
    stdin: str | None = None,
    sandbox: SandboxSpec | None = None,
    watch: OutputWatch | None = None,
) -> ProcessResult:
    """Run ``argv`` to completion or ``timeout``; raises FileNotFoundError if it does not exist.

    stdout and stderr go to ``log_path`` (``.out`` and ``.err`` siblings) as they arrive.
    Raises :class:`EnvironmentFault` when a log cannot be written (or its output was cut at
    the file-size limit), or when ``sandbox`` asks for bwrap and there is none.

    With a ``sandbox`` of mode bwrap the process runs inside bubblewrap
    (:mod:`assay.adapters.sandbox`), bwrap itself started with ``env`` only; bwrap stays the
    leader of the group, so a timeout or stop request ends everything inside. The exit code
    is the program's (killed by a signal: 128 + the signal, as bwrap reports it).

    A ``watch`` sees the output while the program runs and may have it stopped (its process
    group ended as on a timeout; ``stopped`` says why, ``exit_code`` is None).
    """
    if not confines(sandbox):
        return _run(
            argv, cwd=cwd, env=env, timeout=timeout, log_path=log_path, stdin=stdin, watch=watch
        )
    with contextlib.ExitStack() as stack:
        try:
            network = stack.enter_context(seat_network(sandbox, env))
        except OSError as exc:  # no folder or socket for its proxy: the machine's fault
            raise EnvironmentFault(f"the seat's network proxy could not start: {exc}") from exc
        return _run(
            argv,
            cwd=cwd,
            env=network.env,
            timeout=timeout,
            log_path=log_path,
            stdin=stdin,
            sandbox=network.sandbox,
            wrapper=network.wrapper,
            refused=lambda: network.refused,
            watch=watch,
        )


def _run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    log_path: Path,
    stdin: str | None,
    sandbox: SandboxSpec | None = None,
    wrapper: Sequence[str] = (),
    refused: Callable[[], list[str]] = list,
    watch: OutputWatch | None = None,
) -> ProcessResult:
    command, child_env = list(argv), dict(env)
    if confines(sandbox):
        command, child_env = _confined(argv, cwd=cwd, env=env, sandbox=sandbox, wrapper=wrapper)
    out_path = log_path.with_suffix(log_path.suffix + ".out")
    err_path = log_path.with_suffix(log_path.suffix + ".err")
    start = time.monotonic()
    timed_out = False
    stopped: str | None = None
    # Fresh files, never opened through a link (one a child left at their names is replaced),
    # and read back through the same handles: what is read is what the child wrote.
    with _writing(log_path.parent):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        out_file = create_file(out_path)
    with _writing(err_path):
        try:
            err_file = create_file(err_path)
        except BaseException:
            out_file.close()
            raise
    with out_file as out, err_file as err:
        tails = (Tail(out.fileno()), Tail(err.fileno()))
        child = subprocess.Popen(
            command,
            cwd=cwd,
            env=child_env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        _register(child.pid)
        record_group(child.pid, cwd)  # in the run's folder: recovery ends it if assay dies
        try:
            if stdin is not None and child.stdin is not None:
                # Fed from a thread: a child that never reads its stdin must not block us
                # before the timeout clock is even running.
                threading.Thread(
                    target=_feed, args=(child.stdin, stdin.encode()), daemon=True
                ).start()
            if watch is None:
                _wait(child, timeout)
            elif (stopped := wait_watching(child, timeout, watch, tails)) is not None:
                _kill_group(child)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(child)
        except BaseException:
            _kill_group(child)
            raise
        finally:
            # Anything the child left behind in its group goes too.
            _signal_group(child.pid, signal.SIGKILL)
            with _groups_guard:
                _live_groups.discard(child.pid)
        if watch is not None:
            finish_watching(watch, tails)
        wall = int((time.monotonic() - start) * 1000)
        cut = _hit_size_limit((out_path, out), (err_path, err))
        if cut is not None:
            raise EnvironmentFault(f"a log hit the file-size limit (RLIMIT_FSIZE) writing {cut}")
        stdout, stderr = _read_back(out), _read_back(err)
    confined = ""
    refusals = refused()
    if confines(sandbox):
        confined = f"# sandbox: bwrap, network {sandbox.network.value}\n"
        if refusals:
            confined += f"# network: the proxy refused {', '.join(refusals)}\n"
    text = f"$ {' '.join(argv)}\n{confined}--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    with _writing(log_path):
        write_file(log_path.parent, log_path.name, text.encode(errors="replace"))
    return ProcessResult(
        exit_code=None if timed_out or stopped else child.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        wall_time_ms=wall,
        log_path=log_path,
        refused=tuple(refusals),
        stopped=stopped,
    )


def _wait(child: subprocess.Popen[bytes], timeout: float) -> None:
    """``child.wait(timeout)``, woken the moment the child exits (a pidfd), where
    ``Popen.wait`` polls with sleeps of up to 50 ms: that would add to every short process."""
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the child is already reaped
        child.wait(timeout=timeout)
        return
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(timeout, 0.0) * 1000):
            raise subprocess.TimeoutExpired(child.args, timeout)
    finally:
        os.close(pidfd)
    child.wait()


def _confined(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    sandbox: SandboxSpec,
    wrapper: Sequence[str] = (),
) -> tuple[list[str], dict[str, str]]:
    """The bwrap command line and bwrap's own environment for ``argv``.

    A program that does not exist or cannot run is refused here as it would be unconfined
    (FileNotFoundError / PermissionError), not left to bwrap's "execvp" failure inside.
    """
    bwrap = bwrap_path()
    if bwrap is None:
        raise EnvironmentFault(MISSING_MESSAGE)
    _check_program(argv[0], cwd, env)
    with _writing(Path(sandbox.home or cwd)):
        prepare(sandbox)
    inner = sandbox_env(sandbox, env)
    command = bwrap_command(sandbox, argv, env=inner, cwd=cwd, bwrap=bwrap, wrapper=wrapper)
    return command, inner


def _check_program(program: str, cwd: Path, env: Mapping[str, str]) -> None:
    if not cwd.is_dir():
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(cwd))
    if os.sep in program:
        path = Path(program) if os.path.isabs(program) else cwd / program
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if path.is_dir() or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def request_stop(signum: int, grace: float = STOP_GRACE_SECONDS) -> None:
    """Stop every live child group: SIGTERM now, SIGKILL to what is left after ``grace``.

    Safe to call from a signal handler (it only signals and starts a timer thread).
    """
    if not _stop:
        _stop.append(signum)
    for pid in live_groups():
        _signal_group(pid, signal.SIGTERM)
    timer = threading.Timer(grace, _kill_live_groups)
    timer.daemon = True
    timer.start()


def stop_requested() -> int | None:
    """The signal that asked this process to stop, or None."""
    return _stop[0] if _stop else None


def _asked_to_stop() -> bool:
    return stop_requested() is not None


def wait_unless_stopped(
    futures: Collection[Future[Any]],
    seconds: float,
    stopping: Callable[[], bool] = _asked_to_stop,
) -> None:
    """Wait ``seconds``, in ticks of :data:`STOP_TICK_SECONDS`; return early when one of
    ``futures`` is done or ``stopping()`` says a stop was asked for."""
    from concurrent.futures import FIRST_COMPLETED, wait

    deadline = time.monotonic() + seconds
    while not stopping():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        tick = min(left, STOP_TICK_SECONDS)
        if not futures:
            time.sleep(tick)
        elif wait(futures, timeout=tick, return_when=FIRST_COMPLETED)[0]:
            return


def sleep_unless_stopped(seconds: float) -> None:
    """``time.sleep(seconds)``, cut short by a stop request."""
    wait_unless_stopped((), seconds)


def live_groups() -> list[int]:
    with _groups_guard:
        return sorted(_live_groups)


def _register(pid: int) -> None:
    with _groups_guard:
        _live_groups.add(pid)
    if _stop:  # started after the stop request: it goes at once
        _signal_group(pid, signal.SIGTERM)


def _kill_live_groups() -> None:
    if not _stop:  # the stop was withdrawn (a process that serves on): nothing to kill
        return
    for pid in live_groups():
        _signal_group(pid, signal.SIGKILL)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError):
        pipe.write(data)
    with contextlib.suppress(OSError):
        pipe.close()


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    _signal_group(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        _signal_group(child.pid, signal.SIGKILL)
        child.wait()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
