"""The real aider (`aider --message-file`) through `assay run`, against scripted Chat Completions.

The model's edits are the reply text in aider's own edit formats (a whole file, or
SEARCH/REPLACE blocks), which aider applies. A ``--model-metadata-file`` prices the scripted
model, so aider prints a cost; ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps litellm off the network.
Aider has no turn limit, so there is no turn-budget case; it retries a rate limit for about a
minute (0.125 s doubling to 32 s) before it gives up, a ceiling no setting changes: the
rate-limit case lowers it to 2 s with a ``sitecustomize`` on aider's ``PYTHONPATH``
(``support/aider_retry``), so aider still retries and gives up, in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agents import (
    BUGGY_LINE,
    FIXED_LINE,
    AgentRun,
    assert_merged,
    assert_refunded_quota,
    require,
)
from support.brief_follower import (
    assert_halted,
    assert_verified_noop,
    claim_no_change,
    fire_halt,
    fixed_repo,
    head,
    request_text,
)
from support.model_server import ModelServer, Turn, Usage
from support.repo import FIXED, make_repo

pytestmark = pytest.mark.interop
MODEL = "openai/scripted-model"
RETRY_CEILING = Path(__file__).resolve().parents[2] / "support" / "aider_retry"
PRICES = {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    require("aider")
    with ModelServer() as started:
        yield started


def aider_run(tmp_path: Path, server: ModelServer, *args: str) -> AgentRun:
    metadata = tmp_path / "model-metadata.json"
    info = {"max_input_tokens": 128000, "litellm_provider": "openai", "mode": "chat", **PRICES}
    metadata.write_text(json.dumps({MODEL: info}))
    coder = {
        "kind": "aider",
        "model": MODEL,
        "base_url": server.base_url,
        "args": ["--model-metadata-file", str(metadata), *args],
    }
    env = {"OPENAI_API_KEY": "sk-any", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return AgentRun(make_repo(tmp_path), tmp_path / "home", coder, env)


def test_aider_fixes_the_bug_in_whole_file_format_and_reports_usage_and_cost(
    tmp_path: Path, server: ModelServer
) -> None:
    # Naming a file that is not in the chat makes aider add it and ask again (its own flow);
    # the second answer is the whole new file.
    whole = f"Here it is:\n\nsrc/slug.py\n```\n{FIXED}```\n"
    server.script(
        Turn.reply("I need to change src/slug.py.", usage=Usage(700, 10)),
        Turn.reply(whole, usage=Usage(800, 40)),
    )
    run = aider_run(tmp_path, server)
    outcome = run.run()
    assert_merged(outcome, run.repo)
    payload = outcome.payload
    assert payload["coder_report"]["summary"] == "Applied edit to src/slug.py"
    # Usage and cost as aider's own "Tokens: ... Cost: ..." lines reported them.
    assert payload["usage"]["tokens"] == 710 + 840
    cost = (700 + 800) * PRICES["input_cost_per_token"] + 50 * PRICES["output_cost_per_token"]
    assert payload["usage"]["cost_usd"] == pytest.approx(cost, abs=1e-4)
    first, second = server.completions
    assert first.body["model"] == "scripted-model"
    assert first.headers["authorization"] == "Bearer sk-any"
    assert "Make slugify keep digits" in first.raw.decode()
    assert "isalpha" in second.raw.decode()  # aider sent the file it added to the chat
    assert "Cost: $" in run.seat_log(outcome, "aider.log")
    # aider's own files went to the log folder or were removed, not into the candidate.
    assert not list(run.repo.root.glob(".aider*"))


def test_aider_retries_a_passing_rate_limit_and_applies_search_replace_blocks(
    tmp_path: Path, server: ModelServer
) -> None:
    blocks = (
        "src/slug.py\n```python\n<<<<<<< SEARCH\n"
        f"{BUGGY_LINE}=======\n{FIXED_LINE}>>>>>>> REPLACE\n```\n"
    )
    server.script(Turn.rate_limited(retry_after=0.01), Turn.reply(f"The fix:\n\n{blocks}"))
    run = aider_run(tmp_path, server, "--edit-format", "diff", "src/slug.py")
    outcome = run.run()
    assert_merged(outcome, run.repo)
    assert len(server.completions) == 2  # the 429, then the answer


def test_aider_rate_limited_is_lost_to_quota_and_refunded(tmp_path: Path) -> None:
    require("aider")
    with ModelServer(when_exhausted=Turn.rate_limited(retry_after=0.01)) as server:
        run = aider_run(tmp_path, server)
        run.env["PYTHONPATH"] = str(RETRY_CEILING)
        outcome = run.run()
    assert_refunded_quota(outcome)
    assert "rate limit" in outcome.payload["reason"].lower()
    assert len(server.completions) > 9  # aider's own retries, each with the client's


def test_aider_context_overflow_is_a_context_budget_stop(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(Turn.context_exceeded())
    outcome = aider_run(tmp_path, server).run()
    assert outcome.seat["stop_reason"] == "context_budget"
    assert "halt-budget-exhausted" in [h["name"] for h in outcome.payload["halts"]["warnings"]]


# The brief: the scripted model knows only what aider sent it ------------------------------

NO_CHANGE = "test_digits already passes at HEAD; slugify keeps digits (src/slug.py line 2)"


def test_aider_claims_a_verified_no_op_as_its_brief_says(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(claim_no_change(NO_CHANGE))
    run = aider_run(tmp_path, server)
    run.repo = fixed_repo(tmp_path / "fixed")
    base = head(run.repo)
    outcome = run.run()
    assert_verified_noop(outcome, run.repo, base, NO_CHANGE)
    assert outcome.payload["coder_report"]["summary"] == f"NO CHANGE NEEDED: {NO_CHANGE}"
    # The brief reached the model as aider's read-only conventions file.
    first = request_text(server.completions[0])
    assert "The rules of this task (assay)" in first and "aider.conventions.md" in first
    assert not list(run.repo.root.glob("*.md"))  # the brief is not in the candidate


CONTRADICTION = "test_digits wants digits kept; the task text says drop them"


def bash_block(command: str) -> Turn:
    """The reply the aider brief asks for: the halt command alone in a ```bash block."""
    return Turn.reply(f"```bash\n{command}\n```\n")


def test_aider_proposes_the_halt_its_brief_names_and_assay_fires_it(
    tmp_path: Path, server: ModelServer
) -> None:
    # aider itself runs no command from a reply: --yes-always answers "n" to "Run shell
    # command?" (aider 0.86.2, base_coder.handle_shell_commands asks with
    # explicit_yes_required=True). The adapter fires the halt the reply proposed.
    server.script(fire_halt("halt-spec-contradiction", CONTRADICTION, bash_block))
    # In aider's "whole" edit format (its choice for an unknown model) every fenced block is a
    # file listing; in the diff formats a ```bash block is a suggested shell command.
    run = aider_run(tmp_path, server, "--edit-format", "diff")
    base = head(run.repo)
    outcome = run.run()
    assert_halted(outcome, run.repo, "halt-spec-contradiction", base, CONTRADICTION)
    # The scripted model read the command from the brief aider sent as its conventions file.
    first = request_text(server.completions[0])
    assert "aider.conventions.md" in first and "alone in a ```bash block" in first
    assert len(server.completions) == 1
    history = run.seat_log(outcome, "aider.chat.history.md")
    assert "> Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: n" in history
    assert "Running assay" not in run.seat_log(outcome, "aider.log")  # aider ran nothing
