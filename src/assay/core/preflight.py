"""What a task's settings need from the machine that runs them, as far as words can say it.

The preflight (:mod:`assay.adapters.preflight`) looks at the machine: which programs are on
the PATH and visible inside the sandbox, which variables are set, whether the base branch is
clean. This module holds the parts that need no looking: which program each coder kind runs
and how to install it, which API key a coder of a kind and model reads, the program words of
a shell command line, and how each problem is said (one line each).

A problem found here is the operator's setting, never a machine fault: a run that meets one
is held with the message (settle's ``unrunnable`` row), not refunded and retried.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence

from assay.core.egress_providers import LITELLM_PROVIDERS, litellm_provider

# The coder kinds that run a program of their own: kind -> (program, how to install it).
PROGRAMS: Mapping[str, tuple[str, str]] = {
    "claude": ("claude", "npm install -g @anthropic-ai/claude-code"),
    "codex": ("codex", "npm install -g @openai/codex"),
    "aider": ("aider", "pip install aider-chat"),
    "mini": ("mini", "pip install mini-swe-agent"),
}

# Claude Code authenticates with one of these (its config folder is private to the seat, so
# an operator's `claude login` never reaches it), or through a cloud's own credentials.
CLAUDE_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
CLAUDE_CLOUDS = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")
OPENAI_KEY = "OPENAI_API_KEY"
ANTHROPIC_KEY = "ANTHROPIC_API_KEY"
# The variable each litellm-based kind also reads its model name from.
_MODEL_VARIABLES: Mapping[str, str] = {"aider": "AIDER_MODEL", "mini": "MSWEA_MODEL_NAME"}
_FALSE = frozenset({"", "0", "false", "no", "off"})

CLAUDE_SETTING = (
    f"set {CLAUDE_KEYS[0]} (or {CLAUDE_KEYS[1]}, or {' / '.join(CLAUDE_CLOUDS)} for Claude on "
    "Bedrock / Vertex); assay gives claude a private config folder, so a `claude login` on "
    "this machine is never used"
)


UNRUNNABLE = "this machine cannot run the task as set"


def unrunnable_reason(problems: Sequence[str]) -> str:
    """Why a task this machine cannot run is held (its hold reason, its run's reason): every
    problem, in one line."""
    return f"{UNRUNNABLE}: {'; '.join(problems)}"[:4000]


def install_hint(kind: str) -> str:
    """How to install the program a coder of ``kind`` runs ("" for a kind that runs none)."""
    return PROGRAMS[kind][1] if kind in PROGRAMS else ""


def missing_program(program: str, install: str = "") -> str:
    """A program that is not on the PATH the process gets."""
    how = f"install it with `{install}`" if install else "install it"
    return f"{program} not found on PATH: {how}"


def needed_keys(kind: str, settings: Mapping[str, object], env: Mapping[str, str]) -> list[str]:
    """The variables one of which a coder (or CLI judge) of ``kind`` with ``settings`` reads
    its API key from, given the environment ``env`` it gets; [] when it needs none (or the
    settings do not say which: a model assay cannot place is not guessed at)."""
    if kind == "claude":
        if any(env.get(name, "").strip().lower() not in _FALSE for name in CLAUDE_CLOUDS):
            return []  # Bedrock or Vertex: the cloud's own credentials
        return list(CLAUDE_KEYS)
    if kind == "codex":
        named = settings.get("api_key_env")
        base_url = settings.get("base_url") or env.get("OPENAI_BASE_URL")
        # A base URL is a provider of assay's making, reading `api_key_env`; without one codex's
        # own OpenAI provider reads OPENAI_API_KEY.
        return [str(named)] if base_url and isinstance(named, str) and named else [OPENAI_KEY]
    if kind in _MODEL_VARIABLES:
        model = settings.get("model") or env.get(_MODEL_VARIABLES[kind])
        if not model:
            return [ANTHROPIC_KEY, OPENAI_KEY]  # aider and mini choose by the key they find
        provider = litellm_provider(model)
        return [LITELLM_PROVIDERS[provider].key] if provider is not None else []
    return []


def key_problem(
    who: str,
    kind: str,
    settings: Mapping[str, object],
    env: Mapping[str, str],
    *,
    passed: Collection[str] = (),
) -> str | None:
    """What ``who`` (a coder or CLI judge of ``kind``) lacks when none of its key variables
    is set in ``env``, the environment it gets; None when one is. ``passed``: the variables
    the environment policy hands it from the operator's shell (any other must be given in
    the contract's ``env:``)."""
    names = needed_keys(kind, settings, env)
    if not names or any(env.get(name, "").strip() for name in names):
        return None
    if kind == "claude":
        return f"{who}: no API key: {CLAUDE_SETTING}"
    listed = " or ".join(names)
    model = settings.get("model")
    where = f" for model {model}" if isinstance(model, str) and model else ""
    hint = ""
    unpassed = [name for name in names if name not in passed]
    if unpassed and len(unpassed) == len(names):
        name = unpassed[0]
        hint = f", and pass it to the coder with `env: {{{name}: ${name}}}` in the contract"
    elif kind == "codex":
        hint = " (or name another variable with `api_key_env:` beside a `base_url:`)"
    return f"{who}: no API key{where}: set {listed}{hint}"


def login_asked(who: str) -> str:
    """A program that found no usable key and asked for a login (which a seat never uses)."""
    if who == "claude" or who.startswith("claude:"):
        return f"{who}: no usable API key (it asked for a login): {CLAUDE_SETTING}"
    return (
        f"{who}: no usable API key (it asked for a login, which assay never uses: each program "
        "runs with a private config folder): set its API key variable"
    )


def dirty_problem(branch: str, paths: Sequence[str], *, shown: int = 10) -> str:
    """A base branch with uncommitted changes, which `land: merge` never touches."""
    named = ", ".join(paths[:shown])
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return (
        f"land: merge lands on {branch}, whose checkout has uncommitted changes to {named}{more}:"
        " commit or stash them first, or land on a branch (--land branch)"
    )


# Words the shell itself answers, and what the word after them is.
_LEADS_TO_COMMAND = frozenset({"{", "time", "exec"})
# After these the line's success no longer needs every program it names (`if`, a loop, a
# `case`: a branch may not run), so nothing after them is named.
_COMPOUND = frozenset({"if", "while", "until", "case", "for", "select", "function"})
# A chain with one of these tests whether something is there (`command -v ruff && ruff`), or
# succeeds without its program (`! x`, `x || echo skipped`): none of its programs is required.
_GUARDS = frozenset({"command", "which", "type", "hash", "test", "[", "[[", "!"})
_SHELL_ITSELF = frozenset(
    {
        "fi", "done", "esac", "}", "]]", "in", ".", ":", "alias", "break", "builtin", "cd",
        "continue", "declare", "echo", "eval", "exit", "export", "false", "getopts", "local",
        "printf", "pwd", "read", "readonly", "return", "set", "shift", "source", "trap", "true",
        "ulimit", "umask", "unalias", "unset", "wait",
    }
)  # fmt: skip
_SEPARATING = frozenset(";&|()")  # a token of only these ends a command (runs group: ");")
_STARTING = frozenset(";&|(")
_REDIRECT = re.compile(r"^[0-9]*(?:[<>]+&?|&>>?)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_EXPANDS = re.compile(r"[$`*?\[~{}]")


def program_words(line: str) -> list[str]:
    """The programs a shell command line cannot succeed without, as written (``pytest``,
    ``./fix.sh``, ``/opt/x/bin/lint``), in order: what the shell would look up on the PATH or
    run by its path. Left out, so that nothing is named that the line may well do without:
    words the shell answers itself (builtins, keywords) or would expand (``$X``, globs, ``~``);
    a chain that guards or falls back (``command -v ruff && ruff check .``, ``ruff check . ||
    true``, ``! x``); everything from an ``if``, a loop or a ``case`` on; and a line that
    defines a function or holds a here-document."""
    if "()" in line or "<<" in line or re.search(r"(^|[\s;&|])function\s", line):
        return []  # a function, a here-document: not read
    # A newline ends a command as `;` does (one inside quotes stays inside its word).
    line = line.replace("\\\n", " ").replace("\n", ";")
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: the shell will say so itself
        return []
    found: list[str] = []
    chain: list[str] = []  # the program words of the current and-or chain
    optional = False  # the chain guards or falls back: none of its words is required

    def close_chain() -> None:
        nonlocal chain, optional
        if not optional:
            found.extend(word for word in chain if word not in found)
        chain, optional = [], False

    at_start = True
    redirect_target = False
    for token in tokens:
        if set(token) <= _SEPARATING:
            if "||" in token:
                optional = True
            elif ";" in token or token.strip("()") == "&":  # the chain ends
                close_chain()
            # `;`, `&`, `|` and `(` start a command; a `)` only ends one (`$(dirname x)/y`
            # goes on as one word), and `$((1+2))` is arithmetic.
            at_start = bool(set(token) & _STARTING) and "((" not in token
            redirect_target = False
            continue
        if redirect_target:
            redirect_target = False
            continue
        if _REDIRECT.match(token):
            redirect_target = True
            continue
        if not at_start:
            continue
        if _ASSIGNMENT.match(token) or token in _LEADS_TO_COMMAND:
            continue  # the command word comes next
        at_start = False
        if token in _COMPOUND:
            break
        if token in _GUARDS:
            optional = True
        elif not (token in _SHELL_ITSELF or token.startswith("-") or _EXPANDS.search(token)):
            chain.append(token)
    close_chain()
    return found
