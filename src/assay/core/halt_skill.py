"""Seed 002's halt-state skill, written for the agent, as a Claude Code skill (``SKILL.md``).

The brief says *when* to fire each halt; the skill says how the halt state behaves (the
lifecycle, the query and fire forms, what the command prints and how it exits, why a fired
block halt is sticky), in the form Claude Code loads from ``<config dir>/skills/<name>/``:
YAML front matter with ``name`` and ``description`` (a JSON string, which is valid YAML
whatever colons it holds), then Markdown. Pure: text out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from assay.core.brief import fire_command, query_command

__all__ = ["SKILL_NAME", "render_halt_skill"]

SKILL_NAME = "assay-halts"

DESCRIPTION = (
    "Query or fire a halt of this assay dispatch (assay halt check) when the task cannot be "
    "done as written: a missing anchor, a scope breach, a secret, a contradiction, an "
    "irreversible action, an exhausted budget, a verification gap. Use it instead of guessing."
)


def render_halt_skill(halts: Sequence[tuple[str, str]] = ()) -> str:
    """The ``SKILL.md`` text; ``halts`` are the dispatch's armed (name, severity) pairs."""
    armed = "\n".join(f"- `{name}` ({severity})" for name, severity in halts)
    example = "halt-spec-contradiction"
    body = f"""\
---
name: {SKILL_NAME}
description: {json.dumps(DESCRIPTION)}
---

# Halt state (assay)

Every halt of this dispatch was armed before you started; assay reads their state when you
stop. A halt moves along one lifecycle:

    ARMED --query--> CHECKED --fire--> FIRED --(assay, at closure)--> ATTESTED

## Query a halt (ARMED -> CHECKED; idempotent; changes nothing else)

    {query_command(example)}

## Fire a halt (-> FIRED, with evidence)

    {fire_command(example, "the task says X, but tests/test_a.py line 12 asserts not X")}

`--evidence` is mandatory: say what you found, with file and line. Run the command exactly
as shown: `assay` is on your PATH and `$ASSAY_DISPATCH_ID` and `$ASSAY_HALT_STATE_DIR` are
set. After firing a block halt, stop working and say why in your final answer.

## What the command answers

It prints one JSON object. `"checked": true` (a query) or `"fired": true` (a fire), with
`current_state` (`name`, `severity`, `lifecycle`, `evidence`, `armed_at`, `fired_at`); a fire
also has `transition` (`from`, `to`, `evidence`, `fired_at`). A fired block halt is listed in
`violations`, a fired warn or log halt in `warnings`.

Exit codes: 0 a query, or a warn/log halt fired; 1 a block halt fired (halt and surface:
the expected answer, not an error) or a failure named in `violations`
(`halt-check-condition-not-found`: a misspelt name; `halt-check-fire-evidence-missing`: no
evidence); 2 a bad invocation.

A FIRED block halt is sticky: firing it again is rejected (`halt-check-sticky-rejection`)
until an operator re-arms it. Never edit the state file by hand: assay journals every firing
and treats a changed file as tampering.
"""
    if armed:
        body += f"\n## The halts armed for this dispatch\n\n{armed}\n"
    return body
