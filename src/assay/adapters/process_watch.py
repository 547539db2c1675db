"""Watching a child's output while it runs, for whoever must see it as it arrives.

Every ``interval`` the bytes the child added to its stdout and stderr files since the last look
are read (at their own offsets: the child's shared file position is never moved), decoded
and handed to an :class:`OutputWatch`, which is then asked whether the child must be stopped.
Once the child has ended, what is left is handed over and the watch is told. Without a watch
none of this runs: the host sleeps on the child's exit alone.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Protocol

# What one look reads of one stream at most: a child printing faster is read over more looks.
READ_PER_LOOK = 4 * 1024 * 1024


class OutputWatch(Protocol):
    """Someone reading a child's output while it runs, who may ask for it to be stopped."""

    @property
    def interval(self) -> float:
        """Seconds between looks."""
        ...

    def seen(self, stdout: str, stderr: str) -> None:
        """What the child printed since the last look, either possibly empty (called at every
        look all the same, for a watch that reads files of its own)."""
        ...

    def stop_reason(self) -> str | None:
        """Why the child must be stopped now, or None; asked after every look."""
        ...

    def ended(self) -> None:
        """The child (and its process group) has ended and all it printed has been seen."""
        ...


class Tail:
    """The growing end of a file the host holds open: each read returns what was added since
    the last, as text (undecodable bytes replaced; a character split between reads is kept
    whole)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.offset = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read(self, limit: int = READ_PER_LOOK) -> str:
        data = os.pread(self.fd, limit, self.offset)
        self.offset += len(data)
        return self._decoder.decode(data)

    def flush(self) -> str:
        """The bytes held back as the start of a character that never came, decoded."""
        return self._decoder.decode(b"", final=True)


def wait_watching(
    child: subprocess.Popen[bytes], timeout: float, watch: OutputWatch, tails: tuple[Tail, Tail]
) -> str | None:
    """Wait for ``child`` to exit or ``timeout`` (``TimeoutExpired``), showing ``watch`` its
    output at every interval; the reason the watch gave to stop it (it is still running then),
    or None once it has exited."""
    deadline = time.monotonic() + max(timeout, 0.0)
    with _exit_of(child) as exited:
        while True:
            left = deadline - time.monotonic()
            if exited(max(0.0, min(watch.interval, left))):
                break
            if left <= 0:
                raise subprocess.TimeoutExpired(child.args, timeout)
            stdout, stderr = tails[0].read(), tails[1].read()
            watch.seen(stdout, stderr)
            if reason := watch.stop_reason():
                return reason
    child.wait()
    return None


def finish_watching(watch: OutputWatch, tails: tuple[Tail, Tail]) -> None:
    """Hand ``watch`` what the ended child printed since the last look (a look's worth at a
    time), and tell it so."""
    while True:
        before = (tails[0].offset, tails[1].offset)
        stdout, stderr = tails[0].read(), tails[1].read()
        if (tails[0].offset, tails[1].offset) == before:
            break
        watch.seen(stdout, stderr)
    watch.seen(tails[0].flush(), tails[1].flush())
    watch.ended()


@contextlib.contextmanager
def _exit_of(child: subprocess.Popen[bytes]) -> Iterator[Callable[[float], bool]]:
    """A wait of at most some seconds for ``child`` to exit: woken at its exit through a
    pidfd, else by ``Popen.wait``'s polling."""
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the child is already reaped

        def polled(seconds: float) -> bool:
            try:
                child.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                return False
            return True

        yield polled
        return
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    try:
        yield lambda seconds: bool(poller.poll(seconds * 1000))
    finally:
        os.close(pidfd)
