"""What the CLI coder adapters (claude, codex, aider, mini) share.

Each of those tools is a program we run in the seat's worktree and whose output we read. The
parsing of each tool's own format lives in its module; this one holds the parts that are the
same for all four: reading a provider fault and its reset time out of an error message,
running the program with the dispatch environment, and turning what was parsed into a
:class:`DispatchResult`. Parsers are pure (text in, :class:`ParsedRun` out, the clock passed
in), so they can be tested on captured output and fuzzed. The usage a tool reports is read by
the readers of :mod:`assay.adapters.coders.usage_read`, in the final parse and, when the
dispatch has a meter, while the tool runs (:mod:`assay.adapters.coders.usage_watch`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo

from assay.adapters.coders.base import (
    DispatchRequest,
    DispatchResult,
    ProviderFault,
)
from assay.adapters.coders.usage_watch import UsageSources, UsageWatch
from assay.adapters.preflight import program_problem
from assay.adapters.process import ProcessResult, run_process
from assay.adapters.process_watch import OutputWatch
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.preflight import login_asked
from assay.core.quota import Quota
from assay.core.report import CoderReport
from assay.core.usage import UsageFigures
from assay.core.vocab import StopReason

FaultKind = Literal["context", "usage_limit", "rate_limit", "auth", "server"]

DETAIL_CHARS = 600
SUMMARY_CHARS = 2000
_TAIL_CHARS = 1200


@dataclass
class ParsedRun:
    """Everything a parser could read from one run of a tool; every field optional."""

    stop_reason: StopReason | None = None
    turns_used: int | None = None
    tokens_used: int | None = None
    cost_usd: float | None = None
    usage: UsageFigures | None = None  # what the tool reported, in and out apart
    summary: str | None = None
    error: str | None = None
    quota: Quota | None = None
    environment_error: str | None = None
    setting_error: str | None = None  # the credentials were refused or missing: held
    warnings: list[str] = field(default_factory=list)

    def read_usage(self, figures: UsageFigures | None) -> None:
        """Take the tool's usage figures, and the totals read from them."""
        self.usage = figures
        self.tokens_used = figures.tokens if figures is not None else None
        self.cost_usd = figures.cost_usd if figures is not None else None


# Signatures of provider faults, matched on lower-cased error text, in this order of precedence:
# an over-long context is not retryable, a usage limit waits for a reset, a rate limit for a
# moment, a rejected credential for the operator, and a server fault only for the provider.
_CONTEXT = (
    "prompt is too long",
    "context window",
    "context_length_exceeded",
    "contextwindowexceeded",
    "maximum context length",
    "context length",
    "has hit a token limit",
    "input is too long",
)
_USAGE = (
    "usage limit",
    "hit your limit",
    "hour limit reached",
    "weekly limit reached",
    "insufficient_quota",
    "exceeded your current quota",
    "quota exceeded",  # codex 0.171 on insufficient_quota
    "credit balance is too low",
    "billing_error",
)
_RATE = ("rate limit", "rate_limit", "ratelimit", "too many requests", "throttl")
_LOGIN = ("please run /login", "not logged in")
_AUTH = (
    "authentication",
    "invalid api key",
    "invalid x-api-key",
    "incorrect api key",
    "unauthorized",
    *_LOGIN,
)
_SERVER = (
    "overloaded",
    "internal server error",
    "internalservererror",  # litellm's exception names, lower-cased
    "service unavailable",
    "serviceunavailable",
    "bad gateway",
    "gateway timeout",
    "api_error",
    "apierror",
    "apiconnectionerror",
    "server_error",
    "server error",
    "stream disconnected",
    "experiencing high demand",  # codex 0.171 on a 500
    "stream error",
    "connection error",
)
# An HTTP status only counts next to a word that makes it one ("status: 429", "API Error: 529",
# "500 Internal Server Error"), so a traceback's "line 512" is not a server fault.
_STATUS = re.compile(
    r"\b(?:status|error|code|http)\b[\s:=#-]{0,3}(?P<a>\d{3})\b"
    r"|\b(?P<b>\d{3})\s+(?:too many requests|unauthorized|internal server error|bad gateway"
    r"|service unavailable|gateway timeout|overloaded)",
)


