"""Which model hosts a seat's proxy lets through without the contract naming them."""

from __future__ import annotations

import pytest

from assay.core.contract import Contract, ContractError, parse_contract
from assay.core.egress import AllowRule
from assay.core.egress_providers import provider_rules
from assay.core.vocab import NetworkMode


def hosts(kind: str, settings: dict[str, object] | None = None, **env: str) -> list[str]:
    rules = provider_rules(kind, settings or {}, env)
    return [f"{r.host}:{r.port}" if r.port else r.host for r in rules]


def test_each_agent_reaches_its_default_provider() -> None:
    assert hosts("claude") == ["api.anthropic.com"]
    assert hosts("codex") == ["api.openai.com"]
    assert hosts("aider", {"model": "openrouter/qwen/qwen3"}) == ["openrouter.ai"]
    assert hosts("mini", {"model": "anthropic/claude-sonnet-4-5"}) == ["api.anthropic.com"]
    assert hosts("aider", {"model": "gpt-5"}) == ["api.openai.com"]
    assert hosts("mini", {"model": "claude-sonnet-4-5"}) == ["api.anthropic.com"]


def test_a_base_url_replaces_the_default() -> None:
    assert hosts("claude", ANTHROPIC_BASE_URL="http://127.0.0.1:8123") == ["127.0.0.1:8123"]
    assert hosts("codex", {"base_url": "https://gw.example.com/v1"}) == ["gw.example.com:443"]
    assert hosts("aider", {"model": "gpt-5"}, OPENAI_API_BASE="http://10.0.0.5:4000/v1") == [
        "10.0.0.5:4000"
    ]


def test_cloud_providers_of_claude() -> None:
    assert hosts("claude", CLAUDE_CODE_USE_BEDROCK="1") == ["api.anthropic.com", "*.amazonaws.com"]


@pytest.mark.parametrize("kind", ["llm", "command", "replay"])
def test_kinds_that_start_no_model_client_need_nothing(kind: str) -> None:
    assert hosts(kind, {"base_url": "https://api.openai.com/v1"}) == []


def test_a_url_that_is_not_http_is_ignored() -> None:
    assert hosts("claude", ANTHROPIC_BASE_URL="file:///etc/passwd") == ["api.anthropic.com"]


def test_the_network_shorthand_and_the_policy() -> None:
    assert Contract(task="t", network="none").network.mode is NetworkMode.NONE  # type: ignore[arg-type]
    default = Contract(task="t").network
    assert default.mode is NetworkMode.ON and default.allow == []
    assert default.validators is NetworkMode.NONE
    parsed = parse_contract(
        "task: t\nnetwork:\n  mode: 'on'\n  allow: [pypi.org, 'https://files.example.com']\n"
        "  validators: 'on'\n"
    )
    assert parsed.network.allow == ["pypi.org", "https://files.example.com"]
    assert parsed.network.validators is NetworkMode.ON
    assert AllowRule("pypi.org") in [AllowRule("pypi.org")]


@pytest.mark.parametrize("entry", ["", "bad host", "ftp://x.example", "*", "a.example:99999"])
def test_a_bad_allow_entry_is_refused_with_its_key(entry: str) -> None:
    with pytest.raises(ContractError, match="network"):
        parse_contract(f"task: t\nnetwork:\n  allow: [{entry!r}]\n")


def test_network_host_is_a_mode() -> None:
    assert parse_contract("task: t\nnetwork: host\n").network.mode is NetworkMode.HOST
