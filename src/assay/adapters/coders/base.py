"""The one interface every coder adapter implements.

A coder is handed a worktree and a prompt, works, and leaves. What it wrote is read back from
disk by the engine (never taken from the coder's word); what the adapter returns is evidence:
a best-effort :class:`CoderReport`, usage, and the machine facts the policy needs (a provider
fault or quota hit, a timeout, an environment error such as a missing binary).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.quota import Quota
from assay.core.report import CoderReport
from assay.core.usage import UsageFigures
from assay.core.vocab import StopReason


class UsageMeter(Protocol):
    """Where a dispatch's spending goes as its program reports it (the engine's journal), and
    whether the host must stop it now. Thread-safe; every method is cheap enough to call on
    each line of a program's output."""

    def report(self, figures: UsageFigures) -> None:
        """The dispatch's running total so far (cumulative, as the program reports it): what
        it adds to the last report is journaled at once."""
        ...

    def stop_reason(self) -> str | None:
        """Why the dispatch must stop now (its run's or task's budget is spent), or None."""
        ...

    def remaining_cost_usd(self) -> float | None:
        """What the dispatch may still spend in money (None: no cap), for a program's own cap."""
        ...

    def remaining_tokens(self) -> int | None:
        """What the dispatch may still spend in tokens (None: no cap)."""
        ...


class CoderEnvironmentError(Exception):
    """The coder cannot run here (binary missing, bad setting); the message says how to fix it."""


@dataclass(frozen=True)
class ProviderFault:
    """The provider failed the coder (5xx, 529 overloaded, a lost connection, a timeout) after
    whatever retries the tool makes: a machine fact like quota, not a verdict on the task.

    ``detail`` names the coder and the fault, e.g. ``"claude: API Error: 529 overloaded"``.
    """

    detail: str


@dataclass(frozen=True)
class DispatchRequest:
    """Everything one seat's coder needs for one attempt.

    Two folders: ``log_dir`` is the engine's (prompts, briefs, logs: written by assay only,
    at most readable by the coder's programs); ``out_dir`` is the one folder besides the
    worktree (and the seat's home) the programs may write: the report at ``report_path`` and
    whatever the program itself saves (a chat history, a trajectory). The host reads from
    ``out_dir`` only through :mod:`assay.adapters.safe_files` and keeps copies in ``log_dir``.
    """

    worktree: Path
    prompt: str
    dispatch_id: str
    attempt: int
    seat: int
    halt_state_dir: Path
    report_path: Path
    log_dir: Path
    env: Mapping[str, str]  # already filtered by the allowlist; the adapter adds nothing secret
    settings: Mapping[str, Any]  # the contract's coder block for this seat
    timeout_seconds: float = 1800.0
    max_turns: int | None = None
    # The repository the run started from, for settings that name files in it (replay diffs).
    repo_root: Path | None = None
    # The contract's command validators (id -> command line), for coders that can run them.
    validator_commands: Mapping[str, str] = field(default_factory=dict)
    # Where every process of the seat runs (None: unconfined) and its private home.
    sandbox: SandboxSpec | None = None
    home: Path | None = None
    # The rules the agent is told (scope, halts, report, no-op protocol), rendered for its kind.
    brief: str = ""
    # The folder the coder's programs write (see above); None: the folder of ``report_path``.
    out_dir: Path | None = None
    # Where the program's usage reports go as they arrive (None: nowhere; nothing stops it).
    meter: UsageMeter | None = None

    @property
    def output_dir(self) -> Path:
        """The folder the coder's programs may write: ``out_dir``, else the report's folder."""
        return self.out_dir if self.out_dir is not None else self.report_path.parent


@dataclass
class DispatchResult:
    """What the adapter could see of one dispatch. Never a verdict."""

    exit_code: int | None
    stop_reason: StopReason | None = None
    report: CoderReport | None = None  # derived by the adapter from the tool's own output
    tokens_used: int | None = None
    cost_usd: float | None = None
    turns_used: int | None = None
    wall_time_ms: int = 0
    timed_out: bool = False
    quota: Quota | None = None
    fault: ProviderFault | None = None  # the seat was lost to a provider fault (not quota)
    environment_error: str | None = None
    # A setting the operator controls keeps the program from running here (it is not installed
    # or hidden by the sandbox, its key is not set or was refused): the task is held with this
    # message, never refunded and retried.
    setting_error: str | None = None
    error: str | None = None  # a crash or provider fault in words, for the recovery spec
    log_path: Path | None = None
    warnings: list[str] = field(default_factory=list)
    # What the coder's own processes printed (the model's turns, for the llm coder): the text the
    # secret scan reads as its output. Never the command line or prompt assay started it with:
    # those are the operator's, and the log holds them too.
    output: str = ""
    # What the seat's network proxy refused to connect to ("host:port"), for a warning.
    refused: list[str] = field(default_factory=list)
    # The program's final usage figures, tokens in and out apart (None: it reported none).
    usage: UsageFigures | None = None
    # Why the host stopped the program before it ended (a spent budget), if it did.
    stopped: str | None = None

    @property
    def provider_fault(self) -> bool:
        return self.stop_reason is StopReason.PROVIDER_FAULT or self.quota is not None


def assay_env(request: DispatchRequest) -> dict[str, str]:
    """The child environment of a dispatch: the allowlisted ``request.env`` plus assay's own
    variables, so a coder can fire a halt (``assay halt check --fire``) and leave a report.

    Every adapter that starts a process uses this, so the variables are the same whatever the
    coder kind.
    """
    env = dict(request.env)
    env.update(
        {
            "ASSAY_DISPATCH_ID": request.dispatch_id,
            "ASSAY_HALT_STATE_DIR": str(request.halt_state_dir),
            "ASSAY_REPORT_PATH": str(request.report_path),
            "ASSAY_ATTEMPT": str(request.attempt),
            "ASSAY_SEAT": str(request.seat),
        }
    )
    return env


class Coder(Protocol):
    """A coder adapter: one per kind, stateless, safe to call from several threads."""

    kind: str
    # Contract settings this adapter acts on; a setting outside this set gets a warning.
    honoured_settings: frozenset[str]

    def dispatch(self, request: DispatchRequest) -> DispatchResult: ...