def classify_fault(text: str) -> FaultKind | None:
    """Which provider fault an error message describes, if any (pure, never raises)."""
    low = text.lower()
    statuses = {int(m.group("a") or m.group("b")) for m in _STATUS.finditer(low)}
    if any(sig in low for sig in _CONTEXT):
        return "context"
    if any(sig in low for sig in _USAGE):
        return "usage_limit"
    if any(sig in low for sig in _RATE) or 429 in statuses:
        return "rate_limit"
    if any(sig in low for sig in _AUTH) or 401 in statuses:
        return "auth"
    if any(sig in low for sig in _SERVER) or any(500 <= s < 600 for s in statuses):
        return "server"
    return None


_EPOCH = re.compile(r"limit reached\|(\d{9,11})\b", re.IGNORECASE)
_ISO = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:T|\s+at\s+|\s+)(\d{1,2}:\d{2}(?::\d{2})?)(?:\.\d+)?"
    r"\s*(Z|UTC|[+-]\d{2}:?\d{2})?",
    re.IGNORECASE,
)
_RELATIVE = re.compile(
    r"(?:try again|retry|resets?|available again)\s+in\s+"
    r"((?:\d+(?:\.\d+)?\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s|ms)\b"
    r"[\s,]*(?:and\s+)?)+)",
    re.IGNORECASE,
)
_RELATIVE_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)", re.IGNORECASE)
_CLOCK = re.compile(
    r"(?:try again at|resets?(?:\s+at)?|reset at)\s+"
    r"(?:(?P<mon>[A-Z][a-z]{2})[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s*"
    r"(?:(?P<year>\d{4}),?\s*)?)?"
    r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>[AaPp][Mm])\b"
    r"(?:\s*\((?P<tz>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*)\))?",
    re.IGNORECASE,
)
_RETRY_AFTER = re.compile(r"retry[-_ ]after[\"':\s]+(\d+(?:\.\d+)?)", re.IGNORECASE)
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTHS = {name: number for number, name in enumerate(_MONTH_NAMES, 1)}
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_reset_at(text: str, now: datetime | None = None) -> datetime | None:
    """The reset time a limit message gives, as an aware datetime (pure, never raises).

    Understood: an epoch after ``limit reached|`` (Claude), ISO dates (``2026-04-01 at 00:00
    UTC``), a clock time with an optional date and zone (``try again at Aug 8th, 2026 12:30
    PM``, ``resets 5pm (Europe/Warsaw)``), a delay (``try again in 4 days 20 hours``,
    ``Please try again in 20s``, ``retry-after: 30``). Relative forms need ``now``.
    """
    try:
        return _reset_at(text, now)
    except (ValueError, OverflowError, KeyError, OSError):
        return None


def _reset_at(text: str, now: datetime | None) -> datetime | None:
    if match := _EPOCH.search(text):
        return datetime.fromtimestamp(int(match.group(1)), UTC)
    if match := _ISO.search(text):
        zone = (match.group(3) or "").upper()
        stamp = datetime.fromisoformat(f"{match.group(1)}T{match.group(2)}")
        if zone in ("", "Z", "UTC"):
            return stamp.replace(tzinfo=UTC)
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[-2:])
        return (stamp - sign * timedelta(hours=hours, minutes=minutes)).replace(tzinfo=UTC)
    if now is None:
        return None
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    if match := _RELATIVE.search(text):
        seconds = 0.0
        for amount, word in _RELATIVE_PART.findall(match.group(1)):
            unit = word.lower()
            key = "ms" if unit == "ms" else unit[0]
            seconds += float(amount) / 1000 if key == "ms" else float(amount) * _UNIT_SECONDS[key]
        return now + timedelta(seconds=seconds)
    if match := _CLOCK.search(text):
        return _clock_time(match, now)
    if match := _RETRY_AFTER.search(text):
        return now + timedelta(seconds=float(match.group(1)))
    return None


def _clock_time(match: re.Match[str], now: datetime) -> datetime | None:
    zone = ZoneInfo(match.group("tz")) if match.group("tz") else now.astimezone().tzinfo
    local_now = now.astimezone(zone)
    hour = int(match.group("h")) % 12 + (12 if match.group("ampm").lower() == "pm" else 0)
    minute = int(match.group("m") or 0)
    if match.group("mon"):
        month = _MONTHS[match.group("mon")[:3].lower()]
        year = int(match.group("year") or local_now.year)
        when = local_now.replace(
            year=year, month=month, day=int(match.group("day")), hour=hour, minute=minute
        )
        when = when.replace(second=0, microsecond=0)
        if not match.group("year") and when < local_now - timedelta(days=1):
            when = when.replace(year=year + 1)
        return when.astimezone(UTC)
    when = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if when <= local_now:
        when += timedelta(days=1)
    return when.astimezone(UTC)


