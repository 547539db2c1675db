"""What fired in the run that held a task, and the ways back: ``assay task show``'s part of
:mod:`assay.cli.explain`."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assay.core.preflight import UNRUNNABLE
from assay.core.vocab import SettleRow, TaskStatus

if TYPE_CHECKING:
    from assay.adapters.store.records import RunRecord
    from assay.core.tasks import Task


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


def newest_closed(runs: list[RunRecord]) -> RunRecord | None:
    """The run whose payload :func:`fired_halts` reads: the newest closed one."""
    closed = [r for r in runs if not r.open]
    return closed[-1] if closed else None


def fired_halts(
    runs: list[RunRecord], state_dir: Path, kept: dict[str, Any] | None = None
) -> list[FiredHalt]:
    """The block halts of the newest closed run, when that run's settle row is ``halted``:
    from its payload as the ledger keeps it (``kept``, read on any machine), else from its
    payload file when that is here."""
    run = newest_closed(runs)
    if run is None or run.settle_row is not SettleRow.HALTED:
        return []
    dispatch = run.dispatch_id or run.id
    halts = (kept if isinstance(kept, dict) else _payload(run)).get("halts")
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
    if (task.hold_reason or "").startswith(UNRUNNABLE):
        ways.append(
            WayBack(
                "fix what the reason names on this machine (install the program, export the "
                "key, or change the contract), then release it",
                [release],
            )
        )
        return ways
    ways.append(
        WayBack(
            "release it: queued again with attempts reset to 0; its run history is kept",
            [release],
        )
    )
    return ways


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
