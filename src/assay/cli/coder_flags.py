"""The coder flags of ``assay run`` and ``assay task add`` checked together, before a contract
is built: one kind, the settings that kind acts on, and nothing it would silently ignore.

``--coder KIND[:MODEL]``, ``--coder-command``, ``--model``, ``--base-url``, ``--api-key-env``.
Which settings a kind acts on is its adapter's own ``honoured_settings`` (the list a contract's
ignored settings are warned about from), so the flags and the run never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assay.cli.workspace import fail
from assay.core.vocab import CoderKind

# A flag that sets a coder setting: (flag, the CoderSpec field it sets).
SETTING_FLAGS: tuple[tuple[str, str], ...] = (
    ("--model", "model"),
    ("--base-url", "base_url"),
    ("--api-key-env", "api_key_env"),
    ("--coder-command", "command"),
)
FLAG_KINDS: tuple[CoderKind, ...] = tuple(k for k in CoderKind if k is not CoderKind.REPLAY)
"""The kinds a coder flag can name (replay needs its steps, from a contract file)."""

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
LLM_EXAMPLE = "--coder llm --model gpt-5-mini --base-url http://localhost:8000/v1"


@dataclass(frozen=True)
class CoderFlags:
    """What the coder flags say, as given (None: not given)."""

    coder: str | None = None
    command: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None

    def given(self) -> dict[str, str]:
        """The settings given, by CoderSpec field."""
        values = {
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "command": self.command,
        }
        return {field: value for field, value in values.items() if value is not None}


def checked_coder(flags: CoderFlags) -> tuple[CoderKind, str | None]:
    """The coder's kind and model the flags name, or exit 2 saying which flag to change."""
    kinds = ", ".join(k.value for k in FLAG_KINDS)
    raw_kind, colon, shorthand = (flags.coder or "").partition(":")
    kind_text, shorthand = raw_kind.strip(), shorthand.strip()
    if flags.coder is not None and not kind_text:
        fail(f"--coder needs a kind: one of {kinds} (optionally KIND:MODEL)")
    if kind_text == CoderKind.REPLAY.value:
        fail("the replay coder needs steps: give it in a contract file (--contract)")
    if kind_text and kind_text not in {k.value for k in CoderKind}:
        fail(f"unknown coder kind {kind_text!r}: use one of {kinds}")
    if kind_text:
        kind = CoderKind(kind_text)
    else:  # as contract_from_flags chooses: the command coder when a command line is given
        kind = CoderKind.COMMAND if flags.command is not None else CoderKind.CLAUDE
    model = _model(flags, kind, shorthand if colon else None)
    for flag, field in SETTING_FLAGS:
        if field in flags.given() and field not in _honoured(kind):
            fail(_not_honoured(flag, field, kind))
    if kind is CoderKind.COMMAND and not (flags.command or "").strip():
        fail('--coder command needs --coder-command "the command line to run"')
    if kind is CoderKind.LLM and model is None:
        fail(f"--coder llm needs --model NAME (the model its endpoint serves), e.g. {LLM_EXAMPLE}")
    if flags.base_url is not None:
        from assay.core.contract_rules import base_url_problem

        if (problem := base_url_problem(flags.base_url)) is not None:
            fail(f"--base-url {problem}")
    if flags.api_key_env is not None:
        _check_key_variable(flags.api_key_env)
    return kind, model


def _check_key_variable(name: str) -> None:
    from assay.core.contract_rules import key_variable_problem

    if not _VARIABLE.fullmatch(name):
        fail(
            "--api-key-env names the environment variable that holds the key, e.g. "
            f"OPENAI_API_KEY (got {name!r})"
        )
    problem = key_variable_problem(name)
    if problem is not None:
        fail(f"--api-key-env {problem}")


def _model(flags: CoderFlags, kind: CoderKind, shorthand: str | None) -> str | None:
    """The model of ``--model`` or of ``--coder KIND:MODEL``; both must agree."""
    given = flags.model.strip() if flags.model is not None else None
    if given == "":
        fail("--model needs a model name, e.g. --model gpt-5-mini")
    if shorthand == "":
        fail(f"--coder {kind.value}: names no model after the colon: give --coder KIND:MODEL")
    if given is not None and shorthand is not None and given != shorthand:
        fail(
            f"--coder {kind.value}:{shorthand} and --model {given} name different models; "
            "give the model once"
        )
    return given if given is not None else shorthand


def _honoured(kind: CoderKind) -> frozenset[str]:
    from assay.adapters.coders import get_coder

    return get_coder(kind.value).honoured_settings


def _not_honoured(flag: str, field: str, kind: CoderKind) -> str:
    users = [k.value for k in FLAG_KINDS if field in _honoured(k)]
    if len(users) == 1:
        return f"{flag} is for --coder {users[0]}; the {kind.value} coder does not use it"
    listed = ", ".join(users[:-1]) + f" or {users[-1]}"
    return f"{flag} is for --coder {listed}; the {kind.value} coder does not use it"
