"""Closing a run that never reached its own close: killed, or stopped by a signal.

Its counts come from its event log (:mod:`assay.engine.local.journal`), so the payload and the
ledger say how many coders really ran. A run whose commit is already on the base branch
(found by its ``Assay-Run`` trailer) is closed as landed and never landed again; so is a run
whose journal says its pull request opened (``land.pr_opened``), or, when it died after its
push (``land.pushed``), whose pull request the GitHub API lists as open for its branch. Any
other is closed once as interrupted: an environment error, refunded through ``settle``. Either
way its seat repositories and branches are removed (but a pull request's branch). Closed runs
are never touched again, so a second recovery does nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from assay.adapters import folders, git, seats
from assay.adapters.landing import LandRefused, finish_landing, landed_commit
from assay.adapters.origin import OriginError, fetch_branch, tracking_ref
from assay.adapters.process_groups import GROUPS_FILE, stop_recorded_groups
from assay.adapters.redact import Redactor
from assay.adapters.repo_identity import repository_id
from assay.adapters.run_files import cause_of
from assay.adapters.store import halt_files, halt_ops
from assay.adapters.store.errors import LedgerError
from assay.adapters.store.halt_journal import journaled_firings
from assay.adapters.store.records import EventIn, RunDocument, RunRecord
from assay.adapters.store.sql import Ledger, RunNotFound
from assay.core.contract import Contract
from assay.core.payload import HaltNotice
from assay.core.run_logs import KeptLog
from assay.core.vocab import (
    CanonicalHalt,
    EventKind,
    HaltLifecycle,
    HaltSeverity,
    HaltType,
    LogRole,
    RunStatus,
)
from assay.engine.close import CloseFacts, close_run
from assay.engine.local.halt_relay import remove_relay_folders
from assay.engine.local.interrupt import UserStop
from assay.engine.local.journal import (
    JournaledLanding,
    JournaledRun,
    interrupted_last,
    read_journal,
)
from assay.engine.recovery.refunds import closed_quota_streak, refund_streak
from assay.engine.run_result import RunResult
from assay.engine.values import LandOutcome

Clock = Callable[[], datetime]
Warn = Callable[[str], None]  # what could not be removed, one line each

UNRECORDED_GRACE = timedelta(seconds=60)
DIED = "interrupted: the process running it died before the run closed"
# Closed runs that ended like this keep their candidates' branches (for a look), not their
# seats; others keep neither (but the branch ``land: branch`` or a pull request left).
KEEPS_CANDIDATES = (RunStatus.FAILED, RunStatus.BLOCKED, RunStatus.STALLED)
KEEP_MARKER = "keep-worktrees"  # in the run folder: the operator asked to keep its seats


def close_unfinished(
    *,
    repo: Path,
    home: Path,
    ledger: Ledger,
    record: RunRecord,
    contract: Contract,
    reason: str,
    clock: Clock,
    env: Mapping[str, str] | None = None,
    warn: Warn | None = None,
    stopped: UserStop | None = None,
) -> RunStatus:
    """Close ``record`` (open, its process gone or stopping) from what its event log says;
    a seat or branch that cannot be removed is said to ``warn`` and stays (never a fault).
    ``stopped``: its own user stopped it, so a task it would leave runnable is held instead,
    in the same transaction (with a ``task.saved`` event saying who held it and why)."""
    # Here, not at the top: a run that closes normally never needs them (nor their judge and
    # model client), and every run imports this module.
    from assay.engine.recovery.usage import (
        account_left_logs,
        account_unanswered_judges,
        budget_spent,
    )

    dispatch_id = record.dispatch_id or record.id
    # Coders of a run whose assay died live on in their own groups: end them before closing.
    stop_recorded_groups(home / "runs" / record.id / GROUPS_FILE)
    remove_relay_folders(dispatch_id)  # its halt relay's socket, which no one listens on now
    # What its programs wrote before it died, when its folder is on this machine.
    ship_left_logs(ledger, home / "runs" / record.id, record.id, env or os.environ, clock, warn)
    journal = read_journal(ledger.events(run_id=record.id), dispatch_id=dispatch_id, fault=reason)
    # What its programs reported after the host died is in their files: journaled now.
    account_left_logs(
        ledger,
        home=home,
        task_id=record.task_id,
        run_id=record.id,
        dispatches=journal.dispatches,
        clock=clock,
    )
    account_unanswered_judges(
        ledger, home=home, contract=contract, task_id=record.task_id, run_id=record.id,
        clock=clock,
    )  # fmt: skip
    commit = _landed(repo, journal, record.id, warn)
    if commit is not None and journal.base_branch and journal.origin is None:
        try:  # its process may have died before the checkout was brought along
            finish_landing(repo, journal.base_branch, commit)
        except LandRefused:
            commit = None  # the ref swapped back: nothing landed
    state_dir = home / "halt-state"
    # A block halt the ledger journaled stays sticky even if the file no longer shows it.
    blocks = _fired_block_halts(
        [
            *journaled_firings(ledger.events(run_id=record.id)),
            *_file_firings(state_dir, dispatch_id),
        ]
    )
    if not blocks:
        halt_ops.attest(dispatch_id, state_dir)
    task = ledger.get_task(record.task_id)
    now = clock()
    landing = journal.landing
    pr_url = landing.pr_url if landing else None
    if commit is None and landing is not None and pr_url is None:
        pr_url = _pull_request_opened(repo, contract, landing, env or os.environ)
    land: LandOutcome | None = None
    if commit is not None:
        status, halt_type = RunStatus.MERGED, HaltType.NONE
        into = (
            f"{journal.base_branch} on {journal.origin}" if journal.origin else journal.base_branch
        )
        reason = f"merged into {into} as {commit[:12]} before the process died"
        land = LandOutcome(status, reason)
    elif landing is not None and pr_url is not None:  # opened once; never opened again
        if landing.blocked:
            status, halt_type = RunStatus.BLOCKED, HaltType.BLOCKER
            reason = f"blocked; left for review as {pr_url} before the process died"
        else:
            status, halt_type = RunStatus.READY, HaltType.NONE
            reason = f"pull request {pr_url} opened before the process died"
        land = LandOutcome(status, reason, landing.branch, left_pr=True, pr_url=pr_url)
    elif blocks:  # a block halt fired before the crash: a human decides, never a refund
        names = ", ".join(f"{h.name} ({h.detail})" for h in blocks)
        status, halt_type = RunStatus.BLOCKED, HaltType.ESCALATE
        reason = f"block halt fired before the process died: {names}"
    elif (spent := budget_spent(ledger, contract, record)) is not None:
        # It had spent its budget: a human decides, never a refund and a fresh budget.
        blocks = [HaltNotice(name=CanonicalHalt.BUDGET_EXHAUSTED.value, severity=HaltSeverity.WARN,
                             detail=spent)]  # fmt: skip
        status, halt_type = RunStatus.BLOCKED, HaltType.ESCALATE
        reason = f"budget exhausted before the process died: {spent}; the task is held"
    else:
        status, halt_type = RunStatus.FAILED, HaltType.ENVIRONMENT_ERROR
    parked = land is None and not blocks  # interrupted: refunded through settle
    attempts = interrupted_last(journal.attempts, reason) if parked else journal.attempts
    result = RunResult(status, halt_type, reason, attempts=attempts, fired=blocks)
    result.land = land
    result.halted = bool(blocks) and land is None
    result.parked = parked
    closing = close_run(
        CloseFacts(
            task=task,
            run_id=record.id,
            dispatch_id=dispatch_id,
            contract=contract,
            result=result,
            started_at=record.started_at,
            settled_at=now,
            finished_at=now,
            refunds=refund_streak(ledger, task.id),
            quota_streak=closed_quota_streak(ledger, task.id),
            dispatches=journal.dispatches,
            usage=ledger.usage(run_id=record.id),
            stopped=stopped.reason if stopped else None,
        )
    )
    payload = closing.payload
    path = home / "runs" / record.id / "payload.json"
    written: str | None = str(path)
    events: list[EventIn] = []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        halt_files.write_json_atomic(path, payload.to_json())
    except OSError as exc:  # the ledger is the truth: the run still closes, and says why
        warning = f"the payload was not written to {path}: {cause_of(exc)}"
        events.append(EventIn(kind=EventKind.WARNING, data={"message": warning}))
        written = None
    event = EventKind.RUN_RECOVERED_LANDED if land is not None else EventKind.RUN_INTERRUPTED
    events.append(EventIn(kind=event, data={"reason": reason, "commit": commit, "pr_url": pr_url}))
    if stopped is not None and closing.task.hold_reason == stopped.reason:
        events.append(EventIn(kind=EventKind.TASK_SAVED, data=stopped.saved()))
    document = close_document(
        payload.to_json(),
        diff=_landed_diff(repo, commit) if commit else None,
        state_dir=state_dir,
        dispatch_id=dispatch_id,
    )
    changes = {"payload_path": written, "events": events, "document": document}
    ledger.close_run(closing.row.model_copy(update=changes))
    _say(warn, remove_run_seats(repo, home, record.id, keep=land.branch if land else None))
    return status


def _coders(log: KeptLog) -> bool:
    return log.role is LogRole.CODER


def ship_left_logs(
    ledger: Ledger,
    run_dir: Path,
    run_id: str,
    env: Mapping[str, str],
    clock: Clock,
    warn: Warn | None,
) -> None:
    """Ship the logs a run left in its folder here (none when it ran elsewhere); a ledger that
    refuses is a warning: the run still closes."""
    from assay.adapters.log_shipping import LogShipper

    if not run_dir.is_dir():
        return
    try:
        # The run died before its checks could scan its coders' output: the scan's detectors
        # read what is kept of it, as they read a running coder's live copy.
        LogShipper(ledger, env, clock).ship(run_id, run_dir, unscanned=_coders)
    except Exception as exc:
        cause = " ".join(str(exc).split())[:200] or type(exc).__name__
        _say(warn, [f"run {run_id}: its logs were not shipped to the ledger: {cause}"])


def close_document(
    payload: dict[str, Any],
    *,
    diff: str | None,
    state_dir: Path,
    dispatch_id: str,
    redactor: Redactor | None = None,
) -> RunDocument:
    """What the ledger keeps of a closing run for a reader on any machine: the payload as
    written, the chosen candidate's diff (cut when huge) and the dispatch's halt state file as
    it stands now; a secret the run detected is cut from the diff and the states too."""
    states: Any = None
    with contextlib.suppress(OSError, ValueError):  # no file (never armed), or not JSON
        text = halt_files.state_path(state_dir, dispatch_id).read_text(encoding="utf-8")
        states = json.loads(text)
    if not isinstance(states, dict):
        states = None
    if redactor:
        diff = redactor.text(diff) if diff else diff
        states = redactor.data(states)
    return RunDocument.build(payload, diff=diff or None, halt_states=states)


def _landed_diff(repo: Path, commit: str) -> str | None:
    """The change a landed commit made (what its run merged), or None when git cannot say."""
    try:
        return git.commit_diff(repo, commit)
    except git.GitError:
        return None


def recover_interrupted(
    *,
    repo: Path,
    home: Path,
    ledger: Ledger,
    contract_for: Callable[[str], Contract],
    is_alive: Callable[[Path], bool],
    clock: Clock = lambda: datetime.now(UTC),
    warn: Warn | None = None,
) -> list[str]:
    """Close every open run of this home whose process died; clear what dead, closed runs left
    behind. What cannot be removed is said to ``warn``, once, and the rest goes on.

    A run is this home's when its folder is here: a run takes its folder (and its lock) before
    its ledger row, so a run recorded in a shared ledger with no folder here runs on another
    machine (or from another home) and is never closed from here, alive or not; nor is one of
    a task of another repository."""
    recovered: list[str] = []
    here = repository_id(repo)
    for record in ledger.open_runs():
        run_dir = home / "runs" / record.id
        if not run_dir.is_dir() or is_alive(run_dir):
            continue
        if _task_elsewhere(ledger, record.task_id, here):
            continue
        with _claimed(run_dir) as mine:
            # Another recoverer (a second `serve`) may hold it, or have closed it just now.
            if not mine or not ledger.get_run(record.id).open:
                continue
            close_unfinished(
                repo=repo,
                home=home,
                ledger=ledger,
                record=record,
                contract=contract_for(record.task_id),
                reason=DIED,
                clock=clock,
                warn=warn,
            )
        recovered.append(record.id)
    # A run just closed here had its seats removed then: what stayed was said already.
    sweep_leftovers(repo, home, ledger, is_alive, warn, done=set(recovered))
    sweep_unrecorded_run_folders(home, ledger, now=clock())
    return recovered


def _task_elsewhere(ledger: Ledger, task_id: str, here: str | None) -> bool:
    try:
        return ledger.get_task(task_id).belongs_elsewhere(here)
    except LedgerError:  # unreadable or gone: its run is this home's to close
        return False


def sweep_unrecorded_run_folders(home: Path, ledger: Ledger, *, now: datetime) -> None:
    """Remove run folders that hold nothing but a free ``lock`` and have no ledger row: runs
    whose start the ledger refused. A run takes its lock before its row is written, so a
    starting one is never taken; ``UNRECORDED_GRACE`` covers the instant before it locks."""
    runs = home / "runs"
    for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        try:
            names = {p.name for p in run_dir.iterdir()}
            touched = (run_dir / "lock" if names else run_dir).stat().st_mtime
        except OSError:  # not a folder, or gone meanwhile
            continue
        if not names <= {"lock"} or now.timestamp() - touched < UNRECORDED_GRACE.total_seconds():
            continue
        with _claimed(run_dir) as mine:
            if not mine or _recorded(ledger, run_dir.name):
                continue
            remove_unrecorded_run_folder(run_dir)


def remove_unrecorded_run_folder(run_dir: Path) -> None:
    """Remove a run folder that never got its ledger row: its lock, then the folder (only if
    nothing else is in it)."""
    with contextlib.suppress(OSError):
        (run_dir / "lock").unlink()
    with contextlib.suppress(OSError):
        run_dir.rmdir()


def _recorded(ledger: Ledger, run_id: str) -> bool:
    try:
        ledger.get_run(run_id)
    except RunNotFound:
        return False
    return True


@contextlib.contextmanager
def _claimed(run_dir: Path) -> Iterator[bool]:
    """Hold the run's lock while recovering it: True if this process got it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def sweep_leftovers(
    repo: Path,
    home: Path,
    ledger: Ledger,
    is_alive: Callable[[Path], bool],
    warn: Warn | None = None,
    done: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Seats a closed run left because its process died between close and cleanup (a run that
    did not land keeps its candidates' branches; ``--keep-worktrees`` keeps everything). What
    cannot be removed is said to ``warn`` and stays for `assay gc`. Runs in ``done`` were
    cleared just now: not again."""
    for run_id in sorted(_runs_with_seats(repo, home) - done):
        try:
            record = ledger.get_run(run_id)
        except RunNotFound:
            continue
        run_dir = home / "runs" / run_id
        if record.open or (run_dir / KEEP_MARKER).exists() or is_alive(run_dir):
            continue
        if record.status in KEEPS_CANDIDATES:
            _say(warn, remove_run_folders(repo, home, run_id))
            continue
        keep = _landed_branch(record) if record.status is RunStatus.READY else None
        _say(warn, remove_run_seats(repo, home, run_id, keep=keep))


def remove_run_seats(repo: Path, home: Path, run_id: str, keep: str | None = None) -> list[str]:
    """Remove the run's seat repositories and homes, and its ``assay/<run>/…`` branches in the
    user's repository (but ``keep``). Seat worktrees of runs made by older versions too. Never
    raises for what it cannot remove: what stayed, one line each."""
    left = remove_run_folders(repo, home, run_id)
    try:
        branches = _run_branches(repo, run_id)
    except git.GitError as exc:
        return [*left, f"run {run_id}: its branches were not listed: {_one_line(exc)}"]
    for branch in branches:
        if branch != keep:
            try:
                git.delete_branch(repo, branch)
            except git.GitError as exc:
                left.append(f"run {run_id}: the branch {branch} was not deleted: {_one_line(exc)}")
    return left


def remove_run_folders(repo: Path, home: Path, run_id: str) -> list[str]:
    """Remove the run's seat repositories and homes (and the seat worktrees of older versions,
    ``.assay/worktrees/<run>``), never a branch. Never raises for what it cannot remove: what
    stayed, one line each (which path, why)."""
    left = []
    removal = seats.remove_seats(home, run_id)
    if not removal.complete:
        left.append(f"run {run_id}: its seats were not all removed: {removal.summary()}")
    root = home / "worktrees" / run_id
    if root.is_dir() and not root.is_symlink():
        for path in sorted(root.iterdir()):
            try:
                git.remove_worktree(repo, path)
            except git.GitError as exc:
                left.append(f"run {run_id}: git did not remove {path}: {_one_line(exc)}")
            stayed = folders.remove_tree(path)  # nothing left to do when git removed it all
            if not stayed.complete:
                left.append(f"run {run_id}: its worktree was not all removed: {stayed.summary()}")
        with contextlib.suppress(OSError):
            root.rmdir()
    with contextlib.suppress(OSError):
        root.parent.rmdir()  # no empty ``worktrees/`` left
    return left


def _say(warn: Warn | None, lines: list[str]) -> None:
    for line in lines:
        if warn is not None:
            warn(line)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _run_branches(repo: Path, run_id: str) -> list[str]:
    return git.branches(repo, f"refs/heads/{git.seat_branch(run_id, '')}")


def _runs_with_seats(repo: Path, home: Path) -> set[str]:
    found: set[str] = set()
    for root in (home / "seats", home / "worktrees"):
        found |= {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    for line in git.branches(repo, "refs/heads/assay/"):
        parts = line.split("/")
        if len(parts) >= 3:
            found.add(parts[1])
    return found


def _landed_branch(record: RunRecord) -> str | None:
    """The branch a closed run left on purpose (``land: branch``), from its payload."""
    if not record.payload_path:
        return None
    try:
        land = json.loads(Path(record.payload_path).read_text()).get("land") or {}
    except (OSError, ValueError, AttributeError):
        return None
    branch = land.get("branch") if isinstance(land, dict) else None
    return branch if isinstance(branch, str) else None


def _pull_request_opened(
    repo: Path, contract: Contract, landing: JournaledLanding, env: Mapping[str, str]
) -> str | None:
    """The url of the pull request a run that died after its push opened, asked of the API.

    None when none is open (its pushed branch is then deleted: the run is refunded) or when
    the API cannot tell (the branch stays, for a human to see).
    """
    from assay.adapters import github
    from assay.engine.local.pull_request import delete_remote_branch, find_open_pull_request

    try:
        found = find_open_pull_request(contract, repo, landing.branch, env)
    except (github.GitHubError, git.GitError):
        return None
    if found is not None:
        return found.html_url
    if landing.remote:
        delete_remote_branch(repo, landing.remote, landing.branch)
    return None


def _file_firings(state_dir: Path, dispatch_id: str) -> list[HaltNotice]:
    """The firings the run's halt state file shows (none when it is missing or unreadable)."""
    try:
        state = halt_files.read_state(halt_files.state_path(state_dir, dispatch_id))
    except Exception:  # no state (the run died before arming) or unreadable: nothing to read
        return []
    return [
        HaltNotice(
            name=h.name,
            severity=h.severity,
            detail=str((h.evidence or {}).get("detail", "")),
            fired_at=h.fired_at,
        )
        for h in state.halts
        if h.lifecycle is HaltLifecycle.FIRED or h.has_fired
    ]


def _fired_block_halts(notices: list[HaltNotice]) -> list[HaltNotice]:
    """The block-severity firings, once per halt name (the journal's first, then the file's)."""
    seen: dict[str, HaltNotice] = {}
    for notice in notices:
        if notice.severity is HaltSeverity.BLOCK:
            seen.setdefault(notice.name, notice)
    return list(seen.values())


def _landed(repo: Path, journal: JournaledRun, run_id: str, warn: Warn | None) -> str | None:
    """The commit the run landed before it died, if it did: on its origin's branch (fetched
    now; what was last seen of it when the origin cannot be reached) or on its base branch."""
    if not (journal.base_branch and journal.base_commit):
        return None
    if journal.origin is None:
        return landed_commit(repo, journal.base_branch, run_id, since=journal.base_commit)
    try:
        fetch_branch(repo, journal.origin, journal.base_branch)
    except OriginError as exc:
        _say(warn, [f"run {run_id}: {exc}; what was last fetched decides whether it landed"])
    seen = tracking_ref(journal.origin, journal.base_branch)
    return landed_commit(repo, seen, run_id, since=journal.base_commit)
