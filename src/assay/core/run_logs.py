"""What the ledger keeps of a run's logs: which files of the run folder are logs, whose they
are, and how much of each is kept.

A log is kept whole up to :data:`LOG_LIMIT` bytes (UTF-8); a longer one keeps its first
:data:`HEAD_BYTES` (how the program started: its command line, its first errors) and as much
of its end as fits (how it ended), with one marker line between saying how many bytes were
cut. A run keeps at most :data:`RUN_LIMIT` bytes of logs in all: over that, the logs of its
oldest attempts are cut first, coders' before judges' before validators' (the newest
attempt's verdicts are what a reader looks for first), each down to :data:`SQUEEZED_LIMIT`,
then, if that is still too much, to its marker line alone. Cuts never split a character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from assay.core.vocab import LogRole

LOG_LIMIT = 256 * 1024
HEAD_BYTES = 32 * 1024
RUN_LIMIT = 8 * 1024 * 1024
SQUEEZED_LIMIT = 16 * 1024  # a log cut for the run's budget: its head and end still shown
SQUEEZED_HEAD = 4 * 1024
MARKER_RESERVE = 64  # bytes the marker line takes at most (its count has at most 20 digits)

INTERNAL_ERROR = "internal-error.txt"  # the trace of an internal error, at the run folder's top
# A program's output as assay wrote it (``X.log``: its command, stdout and stderr), a model's
# transcript, mini's trajectory, aider's chat history.
LOG_ENDINGS = (".log", ".jsonl", ".traj.json", ".chat.history.md")
# The raw streams beside ``X.log``: shipped only when ``X.log`` was never written (the host
# died while the program ran), since ``X.log`` holds them otherwise.
STREAM_ENDINGS = (".log.out", ".log.err")

_ATTEMPT = re.compile(r"attempt-([1-9][0-9]{0,8})")
_SEAT = re.compile(r"seat-([1-9][0-9]{0,8})")


@dataclass(frozen=True)
class LogPlace:
    """Whose log a file is, from where it lies: ``attempt-N/seat-M/…`` a coder's,
    ``attempt-N/seat-M/validators/…`` a check's, ``attempt-N/judges/…`` a blind judge's."""

    role: LogRole
    attempt: int | None = None
    seat: int | None = None


@dataclass(frozen=True)
class KeptLog:
    """One log as the ledger keeps it: ``name`` its path relative to the run folder, ``size``
    the file's bytes, ``text`` what is kept (bounded, redacted), ``truncated`` whether that is
    less than the file held."""

    name: str
    role: LogRole
    attempt: int | None
    seat: int | None
    size: int
    text: str
    truncated: bool


def place_of(name: str) -> LogPlace:
    parts = name.split("/")
    attempt = _number(_ATTEMPT, parts[0]) if len(parts) > 2 else None
    if attempt is None:
        return LogPlace(LogRole.OTHER)
    if parts[1] == "judges":
        return LogPlace(LogRole.JUDGE, attempt)
    seat = _number(_SEAT, parts[1])
    if seat is None:
        return LogPlace(LogRole.OTHER, attempt)
    role = LogRole.VALIDATOR if len(parts) > 3 and parts[2] == "validators" else LogRole.CODER
    return LogPlace(role, attempt, seat)


def log_names(names: Iterable[str]) -> list[str]:
    """The logs among a run folder's files (paths relative to it, ``/``-separated), sorted."""
    present = set(names)
    chosen = [n for n in present if n == INTERNAL_ERROR or (_in_attempt(n) and _is_log(n, present))]
    return sorted(chosen)


def kept(text: str, *, limit: int = LOG_LIMIT, head: int = HEAD_BYTES) -> tuple[str, bool]:
    """``text`` within ``limit`` UTF-8 bytes, and whether it was cut."""
    size = len(text.encode("utf-8"))
    if size <= limit:
        return text, False
    return ends(text, text, size, limit=limit, head=head), True


def ends(start: str, end: str, size: int, *, limit: int = LOG_LIMIT, head: int = HEAD_BYTES) -> str:
    """The first ``head`` bytes of ``start``, a marker line, and as much of the end of ``end``
    as fits in ``limit`` bytes in all; ``size`` is what the whole held (for the marker's count).
    ``start`` and ``end`` are a long text's two ends, read apart."""
    first = _first_bytes(start, min(head, max(limit - MARKER_RESERVE, 0)))
    room = max(limit - len(first.encode("utf-8")) - MARKER_RESERVE, 0)
    last = _last_bytes(end, room)
    cut = max(size - len(first.encode("utf-8")) - len(last.encode("utf-8")), 0)
    return first + marker(cut) + last


def marker(cut: int) -> str:
    return f"\n… {cut:,} bytes cut …\n"


def within_run_limit(logs: Sequence[KeptLog], *, limit: int = RUN_LIMIT) -> list[KeptLog]:
    """``logs`` (in their order) cut until they hold at most ``limit`` bytes in all: the oldest
    attempts' first, coders' before judges' before validators', the run's own last."""
    out = list(logs)
    total = sum(_bytes(log) for log in out)
    order = sorted(range(len(out)), key=lambda i: _cut_order(out[i]))
    for squeeze in (SQUEEZED_LIMIT, 0):
        for index in order:
            if total <= limit:
                return out
            log = out[index]
            text = _squeezed(log, squeeze)
            if text != log.text:
                total -= _bytes(log) - len(text.encode("utf-8"))
                out[index] = replace(log, text=text, truncated=True)
    return out


def _squeezed(log: KeptLog, limit: int) -> str:
    if limit == 0:
        return marker(log.size).lstrip("\n")
    return kept(log.text, limit=limit, head=SQUEEZED_HEAD)[0]


_ROLE_ORDER = {LogRole.CODER: 0, LogRole.JUDGE: 1, LogRole.VALIDATOR: 2, LogRole.OTHER: 3}


def _cut_order(log: KeptLog) -> tuple[bool, int, int, str]:
    own = log.role is LogRole.OTHER and log.attempt is None
    return own, log.attempt or 0, _ROLE_ORDER[log.role], log.name


def _bytes(log: KeptLog) -> int:
    return len(log.text.encode("utf-8"))


def _first_bytes(text: str, n: int) -> str:
    # The text encodes to valid UTF-8, so the only bytes dropped are a character cut in two.
    return text.encode("utf-8")[:n].decode("utf-8", errors="ignore")


def _last_bytes(text: str, n: int) -> str:
    data = text.encode("utf-8")
    return data[max(len(data) - n, 0) :].decode("utf-8", errors="ignore") if n else ""


def _number(pattern: re.Pattern[str], part: str) -> int | None:
    match = pattern.fullmatch(part)
    return int(match.group(1)) if match else None


def _in_attempt(name: str) -> bool:
    parts = name.split("/")
    return len(parts) > 2 and _number(_ATTEMPT, parts[0]) is not None


def _is_log(name: str, present: set[str]) -> bool:
    if name.endswith(LOG_ENDINGS):
        return True
    return name.endswith(STREAM_ENDINGS) and name[:-4] not in present
