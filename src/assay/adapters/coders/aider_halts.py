"""The halts an aider model proposed in its replies, fired by assay after aider exits.

Aider cannot run a command unattended: ``--yes-always`` answers "n" to "Run shell command?"
(``Coder.handle_shell_commands`` in Aider-AI/aider ``aider/coders/base_coder.py`` asks with
``explicit_yes_required=True``; checked with aider 0.86.2). So the brief tells an aider model
to write the halt command alone in a ```bash block of its reply, and the adapter, once aider
has exited, reads those blocks from aider's chat history file and fires each halt itself,
through the same operation ``assay halt check --fire`` performs (``halt_ops.check``).

Nothing is ever run: a line is read with :mod:`shlex` and accepted only when it is exactly
``assay halt check --dispatch-id ID --condition NAME --fire --evidence TEXT`` (the flags in any
order, ``--flag=value`` too), ``ID`` being ``$ASSAY_DISPATCH_ID`` or this dispatch's literal id.
A chain (``;``, ``&&``, ``|``), a redirection, a subshell, another flag, another dispatch id or
a missing ``--evidence`` makes the line no halt at all. The evidence is taken literally: a
``$(…)`` or ``$VAR`` in it is text, never expanded. Only code blocks of the model's own replies
count (aider's history prefixes the user's messages with ``#### `` and its own output with
``> ``), so a command quoted in the task, in prose or in a tool's output never fires.

In aider's diff edit formats (``diff``, ``diff-fenced``: its choice for most known models) a
```bash block is a suggested shell command, which aider declines and leaves alone. In its
``whole`` format (its choice for a model it does not know) every fenced block is a file
listing: a reply that is only the block gets "No filename provided" and is asked again, and
with exactly one file in the chat aider would write the command into that file. The halt
still fires from the history either way; the interop test runs ``--edit-format diff``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

DISPATCH_VARIABLE = "ASSAY_DISPATCH_ID"
MAX_PROPOSALS = 16  # more distinct halts than any contract arms: the rest is noise, not fired
_SHELLS = frozenset({"bash", "sh", "shell", "zsh"})  # the fences aider itself reads as commands
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_OPERATORS = frozenset(";&|<>()")  # outside quotes, each makes a line more than one command
_VALUE_FLAGS = frozenset({"--dispatch-id", "--condition", "--evidence"})
_CONDITION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class ProposedHalt:
    """One halt command a reply proposed: the halt's name and the evidence, as written."""

    condition: str
    evidence: str


@dataclass(frozen=True)
class Proposals:
    """What the replies proposed: the halts to fire, and how many other commands were not run."""

    halts: tuple[ProposedHalt, ...] = ()
    ignored: tuple[str, ...] = field(default=())


def model_replies(history: str | None) -> list[str]:
    """The model's replies in aider's chat history file, in order.

    The history (``--chat-history-file``) is Markdown: ``#### `` starts a user message line,
    ``> `` an aider notice or tool output, ``# aider chat started`` a session; every other line
    is the model's reply, unwrapped (the console wraps it at the terminal width).
    """
    replies: list[list[str]] = []
    current: list[str] | None = None
    for line in (history or "").splitlines():
        if line.startswith(("#### ", "> ", "# aider chat started")) or line in ("####", ">"):
            current = None
            continue
        if current is None:
            if not line.strip():
                continue
            current = []
            replies.append(current)
        current.append(line)
    texts = ("\n".join(reply).strip() for reply in replies)
    return [text for text in texts if text]


def shell_blocks(reply: str) -> list[str]:
    """The bodies of the ```bash (sh, shell, zsh) code blocks of one reply; an unclosed block
    runs to the reply's end, as a Markdown reader shows it."""
    blocks: list[str] = []
    body: list[str] | None = None  # inside a block (of any language)
    fence, keep = "", False
    for line in reply.splitlines():
        stripped = line.strip()
        if body is None:
            if match := _FENCE.match(stripped):
                body, fence = [], match.group("fence")
                keep = match.group("info").lower() in _SHELLS
            continue
        if len(stripped) >= len(fence) and set(stripped) == {fence[0]}:  # the closing fence
            if keep:
                blocks.append("\n".join(body))
            body = None
            continue
        body.append(line)
    if body is not None and keep:
        blocks.append("\n".join(body))
    return blocks


