"""Blind judges: rank candidates by label, and deliberate once when the panel splits.

The caller makes the candidates blind first (``assay.core.blind``: labels, each judge's own
order, redacted diffs) and tallies the rankings with ``assay.core.tally``. Here a judge is
asked: an OpenAI-compatible model (``kind: llm``) or a coder CLI run read-only (``claude``,
``codex``). Both give the same :class:`RankingResult`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from assay.adapters.coders.base import UsageMeter
from assay.adapters.judging.common import Deliberation, RankingResult
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.blind import BlindCandidate
from assay.core.contract import JudgeSpec
from assay.core.vocab import JudgeKind

__all__ = ["RankingResult", "deliberate", "rank"]


def rank(
    candidates: Sequence[BlindCandidate],
    task: str,
    judge: JudgeSpec,
    *,
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    sandbox: SandboxSpec | None = None,
    meter: UsageMeter | None = None,
) -> RankingResult:
    """One judge's ranking of ``candidates``, shown in the order given (its ``judge_order``).

    ``env``: for ``llm``, where the API key and ``OPENAI_BASE_URL`` are read (default: the
    process environment); for a CLI, the child's whole environment (default: the allowlist
    plus the tool's credentials). ``workdir``: this judge's own directory for its transcript
    and, for a CLI, its scratch copy of the diffs (default: a temporary directory / no log).
    ``sandbox``: where a CLI judge runs (None: unconfined; its own folder is made writable).
    ``meter``: where an LLM judge's every answer's usage goes as it arrives.
    Never raises for anything the judge or provider does; ValueError for no or repeated labels.
    """
    return _ask(candidates, task, judge, env, workdir, None, sandbox, meter)


def deliberate(
    candidates: Sequence[BlindCandidate],
    task: str,
    judge: JudgeSpec,
    *,
    own: RankingResult,
    others: Sequence[RankingResult],
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    sandbox: SandboxSpec | None = None,
    meter: UsageMeter | None = None,
) -> RankingResult:
    """Show a judge the other judges' rankings and reasons once, and ask again.

    A judge with no usable ranking of its own, or with no usable other to read, is not asked:
    ``own`` is returned as it is. When the second ask fails (quota, fault, unusable answer),
    the judge's first ranking stands, with the failure in ``error`` and ``quota``. The
    result's usage is the second ask's own.
    """
    readable = [other for other in others if other.ranking is not None]
    if own.ranking is None or not readable:
        return own
    again = _ask(candidates, task, judge, env, workdir, Deliberation(own, readable), sandbox, meter)
    if again.ranking is not None:
        return again
    return RankingResult(
        own.ranking,
        own.reasons,
        quota=again.quota,
        error=f"deliberation gave no usable ranking, the first one stands: {again.error}",
        tokens=again.tokens,
        cost=again.cost,
        usage=again.usage,
        judge=own.judge or again.judge,
        log_path=again.log_path,
    )


def _ask(
    candidates: Sequence[BlindCandidate],
    task: str,
    judge: JudgeSpec,
    env: Mapping[str, str] | None,
    workdir: Path | None,
    prior: Deliberation | None,
    sandbox: SandboxSpec | None = None,
    meter: UsageMeter | None = None,
) -> RankingResult:
    if judge.kind is JudgeKind.LLM:
        from assay.adapters.judging.llm import rank_with_model

        return rank_with_model(
            candidates, task, judge, env=env, workdir=workdir, prior=prior, meter=meter
        )
    from assay.adapters.judging.cli import rank_with_cli

    return rank_with_cli(
        candidates, task, judge, env=env, workdir=workdir, prior=prior, sandbox=sandbox
    )
