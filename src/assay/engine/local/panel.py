"""A panel of blind judges for one attempt, on this machine.

Labels come from a shuffle seeded by the run id; each judge sees the candidates in its own
order, with diffs redacted of whatever would reveal the coder. Judges are asked in parallel;
when they split and the contract allows, each is shown the others' reasons once and asked
again. The rankings are tallied by :func:`assay.core.tally.tally`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from assay.adapters import folders
from assay.adapters.envpolicy import agent_environment, model_environment
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.changes import ChangeSet
from assay.core.contract import JudgeSpec
from assay.core.usage import UsageFigures
from assay.core.vocab import JudgeKind
from assay.engine.local.metering import RunMeter, judge_key
from assay.engine.values import JudgeRound, JudgeSaid, RunPlan

if TYPE_CHECKING:
    from assay.adapters.judging import RankingResult


def own_home(sandbox: SandboxSpec | None, index: int, round_: int) -> SandboxSpec | None:
    """The judge's sandbox with a fresh home of its own for this round: no judge leaves
    anything (settings, hooks) for another judge or a later round."""
    if sandbox is None or sandbox.home is None:
        return sandbox
    home = sandbox.home / f"judge-{index + 1}-round-{round_}"
    folders.remove_tree(home)
    home.mkdir(parents=True)
    return replace(sandbox, home=home.resolve())


async def judge_blind(
    plan: RunPlan,
    attempt: int,
    changes: Mapping[int, ChangeSet],
    *,
    operator_env: Mapping[str, str],
    workdir: Path,
    sandbox: SandboxSpec | None = None,
    meter: RunMeter | None = None,
) -> JudgeRound:
    """``changes``: each candidate's change with its diff, by seat (read on the worker that
    holds the seats). ``sandbox``: where each CLI judge runs (None: unconfined); an LLM judge
    is a model assay calls itself, so no process of it is confined. ``meter``: where each
    judge's spending is journaled."""
    # The judges' clients (HTTP, the verdict schema) and the blinding models load only for a
    # run that has judges.
    from assay.adapters.judging import RankingResult, deliberate, rank
    from assay.core.blind import blind_candidates, blind_labels, judge_order, needs_deliberation
    from assay.core.tally import tally

    contract = plan.contract
    labels = blind_labels(list(changes), plan.run_id)
    identity = [plan.run_id, plan.dispatch_id]
    identity += [m for m in (contract.coder_for_seat(s).model for s in changes) if m]
    blind = blind_candidates(dict(changes), plan.run_id, secrets_of_identity=identity)
    by_label = {c.label: c for c in blind}
    ordered_labels = sorted(by_label)
    specs: list[JudgeSpec | None] = [contract.judge_for(i) for i in range(contract.judges)]

    def ask(
        index: int, spec: JudgeSpec | None, round_: int, prior: list[RankingResult]
    ) -> RankingResult:
        if spec is None:
            return RankingResult(
                ranking=None, error="judges are requested but the contract names no `judge:`"
            )
        order = [by_label[label] for label in judge_order(ordered_labels, plan.run_id, index)]
        # An LLM judge is a model assay calls itself; a CLI judge is a process it starts.
        environment = model_environment if spec.kind is JudgeKind.LLM else agent_environment
        env = environment(
            operator_env, spec.kind.value, spec.model_dump(mode="json"), declared=contract.env
        )
        directory = workdir / f"judge-{index + 1}" / f"round-{round_}"
        directory.mkdir(parents=True, exist_ok=True)
        confined = None if spec.kind is JudgeKind.LLM else own_home(sandbox, index, round_)
        spending = None
        if meter is not None:
            key = judge_key(plan.task_id, plan.run_id, attempt, index + 1, round_, judge_name(spec))
            spending = meter.dispatch(key)
        if not prior:
            result = rank(
                order, contract.task, spec, env=env, workdir=directory, sandbox=confined,
                meter=spending,
            )  # fmt: skip
        else:
            others = [r for i, r in enumerate(prior) if i != index]
            result = deliberate(
                order, contract.task, spec, own=prior[index], others=others, env=env,
                workdir=directory, sandbox=confined, meter=spending,
            )  # fmt: skip
            if result is prior[index]:
                return result  # not asked again: nothing spent
        llm_unanswered = spec.kind is JudgeKind.LLM and result.usage is None
        if spending is not None and not llm_unanswered:  # no answer came: nothing spent
            spending.finish(judge_spent(result))
        return result

    results = list(
        await asyncio.gather(
            *(asyncio.to_thread(ask, i, spec, 0, []) for i, spec in enumerate(specs))
        )
    )
    said = _said(specs, results, 0, [])
    calls = sum(1 for spec in specs if spec is not None)
    for round_ in range(1, contract.deliberate_rounds + 1):
        if not needs_deliberation([r.ranking for r in results], ordered_labels):
            break
        prior = results
        results = list(
            await asyncio.gather(
                *(asyncio.to_thread(ask, i, spec, round_, prior) for i, spec in enumerate(specs))
            )
        )
        said += _said(specs, results, round_, prior)
        calls += sum(1 for spec in specs if spec is not None)
    lost = [r for r in results if r.quota is not None and r.ranking is None]
    resets = [r.quota.reset_at for r in lost if r.quota and r.quota.reset_at]
    faulted = [r for r in results if r.fault is not None and r.quota is None and r.ranking is None]
    # A judge lost to a provider fault is named by the fault itself ("HTTP 503, 3 of 3 calls").
    problems = tuple(
        f"judge {i + 1} ({judge_name(spec)}): {r.fault if r in faulted else r.error}"
        for i, (spec, r) in enumerate(zip(specs, results, strict=True))
        if r.ranking is None and (r.error or r.fault)
    )
    unset = tuple(
        f"judge {i + 1} ({judge_name(spec)}): {r.setting_error}"
        for i, (spec, r) in enumerate(zip(specs, results, strict=True))
        if r.ranking is None and r.setting_error
    )
    return JudgeRound(
        problems=problems,
        setting_errors=unset,
        tally=tally(ordered_labels, contract.judges, [r.ranking for r in results], plan.run_id),
        labels=labels,
        calls=calls,
        lost_to_quota=len(lost),
        quota_reset_at=max(resets) if resets else None,
        lost_to_fault=len(faulted),
        said=tuple(said),
    )


def _said(
    specs: list[JudgeSpec | None],
    results: list[RankingResult],
    round_: int,
    prior: list[RankingResult],
) -> list[JudgeSaid]:
    """Each judge's answer this round, as the run keeps it: a judge never asked (no
    ``judge:``) or not asked again in a deliberation (its answer stands) adds nothing."""
    return [
        JudgeSaid.of(i + 1, judge_name(spec), round_, r.ranking, r.reasons, r.error)
        for i, (spec, r) in enumerate(zip(specs, results, strict=True))
        if spec is not None and not (prior and r is prior[i])
    ]


def judge_name(spec: JudgeSpec | None) -> str:
    if spec is None:
        return "unnamed"
    return f"{spec.kind.value} {spec.model}" if spec.model else spec.kind.value


def judge_spent(result: RankingResult) -> UsageFigures | None:
    """What a judge's ask spent, as its final figures: an LLM judge's answers (each was
    journaled as it came), or what a CLI judge's program said at its end (None: nothing)."""
    if result.usage is not None:
        return result.usage
    if result.tokens is None and result.cost is None:
        return None
    return UsageFigures(tokens_in=result.tokens or 0, cost_usd=result.cost)
