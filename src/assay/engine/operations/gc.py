"""``assay gc``: remove what closed runs left behind, once they are older than the retention.

The leftovers are found (:mod:`assay.adapters.leftovers`, the halt relay's folders), each run
they belong to is looked up in the ledger (open? its lock held? when closed? which branch did
it leave on purpose, by its payload?), :func:`assay.core.gc.plan_gc` decides, and what it
chose is removed one by one: a failure is reported and the rest goes on. Each run that lost
something gets one ``run.gc`` event in the ledger saying what and how much. The ledger, the
payloads, the run folders and the halt state are the account of the runs: never touched.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assay.adapters import leftovers
from assay.adapters.git import GitError
from assay.adapters.store.records import RunRecord
from assay.adapters.store.sql import Ledger, RunNotFound
from assay.core.gc import GcPlan, Leftover, RunFacts, format_duration, plan_gc
from assay.core.vocab import EventKind, LeftoverKind, RunStatus
from assay.engine.local import halt_relay


@dataclass
class GcReport:
    """What one collection did (or, dry, would do)."""

    plan: GcPlan
    older_than: int
    dry_run: bool
    removed: list[Leftover] = field(default_factory=list)
    failed: list[tuple[Leftover, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def bytes_removed(self) -> int:
        return sum(item.bytes or 0 for item in self.removed)

    def to_json(self) -> dict[str, Any]:
        def item(leftover: Leftover, **more: str) -> dict[str, Any]:
            shown = {
                "kind": leftover.kind.value,
                "target": leftover.target,
                "run_id": leftover.run_id,
                "bytes": leftover.bytes,
            }
            return {**shown, **more}

        return {
            "dry_run": self.dry_run,
            "older_than": format_duration(self.older_than),
            "older_than_seconds": self.older_than,
            "removed": [item(x) for x in self.removed],
            "bytes_removed": self.bytes_removed,
            "skipped": [item(s.leftover, reason=s.reason) for s in self.plan.skip],
            "failed": [item(x, error=why) for x, why in self.failed],
            "warnings": self.warnings,
        }


def collect_garbage(
    *,
    repo: Path,
    home: Path,
    ledger: Ledger,
    older_than: int,
    dry_run: bool = False,
    is_alive: Callable[[Path], bool] | None = None,
    now: datetime | None = None,
) -> GcReport:
    """Find, plan and (unless ``dry_run``) remove; never raises for one leftover's failure."""
    if is_alive is None:
        from assay.engine.local.runner import run_is_alive

        is_alive = run_is_alive
    moment = now or datetime.now(UTC)
    found = find_leftovers(repo, home)
    runs = _facts(ledger, home, {f.run_id for f in found if f.run_id}, is_alive)
    plan = plan_gc(found, runs, now=moment, older_than=older_than)
    report = GcReport(plan=plan, older_than=older_than, dry_run=dry_run)
    if dry_run:
        report.removed = list(plan.remove)
        return report
    for leftover in plan.remove:
        problem = remove_leftover(repo, leftover)
        if problem is None:
            report.removed.append(leftover)
        else:
            report.failed.append((leftover, problem))
    _record(ledger, report, runs, moment)
    return report


def find_leftovers(repo: Path, home: Path) -> list[Leftover]:
    """Every seat folder, run branch and halt relay folder there is, of any run."""
    return [*leftovers.find_folders(home), *leftovers.find_branches(repo), *_relays()]


def remove_leftover(repo: Path, leftover: Leftover) -> str | None:
    """Remove one leftover; None, or what stopped it (one line)."""
    try:
        if leftover.kind is LeftoverKind.RELAY:
            halt_relay.remove_relay_folder(Path(leftover.target))
        else:
            leftovers.remove(repo, leftover)
    except (GitError, OSError) as exc:
        return " ".join(str(exc).split())
    return None


def _relays() -> list[Leftover]:
    return [
        Leftover(
            kind=LeftoverKind.RELAY,
            target=str(folder.path),
            run_id=folder.dispatch_id or None,
            modified_at=datetime.fromtimestamp(folder.modified, UTC),
            listening=folder.listening,
        )
        for folder in halt_relay.relay_folders()
    ]


def _facts(
    ledger: Ledger, home: Path, run_ids: set[str], is_alive: Callable[[Path], bool]
) -> dict[str, RunFacts]:
    """What the ledger says of each run that has a leftover (runs it does not know: absent)."""
    facts = {}
    for run_id in sorted(run_ids):
        try:
            record = ledger.get_run(run_id)
        except RunNotFound:
            continue
        facts[run_id] = run_facts(record, home, is_alive)
    return facts


def run_facts(record: RunRecord, home: Path, is_alive: Callable[[Path], bool]) -> RunFacts:
    """What the ledger's record of a run, its lock and its payload say of it."""
    deliverable, problem = (None, None) if record.open else _deliverable(record.payload_path)
    return RunFacts(
        run_id=record.id,
        task_id=record.task_id,
        status=record.status,
        closed_at=record.finished_at,
        alive=is_alive(home / "runs" / record.id),
        deliverable=deliverable,
        payload_problem=problem,
    )


def _deliverable(payload_path: str | None) -> tuple[str | None, str | None]:
    """(the branch the run left on purpose, why that is unknown): a ready run's branch (``land:
    branch``, a merge left as a branch) or a pull request's; a blocked run's candidate
    branches are for a look only."""
    if not payload_path:
        return None, "the ledger names no payload"
    try:
        payload = json.loads(Path(payload_path).read_text(encoding="utf-8"))
        land = payload.get("land") or {}
        status = payload.get("status")
    except (OSError, ValueError, AttributeError) as exc:
        return None, f"{payload_path}: {' '.join(str(exc).split())}"
    if not isinstance(land, dict):
        return None, f"{payload_path}: its land is not an object"
    branch = land.get("branch")
    if isinstance(branch, str) and (status == RunStatus.READY.value or land.get("pr_url")):
        return branch, None
    return None, None


def _record(ledger: Ledger, report: GcReport, runs: dict[str, RunFacts], now: datetime) -> None:
    """One ``run.gc`` event per run that lost something (a ledger that refuses: a warning)."""
    by_run: dict[str, list[Leftover]] = {}
    for leftover in report.removed:
        if leftover.run_id in runs:
            by_run.setdefault(leftover.run_id, []).append(leftover)
    for run_id, removed in by_run.items():
        data = {
            "older_than": format_duration(report.older_than),
            "removed": [
                {"kind": x.kind.value, "target": x.target, "bytes": x.bytes} for x in removed
            ],
        }
        try:
            ledger.append_event(
                EventKind.RUN_GC, data, at=now, task_id=runs[run_id].task_id, run_id=run_id
            )
        except Exception as exc:  # what was removed is gone; the account says it had to skip
            report.warnings.append(f"the ledger did not record the gc of run {run_id}: {exc}")
