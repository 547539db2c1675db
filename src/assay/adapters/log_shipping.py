"""Shipping a run's logs from its folder on this machine to the ledger, bounded and redacted.

The ledger is the one place a result lives: a run that ran on another machine (a Temporal
worker) is read from the ledger, never from that machine's disk. Which files are logs, and how
much of each is kept, is :mod:`assay.core.run_logs`'s; here they are read (never through a
link, never more than the two ends of a huge file) and redacted before anything is kept:

- every secret value the run's scans found (``SecretRedaction.found``), and
- the operator's own secrets that no child ever gets (:func:`assay.adapters.assay_secrets.
  assay_secrets`: the ledger's URL and password, the dashboard's token, Temporal's keys) and
  the values of the operator's credential-like variables (the coders' API keys, as the
  secret scan knows them), which a program could still print (a debug line, an error).

Each end of a huge file is read with room for the longest value beyond the cut, so a value
that straddles a cut is redacted whole, never kept in part. The secret scan reads a coder's
output only when its candidate is checked, so the executor ships a seat's logs once its checks
have ended (or when it left nothing to check), never while they may still hold a secret the
scan is about to find (:meth:`LogShipper.ship`'s ``ready``). While a coder runs, a provisional
copy of its logs' ends is shipped instead (:meth:`LogShipper.ship_live`,
:mod:`assay.adapters.live_logs`), made safe without the scan.
"""

from __future__ import annotations

import codecs
import hashlib
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from assay.adapters import folders
from assay.adapters.live_logs import ScanIncomplete, detected, live_copy, without_cut_key
from assay.adapters.redact import Redactor, redactions
from assay.adapters.safe_files import open_regular
from assay.adapters.store.schema import LOG_NAME_LENGTH
from assay.adapters.store.sql import Ledger
from assay.core.run_logs import (
    HEAD_BYTES,
    LOG_LIMIT,
    KeptLog,
    ends,
    kept,
    log_names,
    place_of,
    within_run_limit,
)
from assay.core.vocab import LogRole

MAX_ENTRIES = 20_000  # of a run folder walked for its logs (judges' scratch folders too)
MAX_DEPTH = 8  # attempt-N/judges/judge-K/round-R/<file> is 5 deep
MAX_LOGS = 2_000  # more than any run writes: a bound, not a budget
CHAR_BYTES = 4  # a UTF-8 character's bytes at most
OPERATOR_SECRET = "assay secret"
WITHHELD = "… withheld: no secret scan read this log, and the detectors could not read it all …\n"

Clock = Callable[[], datetime]


def operator_secrets(operator_env: Mapping[str, str]) -> set[tuple[str, str]]:
    """``(type, value)`` of every operator secret a kept log must never hold."""
    from assay.adapters.assay_secrets import MIN_CONTAINED, assay_secrets
    from assay.adapters.validators.secrets import credential_values

    found = {
        (OPERATOR_SECRET, s.value)
        for s in assay_secrets(operator_env).values
        if len(s.value) >= MIN_CONTAINED  # shorter ones match as whole values only there
    }
    found |= {(f"${name}", value) for name, value in credential_values(operator_env).items()}
    return found


def log_files(run_dir: Path) -> dict[str, folders.Entry]:
    """The logs of ``run_dir`` by name, in the order of their names, within the walk's bounds
    and the ledger's (a name it can hold, at most :data:`MAX_LOGS`)."""
    files: dict[str, folders.Entry] = {}
    for entry in folders.walk(run_dir, max_entries=MAX_ENTRIES, max_depth=MAX_DEPTH):
        if entry.is_file:
            name = entry.path.relative_to(run_dir).as_posix()
            if len(name) <= LOG_NAME_LENGTH:
                files[name] = entry
    return {name: files[name] for name in log_names(files)[:MAX_LOGS]}


# What a file was (its ``lstat``: device, inode, size, times) when it was last read, and what
# was kept of it then: a file that has not changed since is not read again.
Seen = dict[str, tuple[tuple[int, ...], KeptLog]]


