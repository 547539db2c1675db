"""What a run needs of a contract, checked when it is parsed so ``contract check`` and ``run``
agree: a contract that parses can run, and one that cannot run is refused with its key and line.

Each function is pure and returns the problem as a sentence, or None when there is none.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

import pathspec

from assay.core.egress import parse_rule
from assay.core.text import address_shown
from assay.core.vocab import CanonicalHalt, CoderKind

__all__ = [
    "REPLAY_STEP_KEYS",
    "SECRET_VARIABLES",
    "allow_problem",
    "base_url_problem",
    "coder_problem",
    "env_problem",
    "key_variable_problem",
    "near_canonical_problem",
    "pattern_problem",
]

REPLAY_STEP_KEYS: frozenset[str] = frozenset({"diff", "script", "report", "summary"})
"""The keys a ``replay`` step may hold (the replay coder plays exactly these)."""

SECRET_VARIABLES: frozenset[str] = frozenset(
    {
        "ASSAY_DATABASE_URL",
        "ASSAY_WEB_TOKEN",
        "ASSAY_TEMPORAL_TLS_KEY",
        "ASSAY_TEMPORAL_CODEC_KEY",
    }
)
"""assay's own variables that hold a secret (the ledger's URL, its password with it; the
dashboard's token; the key that seals Temporal's histories) or point at one (the Temporal
client's private key): whoever holds one can change any task or read every run's contract, so
no coder, validator or judge is ever handed one."""

_NEVER_HANDED = "assay never hands its own secrets to a coder, validator or judge"


def coder_problem(
    kind: CoderKind, *, model: str | None, command: object, steps: list[dict[str, str]]
) -> str | None:
    """What a coder of ``kind`` lacks to run: ``llm`` a model, ``command`` a command line,
    ``replay`` at least one step of known keys. The CLI coders need nothing here."""
    if kind is CoderKind.LLM and not (model or "").strip():
        return "a coder of kind llm needs `model` (the model the endpoint serves)"
    if kind is CoderKind.COMMAND and not _has_command(command):
        return (
            "a coder of kind command needs `command` (a shell string such as "
            '"my-agent --prompt-file {prompt_file}", or a list of arguments)'
        )
    if kind is CoderKind.REPLAY:
        if not steps:
            return "a coder of kind replay needs `steps` (one step per attempt, at least one)"
        for number, step in enumerate(steps, start=1):
            unknown = sorted(set(step) - REPLAY_STEP_KEYS)
            if unknown:
                known = ", ".join(sorted(REPLAY_STEP_KEYS))
                return f"replay step {number} has unknown key(s) {', '.join(unknown)}; use {known}"
            if not step:
                return f"replay step {number} is empty; give diff, script, report or summary"
    return None


def _has_command(command: object) -> bool:
    if isinstance(command, str):
        return bool(command.strip())
    if isinstance(command, list):
        return bool(command) and bool(str(command[0]).strip())
    return False


def env_problem(env: Mapping[str, str]) -> str | None:
    """Why ``env`` cannot be passed to a process: an empty name, or one holding ``=`` (the
    process's environment could not tell the name from the value), or a ``"$NAME"`` that
    passes one of assay's own secrets through. NUL anywhere is refused for all text already."""
    for name, value in env.items():
        if not name:
            return "an environment variable name must not be empty"
        if "=" in name:
            return f"{name!r} is not a valid environment variable name (it contains '=')"
        if value[1:] in SECRET_VARIABLES and value.startswith("$"):
            return f"{name}: {value} holds assay's own secret; {_NEVER_HANDED}"
    return None


def key_variable_problem(name: str | None) -> str | None:
    """Why ``api_key_env`` cannot name ``name``: one of assay's own secrets would be read as
    an API key (sent to the model's endpoint, or handed to the coder)."""
    if name in SECRET_VARIABLES:
        return f"{name} holds assay's own secret; {_NEVER_HANDED}"
    return None


_URL_EXAMPLE = "e.g. http://localhost:8000/v1"


def base_url_problem(url: str | None) -> str | None:
    """Why ``url`` is no model endpoint (``base_url``, ``--base-url``, ``$OPENAI_BASE_URL``):
    not an http(s) URL, no host, a port that is none, a space in it. Caught here, it is the
    user's input to fix, never a run that fails inside the HTTP client."""
    if url is None:
        return None
    got = f"(got {(address_shown(url) if '@' in url else url)!r})"  # never its password
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return f"needs an http:// or https:// URL, {_URL_EXAMPLE} {got}"
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        return f"needs the URL alone, without a space or control character, {_URL_EXAMPLE} {got}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a port that is no number or out of range, a bracket left open
        return f"needs a port from 1 to 65535 after the host, if any, {_URL_EXAMPLE} {got}"
    if not parts.hostname:
        return f"names no host, {_URL_EXAMPLE} {got}"
    if port == 0:
        return f"needs a port from 1 to 65535 after the host, if any, {_URL_EXAMPLE} {got}"
    return None


def pattern_problem(patterns: Iterable[str]) -> str | None:
    """Why a glob cannot be used by the scope check, which reads it as git's wildmatch does."""
    for pattern in patterns:
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except Exception as exc:  # pathspec raises its own errors and re.error alike
            detail = " ".join(str(exc).split()) or type(exc).__name__
            return f"{pattern!r} is not a valid glob pattern: {detail}"
    return None


def near_canonical_problem(names: Iterable[str]) -> str | None:
    """A halt name that is not canonical but is a typo away from one (``halt-scope-breech``):
    it would arm a halt of its own, and a severity meant for the canonical halt is lost."""
    canonical = [halt.value for halt in CanonicalHalt]
    for name in names:
        if name in canonical:
            continue
        close = difflib.get_close_matches(name, canonical, n=1, cutoff=_TYPO_CUTOFF)
        if close:
            return (
                f"{name} is not a canonical halt: did you mean {close[0]}? (a halt of your "
                "own needs a name of its own)"
            )
    return None


# halt-scope-breech, halt-verification-gaps: 0.94, 0.98; halt-budget-exceeded, a halt of its
# own: 0.78.
_TYPO_CUTOFF = 0.85


def allow_problem(rules: Sequence[str]) -> str | None:
    """Why an entry of ``network.allow`` is not a host rule (see :func:`parse_rule`)."""
    for text in rules:
        try:
            parse_rule(text)
        except ValueError as exc:
            return f"network.allow: {exc}"
    return None
