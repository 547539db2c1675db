"""The close of a run, built without I/O: settlement, payload and the ledger's close rows.

One function for every way a run ends: the graph's result recorded by the executor that ran
it (:meth:`~assay.engine.local.executor.LocalEffects.record`),
a run whose process died or was stopped
(:func:`assay.engine.recovery.close.close_unfinished`), and a run whose Temporal worker was lost.
Whoever calls it reads what it needs first (the refund streak, the journal's counts, the
halts attestation left unattested) and writes what it returns afterwards (the payload file,
then the ledger's close in one transaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from assay.adapters.store.records import DispatchRecord, RunClose
from assay.adapters.store.usage_log import DispatchUsage, spend_of
from assay.core.backoff import QUOTA_ROWS, quota_wait
from assay.core.contract import Contract
from assay.core.payload import (
    CandidateSummary,
    HaltNotice,
    LandSummary,
    Payload,
    build_payload,
    usage_of,
)
from assay.core.settle import RefundStreak, Settlement, settle
from assay.core.tasks import Task
from assay.core.usage import Spend, UsageFigures
from assay.core.vocab import (
    LandMode,
    RunStatus,
    SettleRow,
    TaskStatus,
    UsageRole,
    ValidatorKind,
)
from assay.engine.graph.records import seat_error
from assay.engine.run_result import RunResult

IGNORED_SHOWN = 50  # ignored entries a payload names per candidate (with the count of all)


@dataclass(frozen=True)
class CloseFacts:
    """What a close is built from, all read beforehand.

    ``task`` is the task as the run found it (running); it is not changed. ``dispatches``: the
    journal's records when the graph did not finish (else they come from ``result``).
    ``quota_streak``: the quota-refunded runs in a row among the task's closed runs."""

    task: Task
    run_id: str
    dispatch_id: str
    contract: Contract
    result: RunResult
    started_at: datetime
    settled_at: datetime
    finished_at: datetime
    refunds: RefundStreak = field(default_factory=RefundStreak)
    quota_streak: int = 0
    unattested: Sequence[HaltNotice] = ()
    dispatches: Sequence[DispatchRecord] | None = None
    # What the run's dispatches spent, from the usage journal (each report as it arrived).
    usage: Sequence[DispatchUsage] = ()
    # The run's user stopped it (Ctrl-C on `assay run`): the hold reason of its task, which
    # stays stopped instead of runnable again (see assay.core.settle).
    stopped: str | None = None


@dataclass(frozen=True)
class Closing:
    """The close to write: the task as settle left it, the payload, the ledger's close (its
    ``payload_path`` and extra ``events`` are the writer's to fill in)."""

    task: Task
    settlement: Settlement
    payload: Payload
    row: RunClose


def close_run(facts: CloseFacts) -> Closing:
    result, contract = facts.result, facts.contract
    task = facts.task.model_copy(deep=True)
    budgets = contract.budgets
    settlement = settle(
        task,
        result.verdict,
        result.reason,
        budgets.max_attempts,
        facts.settled_at,
        refunds=facts.refunds,
        max_refunds=budgets.max_refunds,
        stopped=facts.stopped,
    )
    _wait_after_refund(task, settlement, facts)
    payload = build_payload(
        task_id=task.id,
        run_id=facts.run_id,
        dispatch_id=facts.dispatch_id,
        status=result.status,
        halt_type=result.halt_type,
        reason=result.reason,
        task_status=settlement.new_status,
        attempt_spent=settlement.attempt_spent,
        task_spec=contract.task,
        attempts=result.attempts,
        started_at=facts.started_at,
        finished_at=max(facts.finished_at, facts.started_at),
        validator_results=result.validator_results,
        policy_decision=result.policy_decision,
        candidates=_candidates(result),
        tally=result.tally,
        coder_report=result.winner.report if result.winner else None,
        report_comparison=result.winner.comparison if result.winner else None,
        fired_halts=[*result.fired, *facts.unattested],
        usage=usage_of(spend_of(facts.usage), result.wall_time_ms),
        land=_land_summary(result, contract),
        sandbox=contract.sandbox,  # a bwrap contract never runs unconfined: the CLI refuses
        network=contract.network.mode,
    )
    judges = sum(1 for v in contract.validators if v.kind is ValidatorKind.JUDGE)
    row = RunClose(
        run_id=facts.run_id,
        status=result.status,
        task=task,
        settlement=settlement,
        reason=result.reason,
        attempts=result.attempts,
        dispatches=_with_usage(
            list(facts.dispatches)
            if facts.dispatches is not None
            else _dispatch_records(facts.dispatch_id, result),
            facts.usage,
        ),
        judge_calls=judges * result.validations + result.judge_calls,
        land_attempts=1 if result.land else 0,
        finished_at=payload.finished_at,
        usage=payload.usage.model_dump(mode="json"),
    )
    return Closing(task=task, settlement=settlement, payload=payload, row=row)