def shorten(text: str, limit: int = DETAIL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def apply_fault(
    parsed: ParsedRun,
    text: str,
    *,
    now: datetime | None = None,
    reset_at: datetime | None = None,
    context: str | None = None,
    tool: str = "the program",
) -> FaultKind | None:
    """Record an error message on ``parsed``: its fault kind, or the bare error if unknown.

    ``context`` is extra text searched for a reset time (a message elsewhere in the output);
    ``tool`` names the program in what is said of its credentials.
    """
    kind = classify_fault(text)
    detail = shorten(text)
    if kind == "context":
        parsed.stop_reason = StopReason.CONTEXT_BUDGET
    elif kind in ("usage_limit", "rate_limit"):
        parsed.stop_reason = StopReason.PROVIDER_FAULT
        when = reset_at or parse_reset_at(text, now)
        if when is None and context:
            when = parse_reset_at(context, now)
        parsed.quota = Quota(kind=kind, detail=detail, reset_at=when)
    elif kind == "server":
        parsed.stop_reason = StopReason.PROVIDER_FAULT
    elif kind == "auth":
        if any(sig in text.lower() for sig in _LOGIN):
            # The program asks for a login: a seat's config folder is private, so none is ever
            # used; never relayed as the fix.
            parsed.setting_error = parsed.error = login_asked(tool)
            return kind
        parsed.setting_error = f"the provider rejected the credentials: {detail}"
    parsed.error = detail
    return kind


def conclude(
    parsed: ParsedRun,
    *,
    tool: str,
    exit_code: int | None,
    stderr: str,
    now: datetime | None,
) -> ParsedRun:
    """Account for a run that ended without a recognised end: a crash, read from stderr."""
    unexplained = (
        parsed.stop_reason is None
        and parsed.environment_error is None
        and parsed.setting_error is None
    )
    if unexplained and exit_code not in (0, None):
        tail = stderr.strip()[-_TAIL_CHARS:]
        if tail and classify_fault(tail) is not None:
            apply_fault(parsed, tail, now=now, tool=tool)
        elif parsed.error is None:
            parsed.error = f"{tool} exited with code {exit_code}" + (
                f": {shorten(tail)}" if tail else ""
            )
    return parsed


def run_cli(
    request: DispatchRequest,
    *,
    tool: str,
    install: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    parse: Callable[[ProcessResult], ParsedRun],
    stdin: str | None = None,
    max_turns: int | None = None,
    usage: UsageSources | None = None,
) -> DispatchResult:
    """Run ``argv`` in the worktree and map what ``parse`` read onto a dispatch result.

    With a meter on the request, ``usage`` (where the tool reports it) is read while the tool
    runs and journaled; when the meter says the dispatch must stop the tool is stopped, and a
    dispatch whose budget is spent before it starts never starts it."""
    meter = request.meter
    if meter is not None and (reason := meter.stop_reason()) is not None:
        return DispatchResult(exit_code=None, stopped=reason, error=stopped_error(reason))
    watch = UsageWatch(usage, meter) if usage is not None and meter is not None else None
    proc = start_cli(
        tool,
        install,
        argv,
        cwd=request.worktree,
        env=env,
        timeout=request.timeout_seconds,
        log_path=request.log_dir / f"{tool}.log",
        stdin=stdin,
        sandbox=request.sandbox,
        watch=watch,
    )
    if isinstance(proc, DispatchResult):
        return proc
    watched = watch.figures() if watch is not None else None
    return to_result(tool, proc, parse(proc), max_turns=max_turns, usage=watched)


def start_cli(
    tool: str,
    install: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    log_path: Path,
    stdin: str | None = None,
    sandbox: SandboxSpec | None = None,
    watch: OutputWatch | None = None,
) -> ProcessResult | DispatchResult:
    """Run a tool to its end; a result without an exit code when it is missing or won't start.

    ``sandbox``: where it runs (None: unconfined); ``watch``: who reads its output as it runs
    (and may stop it); see :func:`run_process`."""
    missing = program_problem(argv[0], env, sandbox, install=install, argv=argv)
    if missing is not None:  # the operator's setting, found as the preflight finds it
        return DispatchResult(exit_code=None, setting_error=missing)
    try:
        return run_process(
            argv, cwd=cwd, env=env, timeout=timeout, log_path=log_path, stdin=stdin,
            sandbox=sandbox, watch=watch,
        )  # fmt: skip
    except (FileNotFoundError, PermissionError) as exc:
        return DispatchResult(exit_code=None, setting_error=f"{tool} could not be started: {exc}")
    except OSError as exc:  # e.g. an argument list too long for the system
        return DispatchResult(exit_code=None, error=f"{tool} could not be started: {exc}")


def stopped_error(reason: str) -> str:
    return f"stopped by assay: {reason}"


def to_result(
    tool: str,
    proc: ProcessResult,
    parsed: ParsedRun,
    *,
    max_turns: int | None = None,
    usage: UsageFigures | None = None,
) -> DispatchResult:
    """The dispatch result for a finished (or killed) process and what was read from it.

    ``usage``: what was read of the tool's usage while it ran (all its output, where the parse
    may have had only the tail); the result has the larger of that and the parse's."""
    error = parsed.error
    if proc.timed_out:
        seconds = proc.wall_time_ms / 1000
        note = f"{tool} timed out after {seconds:.1f}s and its process group was killed"
        error = f"{note} ({error})" if error else note
    if proc.stopped is not None:
        note = stopped_error(proc.stopped)
        error = f"{note} ({error})" if error else note
    figures = parsed.usage
    if usage is not None:
        figures = usage if figures is None else figures.at_least(usage)
    tokens_used = figures.tokens if figures is not None else parsed.tokens_used
    cost = figures.cost_usd if figures is not None else parsed.cost_usd
    summary = parsed.summary[:SUMMARY_CHARS] if parsed.summary else None
    report = CoderReport(
        summary=summary,
        turns_used=parsed.turns_used,
        turns_available=max_turns,
        tokens_used=tokens_used,
        wall_time_ms=proc.wall_time_ms,
        cost_usd=float(cost) if cost is not None else None,
        stop_reason=parsed.stop_reason,
    )
    return DispatchResult(
        exit_code=proc.exit_code,
        stop_reason=parsed.stop_reason,
        report=report,
        tokens_used=tokens_used,
        cost_usd=report.cost_usd,
        turns_used=parsed.turns_used,
        wall_time_ms=proc.wall_time_ms,
        timed_out=proc.timed_out,
        quota=parsed.quota,
        fault=provider_fault(tool, parsed),
        environment_error=parsed.environment_error,
        setting_error=parsed.setting_error,
        error=error,
        log_path=proc.log_path,
        warnings=list(parsed.warnings),
        output=proc.printed,
        refused=list(proc.refused),
        usage=figures,
        stopped=proc.stopped,
    )


def provider_fault(tool: str, parsed: ParsedRun) -> ProviderFault | None:
    """The run ended on the provider's fault (a server error, overload, lost connection), not
    on quota or credentials: the seat is lost to a provider fault."""
    if parsed.stop_reason is not StopReason.PROVIDER_FAULT:
        return None
    if parsed.quota is not None or parsed.environment_error or parsed.setting_error:
        return None
    return ProviderFault(f"{tool}: {parsed.error or 'the provider failed'}")


def setting(request: DispatchRequest, name: str) -> object:
    """A contract setting of this seat's coder block, or None."""
    try:
        return request.settings.get(name)
    except AttributeError:
        return None


def model_and_args(request: DispatchRequest) -> tuple[str | None, list[str]]:
    """The seat's ``model`` and extra ``args`` (strings only; anything else is ignored)."""
    model = setting(request, "model")
    args = setting(request, "args")
    extra = [str(a) for a in args] if isinstance(args, list | tuple) else []
    return (model if isinstance(model, str) and model else None), extra


def turn_limit(request: DispatchRequest) -> int | None:
    limit = request.max_turns if request.max_turns is not None else setting(request, "max_turns")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


# The least a program's own money cap is given: 0 means "no cap" to some (mini), and a budget
# already spent stops the dispatch before its program starts.
MIN_CAP_USD = 0.0001


def money_cap(request: DispatchRequest) -> str | None:
    """What the dispatch may still spend in dollars, as a program's cap argument; None without
    a money budget (or a meter)."""
    left = request.meter.remaining_cost_usd() if request.meter is not None else None
    if left is None:
        return None
    return f"{max(left, MIN_CAP_USD):.6f}".rstrip("0").rstrip(".")


def now_utc() -> datetime:
    return datetime.now(UTC)
