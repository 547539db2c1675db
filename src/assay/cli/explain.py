"""What the task commands say about a task that waits or is held, and the ways back.

A waiting or held task is only useful to an operator who can tell why and what to type next,
so these sentences name the time, the holder, the halt that fired and the exact commands.
Shared by ``assay task list | show | release``, ``assay run --task`` and ``assay serve``; the
fired halts and the ways back (``task show``) are in :mod:`assay.cli.explain_halts`, so that
``task list`` does not import :mod:`dataclasses` (and with it :mod:`inspect` and ``ast``).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING

from assay.core.text import shown
from assay.core.vocab import HoldSource, TaskStatus

if TYPE_CHECKING:  # the models are pydantic's: the commands that print these already hold them
    from assay.core.tasks import Task


def when(moment: datetime) -> str:
    """A time as an operator reads it: UTC, to the second."""
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def span(later: datetime, now: datetime) -> str:
    """How far ``later`` is from ``now``, coarsely: ``4m``, ``1h 5m``, ``2d 3h``, ``30s``;
    rounded up, so a wait not yet over never reads ``0s``."""
    seconds = max(0, math.ceil((later - now).total_seconds()))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    return f"{minutes}m" if minutes else f"{secs}s"


def wait_note(not_before: datetime | None, now: datetime) -> str | None:
    """``waits until <time> (in 4m)`` while a task's wait (its ``not_before``) is ahead of
    ``now``, else None. (Given the fields, not the task: ``task list`` prints from plain rows,
    ``task show`` from the model.)"""
    if not_before is None or now >= not_before:
        return None
    return f"waits until {when(not_before)} (in {span(not_before, now)})"


def waits_message(task: Task, now: datetime) -> str:
    """Why a waiting task is not run now, and how to run it anyway; a wait over by ``now``
    (it ended while this was being said) is said to be over."""
    assert task.not_before is not None
    if not task.waiting(now):
        return (
            f"task {task.id} waited for {wait_cause(task)} until {when(task.not_before)}; "
            "the wait is over: it is runnable now"
        )
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


def error_note(last_error: str | None, status: TaskStatus) -> str | None:
    """A task's last error, labelled for what it is now (a done task's error belongs to an
    earlier run: the run that succeeded had none), as it may be shown."""
    if not last_error:
        return None
    label = "earlier run" if status is TaskStatus.DONE else "last error"
    return f"{label}: {shown(last_error)}"


def wait_cause(task: Task) -> str:
    """What a refunded task waits for: its provider's quota, or a machine fault to clear (a
    provider outage, a broken environment), named by the refunded run's reason."""
    error = task.last_error or ""
    if "quota" in error.lower() or not error:
        return "its provider quota"
    return f"a machine fault to clear ({shorten(error, 200)})"


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
