"""The seats of one run: their repositories, their sandboxes, and the candidates they leave.

The host never trusts a seat. Each dispatch gets a fresh seat repository
(:mod:`assay.adapters.seats`) on the commit its attempt starts from, and after every process of
the seat has ended, a collector inside the seat's sandbox captures its work tree as a tree
(:mod:`assay.adapters.capture`); the host imports that tree's objects into the seat's candidate
store, an engine-owned bare repository (:mod:`assay.adapters.candidates`), and from then on
works only there: the diff, the validators' fresh checkouts, the branch a candidate leaves in
the user's repository. No host git runs in a seat, no link in it is followed, no folder of it
is bound into another sandbox; the coder writes only its seat and a fresh output folder (its
report), which the host reads without following links. A candidate enters the user's
repository (as the branch ``assay/<run>/seat-N``, fetched from the candidate store) only when
it passed the scope and secret checks: at landing time, or, for a run that did not land, at
its end (for a look).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from assay.adapters import git, seats
from assay.adapters.candidates import CandidateStore
from assay.adapters.capture import Capture, CaptureLimits, capture_seat
from assay.adapters.envpolicy import agent_environment
from assay.adapters.repo_tools import repo_tool_roots
from assay.adapters.sandbox_paths import declared_paths, hidden_paths
from assay.adapters.sandbox_paths import unique as _unique
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.egress import AllowRule, parse_rule
from assay.core.egress_providers import provider_rules
from assay.core.forbidden import ASSAY_HOME
from assay.core.results import ValidatorResult
from assay.core.text import one_line_title
from assay.core.vocab import CoderKind, JudgeKind, NetworkMode, SandboxMode, Severity
from assay.engine.effects import RunPlan

# Coders whose network the contract's ``network: none`` takes away; agents call their model.
_OFFLINE_CAPABLE = (CoderKind.COMMAND, CoderKind.REPLAY)
# The checks a candidate must pass before any of it enters the user's repository.
CLEARING_CHECKS = ("scope", "secrets")
CAPTURE_TIMEOUT = 600.0
# A pack holds at most this many objects per file the contract lets a candidate add (trees,
# the commit and the base's unchanged objects it rewrites come on top).
_OBJECTS_PER_FILE = 4


class Seating:
    """The seat repositories and candidate stores of one run, by seat number."""

    def __init__(self, home: Path, operator_env: Mapping[str, str]) -> None:
        self.home = home
        self.operator_env = operator_env
        self.seats: dict[int, seats.Seat] = {}
        self.candidates: dict[tuple[int, int], str] = {}  # (attempt, seat) -> its commit
        self.trees: dict[str, str] = {}  # a candidate's commit -> its tree
        self.cleared: dict[tuple[int, int], bool] = {}  # passed the scope and secret checks
        self.fetched: dict[int, str] = {}  # seat -> its branch in the user's repository
        self._stores: tuple[Path, ...] | None = None
        self._candidate_stores: dict[int, CandidateStore] = {}
        self._fresh = itertools.count(1)

    # -- the repositories ---------------------------------------------------------------------

    def prepare(self, plan: RunPlan, seat: int, attempt: int = 1) -> seats.Seat:
        """A fresh repository for the seat's dispatch of ``attempt``, on the seat's latest
        earlier candidate (else the base), so a retried dispatch never starts on what a lost
        one left behind."""
        path = seats.seat_path(self.home, plan.run_id, f"seat-{seat}")
        made = seats.create_seat(
            plan.repo_root,
            path,
            self.start_of(plan, seat, attempt),
            git.seat_branch(plan.run_id, f"seat-{seat}"),
            store=self.stores(plan)[0],
            borrows=(self.store(plan, seat).objects,),
        )
        seats.keep_index(made, self._kept_index(plan, seat))  # before any coder runs
        self.seats[seat] = made
        return made

    def _kept_index(self, plan: RunPlan, seat: int) -> Path:
        """Where the seat's index is kept while sandboxes write the seat (none writes here)."""
        return seats.seats_root(self.home, plan.run_id) / f"seat-{seat}.index"

    def start_of(self, plan: RunPlan, seat: int, attempt: int) -> str:
        earlier = [a for (a, s) in self.candidates if s == seat and a < attempt]
        return self.candidates[(max(earlier), seat)] if earlier else plan.base_commit

    def stores(self, plan: RunPlan) -> tuple[Path, ...]:
        if self._stores is None:
            self._stores = seats.object_stores(plan.repo_root)
        return self._stores

    def store(self, plan: RunPlan, seat: int) -> CandidateStore:
        """The seat's candidate store (one per seat: competing seats never read each other's
        candidates), engine-owned, borrowing the user's objects."""
        if seat not in self._candidate_stores:
            path = seats.seats_root(self.home, plan.run_id) / f"seat-{seat}.candidates.git"
            self._candidate_stores[seat] = CandidateStore(
                path, self.stores(plan), object_format=seats.object_format(plan.repo_root)
            )  # the format asked once (the seats ask it too), not of each store
        return self._candidate_stores[seat]

    def assay_homes(self, plan: RunPlan) -> list[str]:
        """Where assay's folder lies in the repository's tree: ``.assay``, and the folder
        ``ASSAY_HOME`` names when it is inside the repository (its ledger is there too). No
        candidate may carry a path there."""
        homes = [ASSAY_HOME]
        root, home = plan.repo_root.resolve(), self.home.resolve()
        if home != root and root in home.parents:
            homes.append(home.relative_to(root).as_posix())
        return homes

    def fresh_folder(self, plan: RunPlan, kind: str) -> Path:
        """A new folder of the run's that no process has touched (its parent made)."""
        root = seats.seats_root(self.home, plan.run_id)
        root.mkdir(parents=True, exist_ok=True)
        return root / f"{kind}-{os.getpid()}-{next(self._fresh)}"

    # -- capture ------------------------------------------------------------------------------

    def capture(self, plan: RunPlan, seat: int) -> Capture:
        """The seat's work tree as a tree, captured by the collector inside its sandbox once
        every process of the seat has ended; its objects wait in an engine-owned folder."""
        repo = self.seats[seat]
        out_dir = self.fresh_folder(plan, f"seat-{seat}.capture")
        home = out_dir.with_name(out_dir.name + ".home")
        home.mkdir()
        stores = (*self.stores(plan), self.store(plan, seat).objects)
        budgets = plan.contract.budgets
        sandbox = SandboxSpec(
            mode=plan.contract.sandbox,
            network=NetworkMode.NONE,
            writable=(out_dir.resolve(),),
            readable=_unique([repo.path, *stores]),
            hidden=self._hidden(plan),
            home=home.resolve(),
        )
        capture = capture_seat(
            worktree=repo.path,
            base_commit=plan.base_commit,
            stores=stores,
            out_dir=out_dir,
            limits=CaptureLimits(
                max_files=budgets.max_files,
                max_bytes=budgets.max_bytes,
                max_file_bytes=budgets.max_file_bytes,
                max_depth=budgets.max_depth,
            ),
            sandbox=sandbox if plan.contract.sandbox is SandboxMode.BWRAP else None,
            env={"PATH": self.operator_env.get("PATH", os.defpath), "LC_ALL": "C"},
            timeout=CAPTURE_TIMEOUT,
        )
        seats.remove_tree(home)
        return capture

    def forget_capture(self, capture: Capture) -> None:
        """Remove what a capture left once its objects are in (or refused): its folder and the
        collector's logs beside it."""
        if capture.pack is None:
            return
        out_dir = capture.pack.parent
        for leftover in (out_dir, *out_dir.parent.glob(f"{out_dir.name}.log*")):
            seats.remove_tree(leftover)

    def import_capture(self, plan: RunPlan, attempt: int, seat: int, capture: Capture) -> str:
        """Bring the captured objects into the seat's candidate store (checked: counts, sizes,
        fsck) and record the candidate: one commit of its tree on the run's base; the commit.
        :class:`~assay.adapters.candidates.CaptureRejected` when the objects do not hold."""
        budgets = plan.contract.budgets
        store = self.store(plan, seat)
        tree = store.import_pack(
            capture,
            max_objects=budgets.max_files * _OBJECTS_PER_FILE + 10_000,
            max_bytes=budgets.max_bytes + budgets.max_file_bytes,
        )
        title = one_line_title(plan.contract.task, 72)
        message = f"{title}\n\nassay run {plan.run_id}, seat {seat}, attempt {attempt}"
        commit = store.commit(tree, plan.base_commit, message)
        self.candidates[(attempt, seat)] = commit
        self.trees[commit] = tree
        return commit

    def tree_of(self, plan: RunPlan, seat: int, commit: str) -> str:
        """The tree of ``commit``: a candidate's, known since its capture; else (a combined
        commit of a landing) read from the seat's candidate store."""
        if commit not in self.trees:
            self.trees[commit] = self.store(plan, seat).tree_of(commit)
        return self.trees[commit]

    def checkout(
        self, plan: RunPlan, seat: int, commit: str, *, in_place: bool = True
    ) -> seats.Seat:
        """A repository holding exactly ``commit``'s tree, with a fresh home: where one command
        validator runs (never the coder's home). ``in_place``: the seat's own repository, its
        processes ended, reset to the tree (:func:`seats.reset_seat`: what changed is written,
        not every file); else, or when that fails, a fresh one."""
        made = self.seats.get(seat)
        kept = self._kept_index(plan, seat)
        if in_place and made is not None and kept.is_file():
            home = self.fresh_folder(plan, f"seat-{seat}.check.home")
            home.mkdir()
            reset = seats.reset_seat(
                plan.repo_root,
                made,
                commit,
                kept,
                store=self.stores(plan)[0],
                borrows=(self.store(plan, seat).objects,),
            )
            if reset:
                return seats.Seat(path=made.path, home=home, branch=made.branch)
            seats.remove_tree(home)
            self.seats.pop(seat, None)  # not what it was: no later check starts from it
        path = self.fresh_folder(plan, f"seat-{seat}.check")
        return seats.create_seat(
            plan.repo_root,
            path,
            commit,
            git.seat_branch(plan.run_id, f"seat-{seat}"),
            store=self.stores(plan)[0],
            borrows=(self.store(plan, seat).objects,),
        )

    def done_with(self, checkout: seats.Seat) -> None:
        """A validator ended: its home goes, and its checkout unless it is a seat's own
        (reset again for the next check)."""
        own = any(made.path == checkout.path for made in self.seats.values())
        for place in (checkout.home,) if own else (checkout.path, checkout.home):
            seats.remove_tree(place)

    # -- sandboxes ----------------------------------------------------------------------------

    def coder_sandbox(
        self,
        plan: RunPlan,
        seat: int,
        log_dir: Path,
        out_dir: Path,
        relay: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SandboxSpec:
        """Where the seat's coder runs. Writable: its repository and its output folder (its
        report, what the program saves). Read-only: its log folder, the engine's (the prompt and
        brief files in it), and ``relay``, the folder of its dispatch's halt relay socket (the
        socket takes a connection but cannot be removed or replaced). The halt state folder
        stays hidden: the engine's state files are written by the engine only. Its network:
        see :meth:`coder_network` (``env``: the coder's environment, where endpoints are named)."""
        network, allow = self.coder_network(plan, seat, env)
        repo = self.seats[seat]
        return SandboxSpec(
            mode=plan.contract.sandbox,
            network=network,
            allow=allow,
            writable=_unique([repo.path, out_dir]),
            readable=_unique(
                [
                    *self.stores(plan),
                    self.store(plan, seat).objects,
                    log_dir,
                    *([relay] if relay is not None else []),
                    *self._declared(plan, seat),
                ]
            ),
            hidden=self._hidden(plan),
            home=repo.home.resolve(),
        )

    def coder_network(
        self, plan: RunPlan, seat: int, env: Mapping[str, str] | None = None
    ) -> tuple[NetworkMode, tuple[AllowRule, ...]]:
        """The seat coder's network and what its proxy lets through: its model's hosts (an
        agent's, from its settings and ``env``) and, unless ``network: none``, the contract's
        ``network.allow``. ``none`` takes everything from a command coder; ``host`` is the
        machine's network."""
        policy = plan.contract.network
        if policy.mode is NetworkMode.HOST:
            return NetworkMode.HOST, ()
        spec = plan.contract.coder_for_seat(seat)
        settings = spec.model_dump(mode="json")
        if env is None:
            env = agent_environment(
                self.operator_env, spec.kind.value, settings, declared=plan.contract.env
            )
        allow = provider_rules(spec.kind.value, settings, env)
        if policy.mode is NetworkMode.ON:
            allow += [parse_rule(text) for text in policy.allow]
        elif spec.kind in _OFFLINE_CAPABLE:
            return NetworkMode.NONE, ()
        return NetworkMode.ON, tuple(dict.fromkeys(allow))

    def validator_sandbox(self, plan: RunPlan, seat: int, checkout: seats.Seat) -> SandboxSpec:
        """Where a command validator runs code the coder wrote: its own fresh checkout and
        home; nothing else of the run's is writable. The repository's own tool folders (its
        ``.venv``, ``node_modules``: first on the validator's PATH) are shown read-only. No
        network, unless the contract's ``network.validators`` grants the seat coder's
        (``on``) or the machine's (``host``)."""
        granted = plan.contract.network.validators
        network: NetworkMode = NetworkMode.NONE
        allow: tuple[AllowRule, ...] = ()
        if granted is NetworkMode.HOST:
            network = NetworkMode.HOST
        elif granted is NetworkMode.ON:
            network, allow = self.coder_network(plan, seat)
            network = NetworkMode.ON if network is NetworkMode.NONE else network
        return SandboxSpec(
            mode=plan.contract.sandbox,
            network=network,
            allow=allow,
            writable=_unique([checkout.path]),
            readable=_unique(
                [
                    *self.stores(plan),
                    self.store(plan, seat).objects,
                    *repo_tool_roots(plan.repo_root),
                ]
            ),
            hidden=self._hidden(plan),
            home=checkout.home.resolve(),
        )

    def judge_sandbox(self, plan: RunPlan) -> SandboxSpec:
        """Where a CLI judge runs: it sees no seat and writes nothing of the run's (its diffs are
        bound read-only, its home is a fresh folder under ``home`` per judge and round: see
        :mod:`assay.engine.local.panel`); an agent, it reaches its model's hosts through its proxy
        (the machine's network under ``network: host``), nothing else."""
        home = seats.seats_root(self.home, plan.run_id) / "judges.home"
        home.mkdir(parents=True, exist_ok=True)
        contract = plan.contract
        allow: list[AllowRule] = []
        for index in range(contract.judges):
            judge = contract.judge_for(index)
            if judge is None or judge.kind is JudgeKind.LLM:
                continue
            settings = judge.model_dump(mode="json")
            env = agent_environment(
                self.operator_env, judge.kind.value, settings, declared=contract.env
            )
            allow += provider_rules(judge.kind.value, settings, env)
        host = contract.network.mode is NetworkMode.HOST
        return SandboxSpec(
            mode=contract.sandbox,
            network=NetworkMode.HOST if host else NetworkMode.ON,
            allow=() if host else tuple(dict.fromkeys(allow)),
            hidden=self._hidden(plan),
            home=home.resolve(),
        )

    def _declared(self, plan: RunPlan, seat: int) -> list[Path]:
        """What the contract's ``env:`` or the seat's coder ``args`` name by absolute path:
        shown read-only to the coder (see :func:`declared_paths`)."""
        return declared_paths(
            plan.contract,
            seat,
            repo_root=plan.repo_root,
            home=self.home,
            operator_env=self.operator_env,
        )

    def _hidden(self, plan: RunPlan) -> tuple[Path, ...]:
        """What no process of the run sees (see :func:`hidden_paths`)."""
        return hidden_paths(plan.repo_root, self.home, self.operator_env)

    # -- what reaches the user's repository ---------------------------------------------------

    def record_checks(self, attempt: int, seat: int, results: Sequence[ValidatorResult]) -> None:
        """Whether the attempt's candidate passed the scope and secret checks (its first
        validation counts; a revalidation of a combined tree checks another tree)."""
        if (attempt, seat) in self.cleared:
            return
        given = {r.validator_id: r for r in results}
        self.cleared[(attempt, seat)] = all(
            name in given and not given[name].error and given[name].severity is not Severity.BLOCK
            for name in CLEARING_CHECKS
        )

    def publish(self, plan: RunPlan, attempt: int, seat: int) -> str | None:
        """Fetch the seat's candidate of ``attempt`` from its candidate store into the user's
        repository as its branch; the branch, or None when it may not go there (no candidate,
        or its scope and secret checks did not pass)."""
        if seat in self.fetched:
            return self.fetched[seat]
        commit = self.candidates.get((attempt, seat))
        if commit is None or not self.cleared.get((attempt, seat)):
            return None
        branch = self.store(plan, seat).publish(
            plan.repo_root, commit, git.seat_branch(plan.run_id, f"seat-{seat}")
        )
        self.fetched[seat] = branch
        return branch

    def publish_kept(self, plan: RunPlan) -> list[str]:
        """For a run that did not land (or keeps its seats): each seat's last candidate that
        passed the scope and secret checks, as its branch in the user's repository, so it
        outlives the seat; the branches."""
        branches = []
        for seat in sorted({s for (_a, s) in self.candidates}):
            attempts = [a for (a, s) in self.candidates if s == seat]
            if attempts and (branch := self.publish(plan, max(attempts), seat)):
                branches.append(branch)
        return branches

    def cleanup(self, plan: RunPlan, *, keep_branches: set[int]) -> list[str]:
        """Remove the seats, their homes, checkouts and candidate stores, and the judges' home;
        the fetched branches but those of ``keep_branches``. What could not be removed, one line
        each: it stays for `assay gc` (never a fault of the run, whose outcome is settled)."""
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


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
