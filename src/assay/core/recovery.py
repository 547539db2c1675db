"""The spec a recovery wave is given: the root spec plus every prior failure, tagged by attempt."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

MAX_FAILURE_CHARS = 2000


class PriorFailure(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempt: int
    source: str  # the validator or step that failed
    detail: str


def recovery_spec(root: str, failures: Sequence[PriorFailure]) -> str:
    """The root spec, then each prior failure as ``[attempt N] source: detail``.

    Every failure is kept (not only the last): a coder that fixed one failure and reintroduced
    an older one must see both. Each detail is cut to its last ``MAX_FAILURE_CHARS`` characters,
    where test runners put the summary.
    """
    if not failures:
        return root
    lines = [root.rstrip(), "", "Earlier attempts at this task failed. Fix every failure below:"]
    for failure in failures:
        detail = failure.detail.strip()
        if len(detail) > MAX_FAILURE_CHARS:
            detail = "…" + detail[-MAX_FAILURE_CHARS:]
        lines.append(f"[attempt {failure.attempt}] {failure.source}: {detail}")
    return "\n".join(lines)
