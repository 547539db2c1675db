"""Every closed vocabulary of assay.

Each set of tokens is a ``StrEnum``; ``tests/unit/core/vocab_baseline.json`` pins them, so widening
one means editing that baseline on purpose.
"""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    """A validator result's severity."""

    PASS = "pass"
    WARN = "warn"
    BLOCK = "block"


class HaltSeverity(StrEnum):
    BLOCK = "block"
    WARN = "warn"
    LOG = "log"


class AttemptOutcome(StrEnum):
    PASSED = "passed"
    WARNED = "warned"
    BLOCKED = "blocked"
    ERROR = "error"


class StopReason(StrEnum):
    """Why a coder stopped, by its own account (seed 001)."""

    COMPLETED = "completed"
    TURN_BUDGET = "turn_budget"
    CONTEXT_BUDGET = "context_budget"
    PROVIDER_FAULT = "provider_fault"
    ABANDONED = "abandoned"


STOPPED_SAID: dict[StopReason, str] = {
    StopReason.COMPLETED: "finished",
    StopReason.TURN_BUDGET: "stopped at its turn budget (max_turns)",
    StopReason.CONTEXT_BUDGET: "stopped at its context budget (the model's context was full)",
    StopReason.PROVIDER_FAULT: "stopped by a provider fault",
    StopReason.ABANDONED: "gave up",
}
"""How a stop reason is said to a user (``the coder stopped at its turn budget``)."""


class FileChangeKind(StrEnum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"


class EntryType(StrEnum):
    """What a path is in a git tree, read from its mode: a regular file (100644), an executable
    one (100755), a symlink (120000), a submodule (160000) or a directory (a tree)."""

    FILE = "file"
    EXECUTABLE = "executable"
    SYMLINK = "symlink"
    SUBMODULE = "submodule"
    DIRECTORY = "directory"


class RunStatus(StrEnum):
    PREP = "prep"
    IMPLEMENTING = "implementing"
    VALIDATING = "validating"
    JUDGING = "judging"
    LANDING = "landing"
    MERGED = "merged"
    READY = "ready"
    STALLED = "stalled"
    BLOCKED = "blocked"
    FAILED = "failed"
    VERIFIED_NOOP = "verified_noop"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_RUN_STATUSES


TERMINAL_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {
        RunStatus.MERGED,
        RunStatus.READY,
        RunStatus.STALLED,
        RunStatus.BLOCKED,
        RunStatus.FAILED,
        RunStatus.VERIFIED_NOOP,
    }
)


class TaskStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    HELD = "held"


class HoldSource(StrEnum):
    MANUAL = "manual"
    MACHINE = "machine"


class HaltLifecycle(StrEnum):
    DECLARED = "DECLARED"
    ARMED = "ARMED"
    CHECKED = "CHECKED"
    FIRED = "FIRED"
    ATTESTED = "ATTESTED"


class StageVerdict(StrEnum):
    ADVANCE = "advance"
    LOOP_BACK = "loop_back"
    ESCALATE = "escalate"
    UNVISITED = "unvisited"


class PolicyAction(StrEnum):
    PROCEED = "proceed"
    RECOVER = "recover"
    HALT = "halt"


class AttemptNext(StrEnum):
    """What the run does after an attempt was decided: the policy's action as the budgets, the
    fired halts and the stuck check leave it (a ``recover`` with no recovery left ends the run)."""

    LAND = "land"
    RECOVER = "recover"
    END = "end"


class HaltType(StrEnum):
    """The payload's account of why a run stopped."""

    NONE = "none"
    BLOCKER = "blocker"
    ESCALATE = "escalate"
    VALIDATOR_ERROR = "validator_error"
    ENVIRONMENT_ERROR = "environment_error"
    INTERNAL_ERROR = "internal_error"


class CanonicalHalt(StrEnum):
    """The seven halt classes every contract arms."""

    ANCHOR_RESOLUTION_FAILURE = "halt-anchor-resolution-failure"
    SCOPE_BREACH = "halt-scope-breach"
    SECRET_EXPOSURE = "halt-secret-exposure"
    SPEC_CONTRADICTION = "halt-spec-contradiction"
    IRREVERSIBLE_ACTION = "halt-irreversible-action"
    BUDGET_EXHAUSTED = "halt-budget-exhausted"
    VERIFICATION_GAP = "halt-verification-gap"


class ArmHalt(StrEnum):
    """Tool-local failures of ``assay halt arm`` (seed 002); never canonical halts."""

    CONTRACT_YAML_MALFORMED = "halt-contract-yaml-malformed"
    HALT_CLASSES_MISSING = "halt-halt-classes-missing"
    CANONICAL_HALT_INCOMPLETE = "halt-canonical-halt-incomplete"
    STATE_CONSTRUCTION_FAILURE = "halt-state-construction-failure"
    STATE_FILE_WRITE_FAILURE = "halt-state-file-write-failure"
    STATE_ALREADY_ARMED = "halt-state-already-armed"


