"""A dispatch's usage read from its program's output while it runs, journaled to its meter.

A program reports its usage in one or more places (:class:`UsageSources`): its stdout or
stderr (claude, codex, aider), a file it appends to (codex's session file), a file it rewrites
whole (mini's trajectory). :class:`UsageWatch` reads them as the child runs
(:mod:`assay.adapters.process_watch` hands it the output every look), hands the dispatch's
running total to the meter whenever it grows, and passes on the meter's reason to stop the
child once the call it is printing has ended (:meth:`LineReader.settling`; ``SETTLE_SECONDS``
at most): that call's output count comes at its end, and a sandboxed child stopped is killed,
printing nothing more. The places' totals are the same dispatch's, so they combine field by
field at the larger (:meth:`UsageFigures.at_least`).

Files a program writes are the seat's, hostile ground: they are opened through
:mod:`assay.adapters.safe_files` (no link followed, regular files only, a bounded read).

:func:`read_logs` reads the same places once, after the fact: the recovery of a dispatch whose
host died while its program kept running and printing.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from assay.adapters.coders.base import UsageMeter
from assay.adapters.coders.usage_read import LineReader
from assay.adapters.process_watch import Tail
from assay.adapters.safe_files import open_reading, read_limited
from assay.core.usage import UsageFigures

LOOK_SECONDS = 0.05  # how often the output is read while the program runs
FILE_LOOK_SECONDS = 0.5  # how often a file not yet found is looked for, a changed one re-read
# How long a stop waits for the call being printed to end: a call whose answer has arrived is
# printed in milliseconds, and one still streaming from the model is not waited for long.
SETTLE_SECONDS = 2.0
_CHUNK = 1024 * 1024


@dataclass
class AppendedFile:
    """A file the program appends usage reports to, found once it exists: ``find`` gives its
    folder (the engine's, a real folder) and its path below it, or None while unknown."""

    find: Callable[[], tuple[Path, str] | None]
    reader: LineReader
    _tail: Tail | None = field(default=None, init=False)
    _looked: float = field(default=-FILE_LOOK_SECONDS, init=False)

    def look(self, now: float, *, force: bool = False) -> None:
        if self._tail is None:
            if now - self._looked < FILE_LOOK_SECONDS and not force:
                return
            self._looked = now
            place = self.find()
            fd = open_reading(*place) if place is not None else None
            if fd is None:
                return
            self._tail = Tail(fd)
        while text := self._tail.read(_CHUNK):
            self.reader.feed(text)

    def close(self) -> None:
        self.look(0.0, force=True)
        if self._tail is not None:
            self.reader.feed(self._tail.flush())
            os.close(self._tail.fd)
            self._tail = None
        self.reader.close()

    def figures(self) -> UsageFigures | None:
        return self.reader.figures()


@dataclass
class DocumentFile:
    """A file the program rewrites whole (``name`` directly in ``folder``, at most ``limit``
    bytes), re-read when it changed; ``read`` gives its figures, or None for a file caught
    mid-write (the last figures stand and it is read again)."""

    folder: Path
    name: str
    read: Callable[[str], UsageFigures | None]
    limit: int
    _seen: tuple[int, int, int] | None = field(default=None, init=False)
    _looked: float = field(default=-FILE_LOOK_SECONDS, init=False)
    _figures: UsageFigures | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        # Resolved now, before the program runs: a folder it swaps for a link later on is
        # not where the file is read from.
        self.folder = self.folder.resolve()

    def look(self, now: float, *, force: bool = False) -> None:
        if now - self._looked < FILE_LOOK_SECONDS and not force:
            return
        try:
            info = os.lstat(self.folder / self.name)
        except OSError:
            return
        mark = (info.st_ino, info.st_size, info.st_mtime_ns)
        if mark == self._seen or not stat.S_ISREG(info.st_mode):
            return
        self._looked = now
        data = read_limited(self.folder / self.name, self.folder, self.limit).data
        figures = self.read(data.decode("utf-8", errors="replace")) if data else None
        if figures is not None:
            self._figures, self._seen = figures, mark

    def close(self) -> None:
        self.look(0.0, force=True)

    def figures(self) -> UsageFigures | None:
        return self._figures


@dataclass
class UsageSources:
    """Where one program reports its usage: readers of its stdout and stderr, and its files."""

    stdout: LineReader | None = None
    stderr: LineReader | None = None
    files: tuple[AppendedFile | DocumentFile, ...] = ()

    def figures(self) -> UsageFigures | None:
        """The dispatch's running total: every place's, combined at the larger."""
        total: UsageFigures | None = None
        readers = [r.figures() for r in (self.stdout, self.stderr) if r is not None]
        for figures in [*readers, *(f.figures() for f in self.files)]:
            if figures is not None:
                total = figures if total is None else total.at_least(figures)
        return total

    def settling(self) -> bool:
        """Whether a place is printing a call whose final figures are still to come."""
        appended = [f.reader for f in self.files if isinstance(f, AppendedFile)]
        readers = [r for r in (self.stdout, self.stderr, *appended) if r is not None]
        return any(r.settling() for r in readers)

    def seen(self, stdout: str, stderr: str, now: float) -> None:
        if self.stdout is not None:
            self.stdout.feed(stdout)
        if self.stderr is not None:
            self.stderr.feed(stderr)
        for source in self.files:
            source.look(now)

    def close(self) -> None:
        for reader in (self.stdout, self.stderr):
            if reader is not None:
                reader.close()
        for source in self.files:
            source.close()


class UsageWatch:
    """The :class:`~assay.adapters.process_watch.OutputWatch` of a dispatch with a meter."""

    def __init__(
        self,
        sources: UsageSources,
        meter: UsageMeter,
        *,
        interval: float = LOOK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sources = sources
        self.meter = meter
        self.interval = interval
        self._clock = clock
        self._reported: UsageFigures | None = None
        self._stop_since: float | None = None  # when the meter first said stop

    def seen(self, stdout: str, stderr: str) -> None:
        self.sources.seen(stdout, stderr, self._clock())
        self._report()

    def stop_reason(self) -> str | None:
        reason = self.meter.stop_reason()
        if reason is None:
            self._stop_since = None
            return None
        now = self._clock()
        self._stop_since = now if self._stop_since is None else self._stop_since
        if self.sources.settling() and now - self._stop_since < SETTLE_SECONDS:
            return None  # the call being printed is let end, for its output count
        return reason

    def ended(self) -> None:
        self.sources.close()
        self._report()

    def figures(self) -> UsageFigures | None:
        """What was read so far: the final figures once the program has ended."""
        return self.sources.figures()

    def _report(self) -> None:
        figures = self.sources.figures()
        if figures is not None and figures != self._reported:
            self.meter.report(figures)
            self._reported = figures


def read_logs(sources: UsageSources, log_path: Path) -> UsageFigures | None:
    """The figures ``sources`` read from a finished (or abandoned) program's output files,
    ``<log_path>.out`` and ``<log_path>.err``, and its own files: all of them, not a tail."""
    for reader, suffix in ((sources.stdout, ".out"), (sources.stderr, ".err")):
        if reader is not None:
            _read_file(reader, log_path.with_name(log_path.name + suffix))
    sources.close()  # a file's last look
    return sources.figures()


def _read_file(reader: LineReader, path: Path) -> None:
    fd = open_reading(path.parent, path.name)
    if fd is None:
        return
    tail = Tail(fd)
    try:
        while text := tail.read(_CHUNK):
            reader.feed(text)
        reader.feed(tail.flush())
    finally:
        os.close(fd)