def _wait_after_refund(task: Task, settlement: Settlement, facts: CloseFacts) -> None:
    """The wait after a run lost to quota or a machine fault, set before the close is written
    (so the refund and its wait land in one transaction). A held task has no wait."""
    if task.status is not TaskStatus.FAILED:
        return
    now = facts.settled_at
    if settlement.row in QUOTA_ROWS:
        # This run, not yet closed, is the ``+ 1`` of the streak.
        task.wait_until(quota_wait(facts.result.quota_reset_at, now, facts.quota_streak + 1), now)
    elif settlement.row is SettleRow.FAILED_MACHINE_FAULT:
        # A provider outage or a broken environment: exponential backoff on the streak.
        task.wait_until(quota_wait(None, now, facts.refunds.count + 1), now)


def _candidates(result: RunResult) -> list[CandidateSummary]:
    return [
        CandidateSummary(
            seat=s.seat,
            label=result.labels.get(s.seat),
            coder=s.coder,
            files_changed=s.files,
            type_changes=s.type_changes,
            ignored_files=s.ignored[:IGNORED_SHOWN],
            ignored_count=s.ignored_count,
            viable=s.viable,
            lost_to_quota=s.lost_to_quota,
            lost_to_provider_fault=s.lost_to_provider_fault,
            fault=seat_error(s) if s.lost_to_machine or s.lost_to_setting else None,
            stop_reason=s.dispatch.stop_reason,
        )
        for s in result.latest_seats
    ]


def _land_summary(result: RunResult, contract: Contract) -> LandSummary | None:
    land = result.land
    if land is None:
        return None
    # What landed by merge says so, whatever mode it came through (a recovered merge).
    mode = LandMode.MERGE if land.status is RunStatus.MERGED else contract.land
    return LandSummary(mode=mode, branch=land.branch, pr_url=land.pr_url)


def _dispatch_records(dispatch_id: str, result: RunResult) -> list[DispatchRecord]:
    return [
        DispatchRecord(
            dispatch_id=f"{dispatch_id}.a{d.attempt}.s{d.seat}",
            attempt=d.attempt,
            seat=d.seat,
            coder=d.coder,
            label=result.labels.get(d.seat),
            viable=d.viable,
            lost_to_quota=d.lost_to_quota,
            stop_reason=d.dispatch.stop_reason,
            files_changed=len(d.files),
            tokens_used=d.dispatch.tokens_used,
            cost_usd=d.dispatch.cost_usd,
            wall_time_ms=d.dispatch.wall_time_ms,
        )
        for d in result.dispatches
    ]


def _with_usage(
    records: list[DispatchRecord], usage: Sequence[DispatchUsage]
) -> list[DispatchRecord]:
    """Each coder dispatch's tokens and cost as the journal summed them (a dispatch killed
    before it finished counts what it reported)."""
    spent: dict[tuple[int | None, int | None], list[UsageFigures]] = {}
    for u in usage:
        if u.key.role is UsageRole.CODER:  # a seat dispatched again has a second key
            spent.setdefault((u.key.attempt, u.key.seat), []).append(u.figures)
    filled = []
    for record in records:
        figures = spent.get((record.attempt, record.seat))
        if figures is None:
            filled.append(record)
            continue
        total = Spend.of(figures)
        tokens = total.tokens if total.unreported < total.dispatches else None
        filled.append(record.model_copy(update={"tokens_used": tokens, "cost_usd": total.cost_usd}))
    return filled