def read_run_logs(run_dir: Path, redactor: Redactor, seen: Seen | None = None) -> list[KeptLog]:
    """Every log of ``run_dir`` as it would be kept (redacted, each bounded; the run's budget
    not applied yet), in the order of their names. ``seen``: what earlier reads kept with the
    same ``redactor`` (updated here), so an unchanged file is not read again."""
    logs = []
    for name, entry in log_files(run_dir).items():
        info = entry.info
        mark = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        known = None if seen is None else seen.get(str(entry.path))
        log = known[1] if known and known[0] == mark else read_log(entry.path, name, redactor)
        if log is not None:
            logs.append(log)
            if seen is not None:
                seen[str(entry.path)] = (mark, log)
    return logs


def read_log(path: Path, name: str, redactor: Redactor) -> KeptLog | None:
    """What is kept of one log file; None when it is not a regular file (or is gone)."""
    with open_regular(path) as opened:
        if opened is None:
            return None
        source, info = opened
        size = info.st_size
        margin = max((len(v.encode("utf-8")) for v in redactor.table), default=0) + CHAR_BYTES
        if size <= LOG_LIMIT + 2 * margin:
            whole = source.read(LOG_LIMIT + 2 * margin)
            size = max(size, len(whole))
            text, truncated = kept(redactor.text(whole.decode("utf-8", errors="replace")))
        else:
            start, end = _ends(source, size, margin)
            values = list(redactor.table)
            # Redaction shortens text: only what lies inside the read's inner edge is kept, so
            # a value the read cut at its outer edge is never pulled into what is kept.
            head = redactor.text(start[: _inner_edge(start, values, len(start) - margin)])
            tail = redactor.text(end[_inner_edge(end, values, margin, after=True) :])
            text, truncated = ends(head, tail, size), True
    place = place_of(name)
    text = text.replace("\x00", "\ufffd")  # PostgreSQL's text holds no NUL (a binary dump)
    return KeptLog(name, place.role, place.attempt, place.seat, size, text, truncated)


def _inner_edge(text: str, values: list[str], at: int, *, after: bool = False) -> int:
    """Where to cut ``text`` near ``at`` so that no value in it is split: moved to the start
    of a value that straddles ``at`` (to its end, ``after``: when the part after is kept)."""
    edge, moved = max(0, min(at, len(text))), True
    while moved:  # a move may put the edge inside another value: until none straddles it
        moved = False
        for value in values:
            # The first occurrence this close before the edge is the one that straddles it.
            found = text.find(value, max(0, edge - len(value) + 1))
            if 0 <= found < edge < found + len(value):
                edge, moved = (found + len(value) if after else found), True
    return edge


def _ends(source: BinaryIO, size: int, margin: int) -> tuple[str, str]:
    """The first and last bytes of a file too long to keep whole, each with ``margin`` more
    than is kept (so a value across the cut is still seen whole), as text: a character cut
    at the outer edge of a read is dropped, never shown as a replacement."""
    head = source.read(HEAD_BYTES + margin)
    source.seek(max(size - LOG_LIMIT - margin, 0))
    tail = source.read(LOG_LIMIT + margin)
    start = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(head, final=False)
    skip = 0
    while skip < min(len(tail), CHAR_BYTES - 1) and tail[skip] & 0xC0 == 0x80:
        skip += 1  # continuation bytes of a character that began before the read
    return start, tail[skip:].decode("utf-8", errors="replace")


# A judge's transcript is shipped whole when its panel is done: only these run long alone.
_LIVE_ROLES = frozenset({LogRole.CODER, LogRole.VALIDATOR})


