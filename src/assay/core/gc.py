"""What ``assay gc`` removes: a pure plan from what was found on disk and what the ledger says.

A closed run may leave seat repositories (``--keep-worktrees``, or a process that died between
its close and its cleanup), the branches of candidates it did not land (kept for a look), and a
halt relay folder (a run killed before it closed it). Each is removed once the run has been
closed for longer than the retention (:data:`DEFAULT_RETENTION_SECONDS` unless the operator
says otherwise). Never removed: anything of an open run or of one whose process still holds its
lock, anything of a run this ledger does not know, the branch a run left on purpose (``land:
branch``, a pull request's), a branch checked out somewhere, and the account of a run (the
ledger, its payload, its run folder and halt state are not leftovers at all). Times are passed
in (``core`` reads no clock), as aware datetimes; durations are whole seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import AwareDatetime, BaseModel, ConfigDict

from assay.core.vocab import LeftoverKind, RunStatus

DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600
"""How long a closed run's leftovers are kept for a look: 7 days."""
DEFAULT_GC_EVERY_SECONDS = 3600
"""How often ``assay serve`` collects: every hour."""
UNKNOWN_RELAY_GRACE_SECONDS = 60
"""A relay folder no run of this ledger owns, that nobody listens on, is left alone at least
this long: it may be a run of another repository that is just starting."""
_MAX_SECONDS = 100 * 365 * 24 * 3600
_NOT_OURS = "not ours"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d{1,12})([smhdw]?)")


class DurationError(ValueError):
    """A duration the operator wrote that is not one (the message says what would be)."""


def parse_duration(text: str) -> int:
    """``30m``, ``12h``, ``7d``, ``2w``, ``45s`` or ``0`` as seconds; :class:`DurationError`
    otherwise (a bare number other than 0 is refused: minutes or days would be a guess)."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or (not match.group(2) and int(match.group(1)) != 0):
        raise DurationError(
            f"{text!r} is not a duration: a whole number and a unit, s, m, h, d or w "
            "(30m, 12h, 7d), or 0"
        )
    seconds = int(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds > _MAX_SECONDS:
        raise DurationError(f"{text!r} is longer than 100 years")
    return seconds


def format_duration(seconds: int) -> str:
    """Seconds in the largest unit up to days that divides them exactly (``604800``: ``7d``)."""
    if seconds == 0:
        return "0"
    for unit in ("d", "h", "m"):
        if seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"


class RunFacts(BaseModel):
    """What the ledger (and the run's lock and payload) say of one run."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    task_id: str
    status: RunStatus
    closed_at: AwareDatetime | None  # None: the run is open
    alive: bool = False  # a process holds the run's lock
    deliverable: str | None = None  # the branch it left on purpose (land: branch, a PR's)
    payload_problem: str | None = None  # why its payload (and so its deliverable) is unknown


class Leftover(BaseModel):
    """One thing found that a run may have left: a folder or a branch."""

    model_config = ConfigDict(frozen=True)

    kind: LeftoverKind
    target: str  # a path, or a branch's short name
    run_id: str | None
    bytes: int | None = None  # of its files; a branch: the objects only it reaches
    commit: str | None = None  # a branch's commit, so its removal is a compare-and-swap
    checked_out_at: str | None = None  # a branch: the worktree it is checked out in
    modified_at: AwareDatetime | None = None  # a relay folder
    listening: bool = False  # a relay folder: someone answers on its socket


class Skipped(BaseModel):
    model_config = ConfigDict(frozen=True)

    leftover: Leftover
    reason: str
    recent: bool = False  # only too young to go (the retention), nothing to look at


class GcPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    remove: list[Leftover]
    skip: list[Skipped]


def plan_gc(
    found: Sequence[Leftover],
    runs: Mapping[str, RunFacts],
    *,
    now: AwareDatetime,
    older_than: int,
) -> GcPlan:
    """Which of ``found`` to remove, and why each other one stays (a relay folder of a run this
    ledger does not know that stays is left out: it is not this repository's). Folders go
    before branches, so a worktree of an older version is gone before its branch is deleted."""
    remove: list[Leftover] = []
    skip: list[Skipped] = []
    removed_worktrees: list[str] = []
    order = {kind: n for n, kind in enumerate(LeftoverKind)}
    for leftover in sorted(found, key=lambda f: (order[f.kind], f.target)):
        reason, recent = _why_kept(leftover, runs, now, older_than, removed_worktrees)
        if reason is _NOT_OURS:
            continue  # another repository's relay, in use or young: not ours to report
        if reason is None:
            remove.append(leftover)
            if leftover.kind is LeftoverKind.WORKTREES:
                removed_worktrees.append(leftover.target)
        else:
            skip.append(Skipped(leftover=leftover, reason=reason, recent=recent))
    return GcPlan(remove=remove, skip=skip)


def _why_kept(
    leftover: Leftover,
    runs: Mapping[str, RunFacts],
    now: AwareDatetime,
    older_than: int,
    removed_worktrees: Sequence[str],
) -> tuple[str | None, bool]:
    """Why ``leftover`` stays (and whether only for its age), or None: it goes."""
    run = runs.get(leftover.run_id) if leftover.run_id else None
    if run is None:
        if leftover.kind is LeftoverKind.RELAY:
            return _unknown_relay(leftover, now, older_than)
        return f"no run {leftover.run_id or '(none)'} in this ledger", False
    if run.closed_at is None:
        if run.alive:
            return f"run {run.run_id} is running", False
        return (
            f"run {run.run_id} is open and its process is gone: "
            "`assay run --resume` (or `assay serve`) closes it first",
            False,
        )
    if run.alive:
        return f"run {run.run_id} is closing (its process still holds its lock)", False
    if leftover.kind is LeftoverKind.RELAY:
        return None, False  # nothing to look at: it only outlived a killed run
    age = now.timestamp() - run.closed_at.timestamp()
    if age < older_than:
        left = _age(older_than - age)
        return f"run {run.run_id} closed {_age(age)} ago; kept {left} more", True
    if leftover.kind is not LeftoverKind.BRANCH:
        return None, False
    if run.payload_problem is not None:
        return (
            f"run {run.run_id}'s payload cannot be read ({run.payload_problem}), so which "
            "branch it left on purpose is unknown",
            False,
        )
    if leftover.target == run.deliverable:
        return f"the branch run {run.run_id} left for you ({run.status.value}): yours", False
    place = leftover.checked_out_at
    if place is not None and not any(_inside(place, w) for w in removed_worktrees):
        return f"checked out at {place}", False
    return None, False


def _unknown_relay(
    leftover: Leftover, now: AwareDatetime, older_than: int
) -> tuple[str | None, bool]:
    """A relay folder of a run this ledger does not know (another repository's, say): it goes
    only when nobody listens on it and it is older than the retention (and a minute)."""
    if leftover.listening or leftover.modified_at is None:
        return _NOT_OURS, False
    age = now.timestamp() - leftover.modified_at.timestamp()
    if age < max(older_than, UNKNOWN_RELAY_GRACE_SECONDS):
        return _NOT_OURS, False
    return None, False


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _age(seconds: float) -> str:
    """A rough age for a message: ``3d``, ``5h``, ``12m``, ``40s``."""
    whole = max(0, int(seconds))
    for unit in ("d", "h", "m"):
        if whole >= _UNITS[unit]:
            return f"{whole // _UNITS[unit]}{unit}"
    return f"{whole}s"
