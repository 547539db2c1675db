"""What the task commands say about a task that waits or is held, and the ways back.

A waiting or held task is only useful to an operator who can tell why and what to type next,
so these sentences name the time, the holder, the halt that fired and the exact commands.
Shared by ``assay task list | show | release``, ``assay run --task`` and ``assay serve``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.core.vocab import HoldSource, SettleRow, TaskStatus

if TYPE_CHECKING:  # the models are pydantic's: the commands that print these already hold them
    from assay.adapters.store.records import RunRecord
    from assay.core.tasks import Task


def when(moment: datetime) -> str:
    """A time as an operator reads it: UTC, to the second."""
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def span(later: datetime, now: datetime) -> str:
    """How far ``later`` is from ``now``, coarsely: ``4m``, ``1h 5m``, ``2d 3h``, ``30s``."""
    seconds = max(0, int((later - now).total_seconds()))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    return f"{minutes}m" if minutes else f"{secs}s"


def wait_note(task: Task, now: datetime) -> str | None:
    """``waits until <time> (in 4m)`` while the task waits, else None."""
    if task.not_before is None or not task.waiting(now):
        return None
    return f"waits until {when(task.not_before)} (in {span(task.not_before, now)})"


def waits_message(task: Task, now: datetime) -> str:
    """Why a waiting task is not run now, and how to run it anyway."""
    assert task.not_before is not None
    return (
        f"task {task.id} waits for {wait_cause(task)} until {when(task.not_before)} "
        f"(in {span(task.not_before, now)}); `assay task release {task.id}` to run it now"
    )


def shorten(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary with an ellipsis (a
    cut mid-token, like ``(127.0.0.1:``, reads as if the message said that)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    head, space, _ = cut.rpartition(" ")
    return (head if space and len(head) >= limit // 2 else cut).rstrip(" ,;:([{") + "…"


def error_note(task: Task) -> str | None:
    """The task's last error, labelled for what it is now: a done task's error belongs to an
    earlier run (the run that succeeded had none)."""
    if not task.last_error:
        return None
    label = "earlier run" if task.status is TaskStatus.DONE else "last error"
    return f"{label}: {task.last_error}"


def wait_cause(task: Task) -> str:
    """What a refunded task waits for: its provider's quota, or a machine fault to clear (a
    provider outage, a broken environment), named by the refunded run's reason."""
    error = task.last_error or ""
    if "quota" in error.lower() or not error:
        return "its provider quota"
    return f"a machine fault to clear ({shorten(error, 200)})"


@dataclass(frozen=True)
class FiredHalt:
    """A block halt that fired in the run that held the task, and where it stands now."""

    name: str
    severity: str
    detail: str
    run_id: str
    dispatch_id: str
    lifecycle: str | None  # from the dispatch's state file; None when it cannot be read


@dataclass(frozen=True)
class WayBack:
    """One way to get a held task running again: what it does, and the commands in order."""

    summary: str
    commands: list[str] = field(default_factory=list)


def fired_halts(runs: list[RunRecord], state_dir: Path) -> list[FiredHalt]:
    """The block halts of the newest closed run, when that run's settle row is ``halted``."""
    closed = [r for r in runs if not r.open]
    if not closed or closed[-1].settle_row is not SettleRow.HALTED:
        return []
    run = closed[-1]
    dispatch = run.dispatch_id or run.id
    halts = _payload(run).get("halts")
    fired = halts.get("fired") if isinstance(halts, dict) else None
    states = _lifecycles(state_dir, dispatch)
    return [
        FiredHalt(
            name=str(h.get("name")),
            severity=str(h.get("severity", "block")),
            detail=str(h.get("detail", "")),
            run_id=run.id,
            dispatch_id=dispatch,
            lifecycle=states.get(str(h.get("name"))),
        )
        for h in (fired if isinstance(fired, list) else [])
        if isinstance(h, dict)
    ]


def ways_back(task: Task, halts: list[FiredHalt], state_dir: Path) -> list[WayBack]:
    """The ways a held task runs again: re-arm what fired (then release), or release it."""
    if task.status is not TaskStatus.HELD:
        return []
    release = f"assay task release {task.id}"
    ways: list[WayBack] = []
    still_fired = [h for h in halts if h.lifecycle == "FIRED"]  # re-armable; not once ARMED
    if still_fired:
        rearms = [
            "assay halt rearm "
            + " ".join(
                [
                    f"--dispatch-id {h.dispatch_id}",
                    f"--condition {h.name}",
                    f"--state-dir {shlex.quote(str(state_dir))}",
                    '--evidence "<what you changed to remedy it>"',
                ]
            )
            for h in still_fired
        ]
        ways.append(
            WayBack(
                "remedy the cause, record it by re-arming the halt (a fired block halt is "
                "sticky until then), then release the task",
                [*rearms, release],
            )
        )
    ways.append(
        WayBack(
            "release it: queued again with attempts reset to 0; its run history is kept",
            [release],
        )
    )
    return ways


def holder(task: Task) -> str | None:
    if task.hold_source is HoldSource.MANUAL:
        return "a human (manual hold)"
    if task.hold_source is HoldSource.MACHINE:
        return "the machine"
    return None


def next_step(task: Task, now: datetime) -> str:
    """One sentence: what happens to the task next, or what the operator should do."""
    tid = task.id
    if task.waiting(now):
        return waits_message(task, now) + f" (or `assay run --task {tid} --ignore-wait`)"
    return {
        TaskStatus.QUEUED: f"`assay serve` or `assay run --task {tid}` will run it",
        TaskStatus.RUNNING: "a run is in progress",
        TaskStatus.FAILED: f"runnable again: `assay serve` or `assay run --task {tid}`",
        TaskStatus.DONE: "nothing: it is done",
        TaskStatus.HELD: "read the last payload, then take one of the ways back below",
    }[task.status]


def as_json(halts: list[FiredHalt], ways: list[WayBack]) -> dict[str, Any]:
    return {"fired_halts": [asdict(h) for h in halts], "ways_back": [asdict(w) for w in ways]}


def _payload(run: RunRecord) -> dict[str, Any]:
    if not run.payload_path:
        return {}
    try:
        loaded = json.loads(Path(run.payload_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _lifecycles(state_dir: Path, dispatch_id: str) -> dict[str, str]:
    from assay.adapters.store import halt_files

    try:
        state = halt_files.read_state(halt_files.state_path(state_dir, dispatch_id))
    except (halt_files.StateFileError, OSError, ValueError):
        return {}
    return {h.name: h.lifecycle.value for h in state.halts}
