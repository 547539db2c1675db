"""The environment a coder or validator process gets: an allowlist, never the operator's shell.

A token in the operator's shell must not leak into an agent's process unless the contract
says so. The child gets PATH, HOME, locale and temp settings, the named credential variables
of its own coder kind, and whatever the contract declares under ``env:``.

Every credential a coder or judge needs is read from the operator's environment here, under
the names :func:`credential_variables` gives for its kind and settings (``api_key_env``):
:func:`agent_environment` for a process assay starts (a coder, a CLI judge),
:func:`model_environment` for a model assay calls itself (the llm coder, the ``judge``
validator, blind LLM judges). :func:`contract_leak` refuses a contract that would hand one
of assay's own secrets (:mod:`assay.adapters.assay_secrets`) to any of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from assay.adapters.assay_secrets import assay_secrets

if TYPE_CHECKING:
    from assay.core.contract import Contract

BASE_ALLOWLIST: frozenset[str] = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG", "LANGUAGE"}
)
_LOCALE_PREFIX = "LC_"

# Each coder kind's own credential and endpoint variables (from each tool's documentation).
CODER_CREDENTIALS: dict[str, frozenset[str]] = {
    "claude": frozenset(
        {
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_MODEL",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
            "CLAUDE_CONFIG_DIR",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        }
    ),
    "codex": frozenset({"OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME"}),
    "aider": frozenset({"OPENAI_API_KEY", "OPENAI_API_BASE", "ANTHROPIC_API_KEY", "AIDER_MODEL"}),
    "mini": frozenset(
        {"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "MSWEA_MODEL_NAME"}
    ),
    "llm": frozenset(),  # our own loop: the key is read by assay, not given to a child
    "command": frozenset(),
    "replay": frozenset(),
}

# Kinds whose model assay calls itself (the llm coder, LLM judges): the key is read by assay's
# own client and never handed to a child process.
MODEL_CALLED_BY_ASSAY: frozenset[str] = frozenset({"llm"})
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"


def credential_variables(kind: str, settings: Mapping[str, object] | None = None) -> frozenset[str]:
    """The operator's variables a coder or judge of ``kind`` needs, given its ``settings``.

    A kind's own documented variables, plus the variable ``api_key_env`` names; a model assay
    calls itself reads ``$OPENAI_API_KEY`` (or ``api_key_env``) and ``$OPENAI_BASE_URL``.
    """
    names = set(CODER_CREDENTIALS.get(kind, frozenset()))
    key_env = (settings or {}).get("api_key_env")
    if kind in MODEL_CALLED_BY_ASSAY:
        names |= {str(key_env or DEFAULT_API_KEY_ENV), BASE_URL_ENV}
    elif key_env:
        names.add(str(key_env))
    return frozenset(names)


def agent_environment(
    operator_env: Mapping[str, str],
    kind: str,
    settings: Mapping[str, object] | None = None,
    *,
    declared: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a process started for a coder or CLI judge of ``kind``.

    Its own credentials pass through, except for a kind whose model assay calls itself: its
    child processes (the llm coder's commands) never see the key.
    """
    credentials = (
        frozenset() if kind in MODEL_CALLED_BY_ASSAY else credential_variables(kind, settings)
    )
    return child_environment(operator_env, credentials=credentials, declared=declared, extra=extra)


def model_environment(
    operator_env: Mapping[str, str],
    kind: str,
    settings: Mapping[str, object] | None = None,
    *,
    declared: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Where assay's own model client (the llm coder, an LLM judge) reads its API key and
    base URL: the allowlist, the kind's credentials, then the contract's ``env:``."""
    credentials = credential_variables(kind, settings)
    return child_environment(operator_env, credentials=credentials, declared=declared)


def validator_environment(
    operator_env: Mapping[str, str],
    declared: Mapping[str, str] | None = None,
    *,
    repo: Path | None = None,
) -> dict[str, str]:
    """The environment of a command validator: the allowlist and the contract's ``env:``,
    never a coder's credentials; with ``repo``, the repository's own tools first on its PATH
    and assay's virtualenv last (see :mod:`assay.adapters.repo_tools`)."""
    env = child_environment(operator_env, declared=declared)
    if repo is None:
        return env
    from assay.adapters.repo_tools import with_repo_tools

    return with_repo_tools(env, repo)


def child_environment(
    operator_env: Mapping[str, str],
    *,
    credentials: Iterable[str] = (),
    declared: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Build a child's environment from the operator's, keeping only what is allowed.

    ``credentials``: variable names passed through when set (the coder's own keys).
    ``declared``: the contract's ``env:`` block; a value of ``"$NAME"`` passes the operator's
    ``NAME`` through, any other value is set literally.
    ``extra``: variables assay itself sets (``ASSAY_DISPATCH_ID`` and friends).
    assay's own secrets (:mod:`assay.adapters.assay_secrets`) never pass, under any name: a
    run whose contract asks for one is refused when it starts, so this only drops what
    reached here another way.
    """
    secrets = assay_secrets(operator_env)
    allowed = (set(BASE_ALLOWLIST) | set(credentials)) - secrets.names
    env = {
        key: value
        for key, value in operator_env.items()
        if key in allowed or key.startswith(_LOCALE_PREFIX)
    }
    for key, value in (declared or {}).items():
        if value.startswith("$") and len(value) > 1:
            source = value[1:]
            if source in operator_env and source not in secrets.names:
                env[key] = operator_env[source]
        else:
            env[key] = value
    env = {key: value for key, value in env.items() if secrets.leak(value) is None}
    env.update(extra or {})
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def contract_leak(contract: Contract, operator_env: Mapping[str, str]) -> str | None:
    """Why ``contract`` would hand one of assay's secrets to a child, or None."""
    secrets = assay_secrets(operator_env)
    for where, name, text in _handed(contract, operator_env):
        if name is not None and name in secrets.names:
            return f"{where} names ${name}, which holds assay's own secret; {_NEVER}"
        found = secrets.leak(text)
        if found is not None:
            return f"{where} holds {found.what}; {_NEVER}"
    return None


_NEVER = "assay never hands its own secrets to a coder, validator or judge"


def _handed(
    contract: Contract, operator_env: Mapping[str, str]
) -> Iterator[tuple[str, str | None, str]]:
    """Everything the contract hands a child: (where, the variable it comes from, its text)."""
    for key, value in contract.env.items():
        if value.startswith("$") and len(value) > 1:
            yield f"env: {key}", value[1:], operator_env.get(value[1:], "")
        else:
            yield f"env: {key}", None, value
    coders = contract.coder if isinstance(contract.coder, list) else [contract.coder]
    judges = contract.judge if isinstance(contract.judge, list) else [contract.judge]
    judges = judges if contract.judges > 0 else []
    specs = [("coder", c.kind.value, c.model_dump(mode="json")) for c in coders]
    specs += [("judge", j.kind.value, j.model_dump(mode="json")) for j in judges if j]
    specs += [
        (f"validator {v.id}", "llm", v.model_dump(mode="json"))
        for v in contract.validators
        if v.api_key_env
    ]
    for role, kind, settings in specs:
        for name in sorted(credential_variables(kind, settings)):
            yield f"the {role}'s credential {name}", name, operator_env.get(name, "")
    for coder in coders:
        command = coder.command if isinstance(coder.command, list) else [coder.command or ""]
        for text in [*command, *coder.args]:
            yield "the coder's command line", None, str(text)
    for validator in contract.validators:
        yield f"validator {validator.id}'s run", None, validator.run or ""
