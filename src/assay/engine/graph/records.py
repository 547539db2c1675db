"""How a run is written down: attempt records, findings, seat errors, and its events."""

from __future__ import annotations

from pydantic import JsonValue

from assay.core.attempts import AttemptRecord, attempt_outcome
from assay.core.brief import NO_CHANGE_MARK
from assay.core.results import ValidatorResult
from assay.core.text import shown
from assay.core.vocab import STOPPED_SAID, StopReason
from assay.engine.values import Candidate


def record_attempt(
    attempt: int,
    seats: list[Candidate],
    results: list[ValidatorResult],
    *,
    fault: bool,
    failures: list[str],
    signatures: list[str] | None = None,
) -> AttemptRecord:
    return AttemptRecord(
        attempt=attempt,
        outcome=attempt_outcome(results, operational_fault=fault),
        coder_dispatches=len(seats),
        failures=failures,
        finding_signatures=signatures or [],
    )


def blocking_findings(results: list[ValidatorResult]) -> list[str]:
    return [
        f"{r.validator_id}: {finding}"
        for r in results
        if r.halts or r.blocks
        for finding in (r.findings or [r.justification])
    ]


def failure_detail(result: ValidatorResult) -> str:
    findings = "; ".join(result.findings)
    return f"{result.justification} {findings}".strip() if findings else result.justification


# What an attempt.decided event says of each failed validator (the progress shows it as is,
# on a terminal and off one): its first line, then the last lines of its output.
SUMMARY_HEAD_CHARS = 300
SUMMARY_LINES = 5
SUMMARY_LINE_CHARS = 200


def failure_summary(result: ValidatorResult) -> str:
    """``tests: `pytest -q` exited 1`` and, a line each, the last lines of its output (a
    command's output tail; else the rest of its justification, else its findings): what
    failed, its exit and what it printed last, bounded for the event log."""
    first, _, rest = result.justification.strip().partition("\n")
    head = first.strip().removesuffix(":").removesuffix("; output tail").rstrip()
    output = [line.rstrip() for line in rest.splitlines() if line.strip()]
    # A finding is one line, whatever it names (a path may hold a newline): escaped here, so
    # only the output's own lines are lines.
    findings = [shown(f) for f in result.findings if f.strip() and f.strip() not in head]
    # A block the first line introduces ("...; output tail:") is the output; a judge's
    # reasoning that goes on is not, its findings say what it found.
    introduced = first.rstrip().endswith(":")
    lines = output if output and (introduced or not findings) else findings
    if not head:
        head = lines.pop(0) if lines else "failed"
    tail = [line[:SUMMARY_LINE_CHARS] for line in lines[-SUMMARY_LINES:]]
    return "\n".join([f"{result.validator_id}: {head}"[:SUMMARY_HEAD_CHARS], *tail])


def hit_budget(seat: Candidate) -> bool:
    """The seat stopped on one of its budgets: turns, context, time, or its run's spending."""
    reason = seat.dispatch.stop_reason
    stopped = seat.dispatch.timed_out or seat.dispatch.budget is not None
    return stopped or reason in (StopReason.TURN_BUDGET, StopReason.CONTEXT_BUDGET)


def spending_exhausted(seats: list[Candidate]) -> str | None:
    """The spending budget the attempt's seats exhausted (its figures), if one was."""
    return next((s.dispatch.budget for s in seats if s.dispatch.budget), None)


def budget_detail(seat: Candidate) -> str:
    if seat.dispatch.budget is not None:
        return seat.dispatch.budget
    if seat.dispatch.timed_out:
        return "the coder hit its time budget and was stopped"
    reason = seat.dispatch.stop_reason
    return f"the coder {STOPPED_SAID[reason] if reason else 'stopped at a budget'}"


def seat_error(seat: Candidate) -> str:
    result = seat.dispatch
    if result.setting_error:
        return result.setting_error
    if result.environment_error:
        return result.environment_error
    if result.quota:
        return f"lost to quota: {result.quota.detail}"
    if result.fault and not result.quota:
        return f"lost to a provider fault: {result.fault}"
    if result.timed_out:  # the seat's whole process group was stopped at its time limit
        return "timed out: stopped at the coder's `timeout_seconds` before it changed anything"
    if result.error:
        return result.error
    return no_change_claim(seat) or "the coder left the tree unchanged"


def no_change_claim(seat: Candidate) -> str | None:
    """What a seat that left the tree unchanged says of it (``NO CHANGE NEEDED:`` and its
    evidence): a claim the validators check, not a failure of its own; None without one."""
    summary = (seat.report.summary or "").strip() if seat.report is not None else ""
    evidence = summary.removeprefix(NO_CHANGE_MARK).strip()
    if not (seat.empty and summary.startswith(NO_CHANGE_MARK) and evidence):
        return None
    return f"the coder says no change is needed: {evidence}"


def seat_errors(seats: list[Candidate]) -> list[str]:
    return [f"seat {s.seat}: {seat_error(s)}" for s in seats if not s.viable]


def _seat_event_error(seat: Candidate) -> str | None:
    """A seat's error as its event says it: none for a candidate, nor for a claim that no
    change is needed (the validators check that, and the attempt's decision says what they
    found)."""
    if seat.viable:
        return None
    error = seat_error(seat)
    return None if error == no_change_claim(seat) else error


def seat_event(seat: Candidate) -> dict[str, JsonValue]:
    return {
        "attempt": seat.attempt,
        "seat": seat.seat,
        "coder": seat.coder,
        "files": [*seat.files],
        "type_changes": [c.model_dump(mode="json") for c in seat.type_changes],
        "viable": seat.viable,
        "stop_reason": seat.dispatch.stop_reason.value if seat.dispatch.stop_reason else None,
        "error": _seat_event_error(seat),
        "tokens_used": seat.dispatch.tokens_used,
        "cost_usd": seat.dispatch.cost_usd,
        "wall_time_ms": seat.dispatch.wall_time_ms,
    }


# What a validator.finished event keeps of the verdict's text: enough for a reader to see why
# (the end of a test run's output says it), bounded so a chatty check cannot bloat the log.
JUSTIFICATION_TAIL = 2000
FINDINGS_KEPT = 20
FINDING_LIMIT = 300


def validator_event(attempt: int, seat: int, result: ValidatorResult) -> dict[str, JsonValue]:
    return {
        "attempt": attempt,
        "seat": seat,
        "validator": result.validator_id,
        "severity": result.severity.value,
        "error": result.error,
        "advisory": result.advisory,
        "justification": result.justification[-JUSTIFICATION_TAIL:],
        "findings": [f[:FINDING_LIMIT] for f in result.findings[:FINDINGS_KEPT]],
    }