class CheckHalt(StrEnum):
    """Tool-local failures of ``assay halt check|attest|rearm`` (seed 002)."""

    STATE_FILE_MISSING = "halt-check-state-file-missing"
    STATE_FILE_MALFORMED = "halt-check-state-file-malformed"
    CONDITION_NOT_FOUND = "halt-check-condition-not-found"
    STATE_CONSTRUCTION_FAILURE = "halt-check-state-construction-failure"
    STICKY_REJECTION = "halt-check-sticky-rejection"
    TRANSITION_REJECTED = "halt-check-transition-rejected"
    STATE_FILE_WRITE_FAILURE = "halt-check-state-file-write-failure"
    FIRE_EVIDENCE_MISSING = "halt-check-fire-evidence-missing"
    REARM_EVIDENCE_MISSING = "halt-rearm-evidence-missing"
    # Inside a coder's sandbox: the engine's relay acts for the socket's dispatch only, and
    # a relay that does not answer leaves the halt as it was.
    DISPATCH_REFUSED = "halt-check-dispatch-refused"
    RELAY_FAILURE = "halt-check-relay-failure"


class PolicyMode(StrEnum):
    UNANIMOUS = "unanimous"
    MAJORITY = "majority"
    QUORUM = "quorum"
    ANY = "any"


class LandMode(StrEnum):
    MERGE = "merge"
    BRANCH = "branch"
    PR = "pr"
    NONE = "none"


class LeftoverKind(StrEnum):
    """What a closed run can leave behind that ``assay gc`` removes."""

    SEATS = "seats"  # .assay/seats/<run>: seat repositories and homes
    WORKTREES = "worktrees"  # .assay/worktrees/<run>: seat worktrees of older versions
    BRANCH = "branch"  # assay/<run>/<seat> in the user's repository
    RELAY = "relay"  # /tmp/assay-halt-<run>-*: a halt relay's socket folder


class TaskFileKind(StrEnum):
    """What a deleted task's runs kept on disk, removed with it (beside a ``LeftoverKind``)."""

    RUN_FOLDER = "run_folder"  # .assay/runs/<run>: payload, logs, the run's own files
    HALT_STATE = "halt_state"  # .assay/halt-state/<dispatch>.json (and its lock file)
    CONTRACT = "contract"  # .assay/tasks/<id>.contract.json: an older assay's contract file


class Stage(StrEnum):
    """Convergence-ledger stages: every attempt counter lives under one of these."""

    TASK = "task"
    RECOVER = "recover"
    DISPATCH = "dispatch"
    JUDGE = "judge"
    LAND = "land"


class OnFail(StrEnum):
    """What a failing validator does: block the wave, or only warn (advisory)."""

    BLOCK = "block"
    WARN = "warn"


class CoderKind(StrEnum):
    COMMAND = "command"
    REPLAY = "replay"
    CLAUDE = "claude"
    CODEX = "codex"
    AIDER = "aider"
    MINI = "mini"
    LLM = "llm"


class SandboxMode(StrEnum):
    """How the processes of a seat are confined: bubblewrap, or not at all (an explicit choice)."""

    BWRAP = "bwrap"
    NONE = "none"


class NetworkMode(StrEnum):
    """The network of a seat's sandbox. ``on``: a network namespace of its own whose only way
    out is assay's allowlisting proxy; ``none``: no way out at all; ``host``: the machine's own
    network, loopback included (an explicit opt-out, recorded and warned about)."""

    ON = "on"
    NONE = "none"
    HOST = "host"


class SecretsMode(StrEnum):
    """What the secret check does with a generic finding (a keyword, high entropy, credentials
    in a URL): warn (``standard``), or block like a provider's credential (``strict``)."""

    STANDARD = "standard"
    STRICT = "strict"


class ValidatorKind(StrEnum):
    COMMAND = "command"
    SCOPE = "scope"
    SECRETS = "secrets"
    JUDGE = "judge"


class JudgeKind(StrEnum):
    """Who ranks blind candidates: an OpenAI-compatible model, or a coder CLI run read-only."""

    LLM = "llm"
    CLAUDE = "claude"
    CODEX = "codex"


class TieBreak(StrEnum):
    """Which rule settled a tie on first choices in a blind tally."""

    BORDA = "borda"
    SEED = "seed"


