"""The hosts a coder or judge must reach to call its model: what the seat's proxy lets through
without the contract naming it.

A base URL (the ``base_url`` setting, or an endpoint variable in the process's environment)
replaces the kind's default provider: a gateway or a local model server is then the only model
host. Without one, the default follows the kind (claude: Anthropic; codex: OpenAI) or, for the
litellm-based agents (aider, mini), the model name's provider. Kinds whose model assay calls
itself (llm) or that call none (command, replay) need nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from assay.core.egress import AllowRule, parse_rule, rule_for_url

# Variables that point a program at its model endpoint (each tool's documentation).
ENDPOINT_VARIABLES = (
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "ANTHROPIC_VERTEX_BASE_URL",
)
ANTHROPIC = "api.anthropic.com"
OPENAI = "api.openai.com"


class LitellmProvider(NamedTuple):
    """A provider litellm (aider, mini) routes ``provider/model`` names to: the host it calls
    and the variable it reads the key from."""

    host: str
    key: str


# litellm's provider prefixes (``provider/model``), each with its host and key variable.
LITELLM_PROVIDERS: Mapping[str, LitellmProvider] = {
    "anthropic": LitellmProvider(ANTHROPIC, "ANTHROPIC_API_KEY"),
    "openai": LitellmProvider(OPENAI, "OPENAI_API_KEY"),
    "openrouter": LitellmProvider("openrouter.ai", "OPENROUTER_API_KEY"),
    "gemini": LitellmProvider("generativelanguage.googleapis.com", "GEMINI_API_KEY"),
    "deepseek": LitellmProvider("api.deepseek.com", "DEEPSEEK_API_KEY"),
    "groq": LitellmProvider("api.groq.com", "GROQ_API_KEY"),
    "mistral": LitellmProvider("api.mistral.ai", "MISTRAL_API_KEY"),
    "xai": LitellmProvider("api.x.ai", "XAI_API_KEY"),
    "together_ai": LitellmProvider("api.together.xyz", "TOGETHERAI_API_KEY"),
    "fireworks_ai": LitellmProvider("api.fireworks.ai", "FIREWORKS_AI_API_KEY"),
    "cohere": LitellmProvider("api.cohere.ai", "COHERE_API_KEY"),
}
_AGENT_DEFAULTS: Mapping[str, tuple[str, ...]] = {"claude": (ANTHROPIC,), "codex": (OPENAI,)}
_LITELLM_KINDS = frozenset({"aider", "mini"})


def provider_rules(
    kind: str, settings: Mapping[str, object], env: Mapping[str, str]
) -> list[AllowRule]:
    """The model hosts a process of ``kind`` with ``settings`` and ``env`` calls, as rules."""
    if kind not in _AGENT_DEFAULTS and kind not in _LITELLM_KINDS:
        return []
    urls = [settings.get("base_url"), *(env.get(name) for name in ENDPOINT_VARIABLES)]
    endpoints = [rule for url in urls if isinstance(url, str) for rule in _url_rule(url)]
    if endpoints:
        return _unique(endpoints)
    hosts = list(_AGENT_DEFAULTS.get(kind, ()))
    if kind == "claude":
        hosts += _cloud_hosts(env)
    if kind in _LITELLM_KINDS:
        hosts += _litellm_hosts(settings.get("model"))
    return _unique(parse_rule(host) for host in hosts)


def _url_rule(url: str) -> list[AllowRule]:
    rule = rule_for_url(url.strip())
    return [rule] if rule is not None else []


def _cloud_hosts(env: Mapping[str, str]) -> list[str]:
    """Claude Code on Bedrock or Vertex calls the cloud's endpoints instead."""
    hosts = []
    if env.get("CLAUDE_CODE_USE_BEDROCK"):
        hosts.append("*.amazonaws.com")
    if env.get("CLAUDE_CODE_USE_VERTEX"):
        hosts.append("*.googleapis.com")
    return hosts


def litellm_provider(model: object) -> str | None:
    """The provider litellm routes a model name to (a key of :data:`LITELLM_PROVIDERS`):
    ``provider/model`` by its prefix, a bare name by its family; None when the name says
    neither (no model: aider and mini pick one themselves)."""
    name = model.strip().lower() if isinstance(model, str) else ""
    prefix, _, rest = name.partition("/")
    if rest and prefix in LITELLM_PROVIDERS:
        return prefix
    if name.startswith("claude"):
        return "anthropic"
    if name.startswith(("gpt", "o1", "o3", "o4", "chatgpt", "codex")):
        return "openai"
    return None


def _litellm_hosts(model: object) -> list[str]:
    """litellm routes ``provider/model`` to the provider; a bare name by its family."""
    provider = litellm_provider(model)
    if provider is not None:
        return [LITELLM_PROVIDERS[provider].host]
    return [ANTHROPIC, OPENAI]  # aider's and mini's defaults


def _unique(rules: Iterable[AllowRule]) -> list[AllowRule]:
    return list(dict.fromkeys(rules))