def command_lines(block: str) -> list[str]:
    """The commands of a shell block: backslash-newline continuations joined, blank lines and
    comments left out."""
    joined = re.sub(r"\\\n", " ", block)
    lines = (line.strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def parse_halt_command(line: str, dispatch_id: str) -> ProposedHalt | str:
    """The halt ``line`` fires for ``dispatch_id``, or why it is no such command."""
    text, operator = _read_quotes(line)
    if operator:
        return f"{operator!r} outside quotes: a chain, pipe, redirection or subshell"
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # a "#" inside the evidence is text
    try:
        tokens = list(lexer)
    except ValueError as exc:  # an unclosed quote
        return f"not a command: {exc}"
    if tokens[:3] != ["assay", "halt", "check"]:
        return "not an `assay halt check` command"
    values: dict[str, str] = {}
    fire = False
    rest = iter(tokens[3:])
    for token in rest:
        flag, eq, value = token.partition("=")
        if token == "--fire":
            if fire:
                return "--fire given twice"
            fire = True
            continue
        if flag not in _VALUE_FLAGS:
            return f"{token!r} is not part of a halt command"
        if not eq:
            value = next(rest, "")
            if not value or value == "--fire" or value.partition("=")[0] in _VALUE_FLAGS:
                return f"{flag} has no value"
        if flag in values:
            return f"{flag} given twice"
        values[flag] = value
    if not fire:
        return "not a firing (no --fire)"
    given_id = values.get("--dispatch-id")
    if given_id not in (f"${DISPATCH_VARIABLE}", f"${{{DISPATCH_VARIABLE}}}", dispatch_id):
        return "not this dispatch's id" if given_id else "no --dispatch-id"
    condition = values.get("--condition", "")
    if not _CONDITION.match(condition):
        return "no valid --condition"
    evidence = values.get("--evidence", "")
    if not evidence.strip():
        return "no --evidence"
    return ProposedHalt(condition=condition, evidence=evidence)


def proposed_halts(history: str | None, dispatch_id: str) -> Proposals:
    """Every halt the model's replies proposed for ``dispatch_id`` (each halt once, the first
    proposal's evidence), and a reason for each other command, which is never run. Pure."""
    halts: dict[str, ProposedHalt] = {}
    ignored: list[str] = []
    for reply in model_replies(history):
        for block in shell_blocks(reply):
            for line in command_lines(block):
                parsed = parse_halt_command(line, dispatch_id)
                if isinstance(parsed, str):
                    ignored.append(f"{_short(line)}: {parsed}")
                elif parsed.condition not in halts and len(halts) < MAX_PROPOSALS:
                    halts[parsed.condition] = parsed
    return Proposals(halts=tuple(halts.values()), ignored=tuple(ignored))


def fire_proposed(proposals: Proposals, dispatch_id: str, state_dir: Path) -> list[str]:
    """Fire each proposed halt as ``assay halt check --fire`` would; what happened, in words
    (for the dispatch's warnings). The engine's halt watch then sees and journals each firing
    in the state file, as it does for any coder's."""
    from assay.adapters.store import halt_ops

    notes: list[str] = []
    for halt in proposals.halts:
        doc, _ = halt_ops.check(
            dispatch_id, halt.condition, state_dir, fire=True, evidence=halt.evidence
        )
        if doc.get("fired") is True:
            notes.append(f"aider proposed halt {halt.condition} in a reply; assay fired it")
        else:
            details = "; ".join(str(v.get("detail", "")) for v in doc.get("violations", []))
            notes.append(
                f"aider proposed halt {halt.condition} in a reply; it was not fired: {details}"
            )
    if proposals.ignored:
        notes.append(
            f"aider suggested {len(proposals.ignored)} shell command(s) assay did not run (it "
            "runs only an `assay halt check … --fire` command): "
            + " | ".join(proposals.ignored[:5])
        )
    return notes


def _read_quotes(line: str) -> tuple[str, str]:
    """``line`` as shlex should read it, and the first shell operator outside quotes ("" when
    none: a quoted ``;`` is text, an unquoted one chains a command).

    Each backslash before ``$`` or a backquote inside double quotes is dropped: sh drops it,
    shlex would keep it. All else is left to shlex, so the evidence is exactly what sh would
    have passed (the brief quotes it that way)."""
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(line):
        char = line[index]
        pair = line[index : index + 2]
        if quote == "'":
            quote = "" if char == "'" else quote
        elif char == "\\" and len(pair) == 2:
            out.append(pair[1] if quote == '"' and pair[1] in "$`" else pair)
            index += 2
            continue
        elif char in "'\"":
            quote = "" if quote == char else (quote or char)
        elif not quote and char in _OPERATORS:
            return line, char
        out.append(char)
        index += 1
    return "".join(out), ""


def _short(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"