class SettleRow(StrEnum):
    """Which row of the settle table decided a finished run's effect on its task.

    In match order: the first row whose condition holds wins.
    """

    PARKED = "parked"
    SUCCEEDED = "succeeded"
    UNRUNNABLE = "unrunnable"  # a program or key the operator sets is missing here: held
    STALLED_QUOTA = "stalled_quota"
    FAILED_QUOTA_NO_VIABLE = "failed_quota_no_viable"
    FAILED_MACHINE_FAULT = "failed_machine_fault"
    STALLED_OR_FAILED = "stalled_or_failed"
    HALTED = "halted"
    LAND_REFUSED = "land_refused"
    BLOCKED_WITH_PR = "blocked_with_pr"
    BLOCKED = "blocked"
    VERIFIED_NOOP = "verified_noop"
    NON_TERMINAL = "non_terminal"


class CrashPoint(StrEnum):
    """Every effect boundary of a run, in the order a run reaches them.

    ``ASSAY_CRASH_AT=<point>[:<n>]`` ends the process at the n-th time it reaches one (a test
    hook: recovery must leave exact counts and at most one landing from any of them).
    """

    TASK_STARTED = "task_started"  # the ledger's start_run committed
    ARMED = "armed"
    DISPATCH_STARTED = "dispatch_started"  # the seat's worktree exists, the coder not yet run
    DISPATCH_ENDED = "dispatch_ended"
    VALIDATED = "validated"
    JUDGED = "judged"
    LANDING_INTENT = "landing_intent"  # just before the landing effect
    CHECKOUT_PENDING = "checkout_pending"  # the base branch moved, its checkout not yet
    REF_MOVED = "ref_moved"  # the base branch moved, nothing recorded yet
    PAYLOAD_WRITTEN = "payload_written"
    LEDGER_CLOSED = "ledger_closed"


class OperatorMove(StrEnum):
    """What an operator does to a task outside a run (the CLI's and the dashboard's actions)."""

    HOLD = "hold"
    RELEASE = "release"
    CANCEL = "cancel"
    RETRY = "retry"  # a failed task runs now: its wait cleared, attempts kept


class ActorVia(StrEnum):
    """Where an operator's move came from, recorded with it."""

    CLI = "cli"
    WEB = "web"


class EventKind(StrEnum):
    """Every kind of event in the ledger's event log, one dotted spelling each.

    The store refuses any other kind, so a reader (recovery, the refund streak, the dashboard,
    a live tail) can rely on matching these tokens; migration 0003 rewrote the older spellings.
    """

    TASK_ADDED = "task.added"
    TASK_SAVED = "task.saved"  # an operator's move outside a run (hold, release, a diagnostic)
    TASK_STOP_REQUESTED = "task.stop_requested"  # an operator asked its running run to stop
    RUN_OPENED = "run.opened"  # the ledger claimed the task for a run (``start_run``)
    RUN_STARTED = "run.started"  # the graph began: base commit and branch
    ATTEMPT_STARTED = "attempt.started"
    DISPATCH_STARTED = "dispatch.started"  # before its coder runs: counts an interrupted run
    SEAT_FINISHED = "seat.finished"
    VALIDATOR_FINISHED = "validator.finished"
    JUDGES_RANKED = "judges.ranked"
    ATTEMPT_DECIDED = "attempt.decided"
    HALT_FIRED = "halt.fired"
    HALT_REARMED = "halt.rearmed"  # an operator re-armed a fired halt, with evidence
    WARNING = "run.warning"
    LAND_PUSHED = "land.pushed"
    LAND_PR_OPENED = "land.pr_opened"
    RUN_CLOSED = "run.closed"  # what settle did; the last event of a closed run
    RUN_INTERRUPTED = "run.interrupted"  # closed by recovery: its process died
    RUN_RECOVERED_LANDED = "run.recovered_landed"  # closed by recovery: it had landed
    RUN_GC = "run.gc"  # what a closed run left behind was removed
    USAGE_REPORTED = "usage.reported"  # a program reported spending (tokens, cost) as it ran


class BudgetAction(StrEnum):
    """What exhausting a money or token budget does (``budgets.on_exhausted``)."""

    HOLD = "hold"  # stop the seats, end the run blocked, hold the task for a human
    WARN = "warn"  # a soft cap: the halt fires as a warning and the run goes on


class UsageRole(StrEnum):
    """Who spent a journaled usage report."""

    CODER = "coder"
    JUDGE = "judge"  # a blind judge ranking candidates
    VALIDATOR = "validator"  # a judge validator checking a candidate


class UsageGrouping(StrEnum):
    """What ``assay usage --by`` sums spending per."""

    TASK = "task"
    CODER = "coder"  # the coder's kind; judges and validators each a group of their own
    MODEL = "model"
    DAY = "day"  # the UTC date of a dispatch's first report


class LogRole(StrEnum):
    """Whose log the ledger keeps (``run_logs.role``): told from where it lies in the run
    folder."""

    CODER = "coder"  # a seat's coder (its program's output, transcripts)
    VALIDATOR = "validator"  # a check of a seat's candidate
    JUDGE = "judge"  # a blind judge ranking an attempt's candidates
    OTHER = "other"  # the run's own (an internal error's trace)
