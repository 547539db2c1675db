"""Crash a real `assay run`, recover it, and check what must hold after any crash.

Shared by ``tests/e2e/faults`` (a kill at every named boundary) and ``bench/crash_soak.py`` (kills
at random moments). The run appends one line to ``src/notes.txt`` per seat, so a second
landing of the same task would show as a second line on the base branch.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from assay.adapters.store.sql import Ledger
from assay.core.vocab import CrashPoint, Stage
from support.repo import Repo, git

# The boundaries a run reaches once its change is on the base branch: recovery finds it
# landed and closes the run merged, never landing it again.
LANDED_POINTS = frozenset(
    {
        CrashPoint.CHECKOUT_PENDING,
        CrashPoint.REF_MOVED,
        CrashPoint.PAYLOAD_WRITTEN,
        CrashPoint.LEDGER_CLOSED,
    }
)

NOTES = "src/notes.txt"
LINE = "change"


def crash_contract(repo: Repo, seats: int, *, coder: str | None = None, extra: str = "") -> Path:
    """A merge contract with ``seats`` command coders and a command validator that passes
    (``extra``: more top-level YAML, e.g. judges)."""
    command = coder or f"echo {LINE} >> {NOTES}"
    return repo.contract(
        f"crash-{seats}.yaml",
        f"""task: Add a line to the notes.
scope: {{allow: ["src/**"]}}
coder: {{kind: command, command: {json.dumps(command)}, timeout_seconds: 60}}
seats: {seats}
validators:
  - {{id: notes, kind: command, run: "grep -q {LINE} {NOTES}"}}
land: merge
{extra}""",
    )


def landings(repo: Path) -> int:
    """Commits on main's first-parent line: one per landing (a merge or a squashed commit)."""
    return int(git(repo, "rev-list", "--count", "--first-parent", "refs/heads/main"))


def invariant_failures(repo: Repo, *, base_landings: int) -> list[str]:
    """Everything that must hold once every run is closed; an empty list when it all holds.

    - main holds the change exactly once, from exactly one landing;
    - no run is open and no task is running;
    - each closed run's dispatch records are exactly the dispatches that started (its
      ``dispatch.started`` events), and the task's ``dispatch`` stage is their sum;
    - the user's checkout of main holds main's files (a landing never left half-done);
    - no seat repository (nor its home), no worktree and no ``assay/*`` branch is left;
    - every payload file is valid JSON and agrees with the ledger.
    """
    root = repo.root
    failures: list[str] = []
    shown = ["git", "show", f"refs/heads/main:{NOTES}"]
    notes = subprocess.run(shown, cwd=root, capture_output=True, text=True, check=False).stdout
    if notes.count(LINE) != 1:
        failures.append(f"main holds the change {notes.count(LINE)} times")
    added = landings(root) - base_landings
    if added != 1:
        failures.append(f"{added} landings on main, expected 1")
    with Ledger.open(f"sqlite:///{root / '.assay' / 'assay.db'}") as ledger:
        if ledger.open_runs():
            failures.append(f"runs left open: {[r.id for r in ledger.open_runs()]}")
        for task in ledger.list_tasks():
            if task.status.value == "running":
                failures.append(f"task {task.id} left running")
            started_in_task = 0
            for run in ledger.runs(task.id):
                started = [e for e in ledger.events(run_id=run.id) if e.kind == "dispatch.started"]
                started_in_task += len(started)
                records = ledger.dispatches(run.id)
                if len(records) != len(started):
                    failures.append(
                        f"run {run.id}: {len(records)} dispatch records, {len(started)} started"
                    )
                failures += _payload_failures(run.id, run.payload_path, run.status.value, ledger)
            stage = ledger.ledger(task.id).stage_state.get(Stage.DISPATCH)
            counted = stage.attempts if stage else 0
            if counted != started_in_task:
                failures.append(f"dispatch stage {counted}, {started_in_task} dispatches started")
    disagree = git(root, "diff", "--name-only", "HEAD")
    if disagree:
        failures.append(f"the checkout disagrees with main: {disagree.split()}")
    worktrees = git(root, "worktree", "list", "--porcelain").count("worktree ")
    if worktrees != 1:
        failures.append(f"{worktrees - 1} worktree(s) left registered")
    seats = root / ".assay" / "seats"
    left = sorted(p.name for p in seats.glob("*/*")) if seats.is_dir() else []
    if left:
        failures.append(f"seat repositories left: {left}")
    branches = git(root, "branch", "--list", "assay/*")
    if branches:
        failures.append(f"branches left: {branches.split()}")
    for path in (root / ".assay" / "runs").glob("*/payload.json"):
        try:
            json.loads(path.read_text())
        except ValueError:
            failures.append(f"{path} is not valid JSON")
    return failures


def _payload_failures(
    run_id: str, payload_path: str | None, status: str, ledger: Ledger
) -> list[str]:
    if payload_path is None:
        return [f"run {run_id}: no payload recorded"]
    try:
        payload = json.loads(Path(payload_path).read_text())
    except (OSError, ValueError) as exc:
        return [f"run {run_id}: payload unreadable: {exc}"]
    wrong = []
    attempts, dispatches = ledger.attempts(run_id), ledger.dispatches(run_id)
    if payload["status"] != status:
        wrong.append(f"payload status {payload['status']}, ledger {status}")
    if payload["attempts"]["total"] != len(attempts):
        wrong.append(f"payload attempts {payload['attempts']['total']}, ledger {len(attempts)}")
    if payload["attempts"]["coder_dispatches"] != len(dispatches):
        wrong.append(
            f"payload dispatches {payload['attempts']['coder_dispatches']}, "
            f"ledger {len(dispatches)}"
        )
    return [f"run {run_id}: {w}" for w in wrong]