class LogShipper:
    """Ships one run's logs from its folder here; remembers what it shipped, so a later ship
    writes only the logs that changed. Thread-safe (seats end in parallel)."""

    def __init__(self, ledger: Ledger, operator_env: Mapping[str, str], clock: Clock) -> None:
        self.ledger = ledger
        self.clock = clock
        self._operator = operator_secrets(operator_env)
        self._known = _credentials(operator_env)
        self._live_marks: dict[str, tuple[int, ...]] = {}  # what each live copy was read from
        self._shipped: dict[str, str] = {}  # name: digest of what the ledger holds
        self._seen: Seen = {}  # what was read, while the redaction stays the same
        self._seen_table: dict[str, str] = {}
        self._lock = threading.Lock()

    def ship(
        self,
        run_id: str,
        run_dir: Path,
        found: Iterable[tuple[str, str]] = (),
        ready: Callable[[KeptLog], bool] | None = None,
        unscanned: Callable[[KeptLog], bool] | None = None,
    ) -> int:
        """Ship what changed of the run's logs (``found``: the secrets the run's scans found;
        ``ready``: which logs may go now, None: all; ``unscanned``: which ones no scan read, a
        run that died before its checks: the scan's detectors are run over what is kept of
        them, as over a live copy); how many logs were written. Raises what the ledger raises
        (the caller warns).

        The run's budget is shared by all its logs, so every log is read each time: one that
        is not ready still counts, and one shipped before is shipped again when a newer log
        made its share smaller. A file unchanged since the last ship, under the same
        redaction, is not read again."""
        redactor = Redactor(redactions(self._operator | set(found)))
        with self._lock:
            if redactor.table != self._seen_table:  # a new secret: every file is read again
                self._seen, self._seen_table = {}, redactor.table
            logs = within_run_limit(read_run_logs(run_dir, redactor, self._seen))
            chosen = logs if ready is None else [log for log in logs if ready(log)]
            if unscanned is not None:
                chosen = [_detected(log, self._known) if unscanned(log) else log for log in chosen]
            fresh = [log for log in chosen if self._shipped.get(log.name) != _digest(log)]
            if fresh:
                self.ledger.ship_logs(run_id, fresh, at=self.clock())
            self._shipped.update({log.name: _digest(log) for log in fresh})
            return len(fresh)

    def ship_live(
        self,
        run_id: str,
        run_dir: Path,
        found: Iterable[tuple[str, str]],
        running: Callable[[KeptLog], bool],
    ) -> int:
        """Ship a provisional copy of each log of a coder or a check that is ``running`` (its
        role, attempt and seat: asked again under the lock, just before the write, so a copy
        never lands after the seat's final ship) that changed since; how many were written. At
        most one write for all of them. A log whose detectors could not read it all is not
        shipped."""
        secrets = self._operator | set(found)
        copies = []
        for name, entry in log_files(run_dir).items():
            place = place_of(name)
            probe = KeptLog(name, place.role, place.attempt, place.seat, 0, "", False)
            if place.role not in _LIVE_ROLES or not running(probe):
                continue
            info = entry.info
            mark = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, len(secrets))
            if self._live_marks.get(name) == mark:  # unchanged since its last copy: not read
                continue
            try:
                log = live_copy(entry.path, name, secrets, self._known)
            except ScanIncomplete:
                continue
            if log is not None:
                copies.append(log)
                self._live_marks[name] = mark
        with self._lock:
            fresh = [
                log
                for log in copies
                if running(log) and self._shipped.get(log.name) != _digest(log)
            ]
            if fresh:
                self.ledger.ship_logs(run_id, fresh, at=self.clock())
            self._shipped.update({log.name: _digest(log) for log in fresh})
            return len(fresh)


# The line that marks what a kept log's two ends leave out (:func:`assay.core.run_logs.marker`).
_CUT = re.compile(r"\n… [0-9,]+ bytes cut …\n")


def _detected(log: KeptLog, known: dict[str, str]) -> KeptLog:
    """``log`` with every secret the scan's detectors find in it redacted; withheld whole
    when they could not read it all. After a cut, as at a live window's start, the line the
    cut split and the rest of a key whose header it left out are left out too: the detectors
    could not know them for what they are."""
    text = log.text
    if _CUT.search(text):
        pieces = _CUT.split(text)
        marks = _CUT.findall(text)
        kept = [pieces[0]]
        for mark, piece in zip(marks, pieces[1:], strict=True):
            after = piece[piece.find("\n") + 1 :] if "\n" in piece else ""
            kept += [mark, without_cut_key(after)]
        text = "".join(kept)
    try:
        found = detected(text, known)
    except ScanIncomplete:
        return replace(log, text=WITHHELD, truncated=True)
    if not found and text == log.text:
        return log
    return replace(log, text=Redactor(redactions(found)).text(text))


def _credentials(operator_env: Mapping[str, str]) -> dict[str, str]:
    from assay.adapters.validators.secrets import credential_values

    return credential_values(operator_env)


def _digest(log: KeptLog) -> str:
    said = f"{log.size}\0{log.truncated}\0{log.text}".encode("utf-8", errors="replace")
    return hashlib.blake2b(said, digest_size=16).hexdigest()
