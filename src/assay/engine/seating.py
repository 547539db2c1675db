"""The seats of one run: their repositories, their sandboxes, and what reaches the user's.

Each seat is a repository of its own (:mod:`assay.adapters.seats`) kept across the run's
attempts. Every process of a seat (the coder, the command validators) runs in a sandbox that
may write the seat, its own log folder and (the coder) the halt state, and that does not see
the operator's home, the user's repository or assay's folder; the user's object store is bound
back read-only because the seat borrows it. After each such process the seat's ``.git`` is
checked and reset before assay runs git there; a seat whose ``.git`` was replaced is an error
and is started afresh at the next attempt. A candidate enters the user's repository (as the
branch ``assay/<run>/seat-N``, fetched from the seat) only when it passed the scope and secret
checks: at landing time, or, for a run that did not land, at its end (its one commit on the
base, for a look). When the run closes its seats go (working copies, homes, the judges' home);
only those branches stay, unless the operator asked to keep the seats (``--keep-worktrees``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from assay.adapters import git, seats
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.results import ValidatorResult
from assay.core.text import one_line_title
from assay.core.vocab import CoderKind, NetworkMode, Severity
from assay.engine.effects import RunPlan

# Coders whose network the contract's ``network: none`` takes away; agents call their model.
_OFFLINE_CAPABLE = (CoderKind.COMMAND, CoderKind.REPLAY)
# The checks a candidate must pass before any of it enters the user's repository.
CLEARING_CHECKS = ("scope", "secrets")


class Seating:
    """The seat repositories of one run, by seat number."""

    def __init__(self, home: Path, operator_env: Mapping[str, str]) -> None:
        self.home = home
        self.operator_env = operator_env
        self.seats: dict[int, seats.Seat] = {}
        self.tampered: dict[int, str] = {}  # seat -> why its repository is not used again
        self.candidates: dict[tuple[int, int], str] = {}  # (attempt, seat) -> its checkpoint
        self.cleared: dict[tuple[int, int], bool] = {}  # passed the scope and secret checks
        self.fetched: dict[int, str] = {}  # seat -> its branch in the user's repository
        self.starts: dict[tuple[int, int], str] = {}  # (attempt, seat) -> the commit it starts on
        self._stores: tuple[Path, ...] | None = None
        self.halt_relay: Path | None = None  # the folder of the engine's halt relay socket

    # -- the repositories ---------------------------------------------------------------------

    def prepare(self, plan: RunPlan, seat: int, attempt: int = 1) -> seats.Seat:
        """The seat's repository, ready for its dispatch of ``attempt``: made at its first
        dispatch (or again after tampering); otherwise put back where the attempt starts (the
        seat's last candidate), so a dispatch that is retried never starts on what a lost
        one left behind."""
        if seat in self.seats and seat not in self.tampered:
            self.secure(seat)  # before assay's git runs there: its .git as assay left it
        if seat not in self.seats or seat in self.tampered:
            self.tampered.pop(seat, None)
            path = seats.seat_path(self.home, plan.run_id, f"seat-{seat}")
            self.seats[seat] = seats.create_seat(
                plan.repo_root,
                path,
                plan.base_commit,
                git.seat_branch(plan.run_id, f"seat-{seat}"),
                store=self.stores(plan)[0],
            )
            self.starts = {k: v for k, v in self.starts.items() if k[1] != seat}
        repo = self.seats[seat]
        start = self.starts.setdefault((attempt, seat), git.head_commit(repo.path))
        git.reset_to(repo.path, start)
        return repo

    def stores(self, plan: RunPlan) -> tuple[Path, ...]:
        if self._stores is None:
            self._stores = seats.object_stores(plan.repo_root)
        return self._stores

    def secure(self, seat: int) -> str | None:
        """Check and reset the seat's ``.git`` after one of its processes; why it cannot be
        used (and never will be in this run), or None."""
        if seat in self.tampered:
            return self.tampered[seat]
        try:
            seats.secure(self.seats[seat])
        except seats.SeatTampered as exc:
            self.tampered[seat] = f"the seat's repository was tampered with: {exc}"
            return self.tampered[seat]
        return None

    def usable(self, seat: int) -> bool:
        return seat in self.seats and seat not in self.tampered

    # -- sandboxes ----------------------------------------------------------------------------

    def coder_sandbox(self, plan: RunPlan, seat: int, log_dir: Path) -> SandboxSpec:
        """Where the seat's coder runs: its repository, its log folder, the halt state and
        the folder of the halt relay's socket (a firing reported there cannot be taken back)."""
        kind = plan.contract.coder_for_seat(seat).kind
        network = plan.contract.network if kind in _OFFLINE_CAPABLE else NetworkMode.ON
        relay = (self.halt_relay,) if self.halt_relay is not None else ()
        return self._spec(plan, seat, (log_dir, self.home / "halt-state", *relay), network)

    def validator_sandbox(self, plan: RunPlan, seat: int, log_dir: Path) -> SandboxSpec:
        """Where a command validator runs code the coder wrote: its repository and log folder."""
        return self._spec(plan, seat, (log_dir,), plan.contract.network)

    def judge_sandbox(self, plan: RunPlan, workdir: Path) -> SandboxSpec:
        """Where a CLI judge runs: its own folder of blinded diffs, a home of the run's judges;
        it sees no seat (an agent: it keeps the network to reach its model)."""
        home = seats.seats_root(self.home, plan.run_id) / "judges.home"
        home.mkdir(parents=True, exist_ok=True)
        return SandboxSpec(
            mode=plan.contract.sandbox,
            network=NetworkMode.ON,
            writable=_unique([workdir]),
            hidden=self._hidden(plan),
            home=home.resolve(),
        )

    def _spec(
        self, plan: RunPlan, seat: int, writable: Sequence[Path], network: NetworkMode
    ) -> SandboxSpec:
        repo = self.seats[seat]
        return SandboxSpec(
            mode=plan.contract.sandbox,
            network=network,
            writable=_unique([repo.path, *writable]),
            readable=_unique([*self.stores(plan), *self._declared_paths(plan, seat)]),
            hidden=self._hidden(plan),
            home=repo.home.resolve(),
        )

    def _declared_paths(self, plan: RunPlan, seat: int) -> list[Path]:
        """Files and folders the contract's ``env:`` or the seat's coder ``args`` name by
        absolute path (a model registry, a CA bundle): the operator chose to hand them to the
        coder, so they are visible read-only even under a hidden folder; never the user's
        repository or assay's own folder."""
        found = []
        args = [str(a) for a in plan.contract.coder_for_seat(seat).args]
        for declared in [*plan.contract.env.values(), *args]:
            value = declared
            if declared.startswith("$") and len(declared) > 1:
                value = self.operator_env.get(declared[1:], "")
            path = Path(value)
            if not path.is_absolute() or not path.exists():
                continue
            path = path.resolve()
            inside = [plan.repo_root.resolve(), self.home.resolve()]
            if any(path == root or root in path.parents for root in inside):
                continue
            if any(path in (h, *h.parents) for h in self._hidden(plan)):
                continue  # naming a folder that holds a hidden one must not show it
            found.append(path)
        return found

    def _hidden(self, plan: RunPlan) -> tuple[Path, ...]:
        """The operator's home, the user's repository and assay's own folder (its ledger)."""
        hidden = [plan.repo_root, self.home]
        operator_home = self.operator_env.get("HOME", "").strip()
        if operator_home and Path(operator_home).is_absolute():
            hidden.insert(0, Path(operator_home))
        return _unique(hidden)

    # -- what reaches the user's repository ---------------------------------------------------

    def record_candidate(self, plan: RunPlan, attempt: int, seat: int) -> None:
        """The attempt's candidate, as the one commit on the base that may enter the user's
        repository if its validation clears it."""
        title = one_line_title(plan.contract.task, 72)
        message = f"{title}\n\nassay run {plan.run_id}, seat {seat}, attempt {attempt}"
        self.candidates[(attempt, seat)] = seats.candidate_commit(
            self.seats[seat], plan.base_commit, message
        )

    def record_checks(self, attempt: int, seat: int, results: Sequence[ValidatorResult]) -> None:
        """Whether the attempt's candidate passed the scope and secret checks (its first
        validation counts; a revalidation of a combined tree checks another tree)."""
        if (attempt, seat) in self.cleared:
            return
        given = {r.validator_id: r for r in results}
        self.cleared[(attempt, seat)] = all(
            name in given and not given[name].error and given[name].severity is not Severity.BLOCK
            for name in CLEARING_CHECKS
        ) and self.usable(seat)

    def publish(self, plan: RunPlan, attempt: int, seat: int) -> str | None:
        """Fetch the seat's candidate of ``attempt`` into the user's repository as its branch;
        the branch, or None when it may not go there (its checks failed, or the seat was
        tampered with)."""
        if seat in self.fetched:
            return self.fetched[seat]
        commit = self.candidates.get((attempt, seat))
        if commit is None or not self.cleared.get((attempt, seat)) or not self.usable(seat):
            return None
        repo = self.seats[seat]
        try:
            branch = seats.fetch_candidate(plan.repo_root, repo, commit)
        except seats.SeatTampered as exc:
            self.tampered[seat] = f"the seat's repository was tampered with: {exc}"
            return None
        self.fetched[seat] = branch
        return branch

    def publish_kept(self, plan: RunPlan) -> list[str]:
        """For a run that did not land (or keeps its seats): each seat's last candidate that
        passed the scope and secret checks, as its branch in the user's repository, so it
        outlives the seat; the branches."""
        branches = []
        for seat in sorted(self.seats):
            attempts = [a for (a, s) in self.candidates if s == seat]
            if attempts and (branch := self.publish(plan, max(attempts), seat)):
                branches.append(branch)
        return branches

    def cleanup(self, plan: RunPlan, *, keep_branches: set[int]) -> list[str]:
        """Remove the seats, their homes and the judges' home; the fetched branches but those
        of ``keep_branches``. What could not be removed, one line each: it stays for `assay gc`
        (never a fault of the run, whose outcome is settled)."""
        left = []
        removal = seats.remove_seats(self.home, plan.run_id)
        if not removal.complete:
            left.append(f"the run's seats were not all removed: {removal.summary()}")
        for seat, branch in self.fetched.items():
            if seat not in keep_branches:
                try:
                    git.delete_branch(plan.repo_root, branch)
                except git.GitError as exc:
                    left.append(f"the branch {branch} was not deleted: {_one_line(exc)}")
        return left


def _unique(paths: Sequence[Path]) -> tuple[Path, ...]:
    found: list[Path] = []
    for path in paths:
        absolute = path.resolve()
        if absolute not in found:
            found.append(absolute)
    return tuple(found)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
