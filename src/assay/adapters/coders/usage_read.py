"""Reading a coder program's usage reports as they arrive (pure: text in, figures out).

Each reader takes the program's output in chunks of any size, as a log file grows, and says at
any moment the dispatch's running total so far (:class:`UsageFigures`, tokens in and out
apart). The adapters' final parsers feed the whole output through the same reader, so what
was journaled while a program ran and what its dispatch result says come from one reading.

What each program reports (checked against the versions ``make agents`` installs):

- claude: :mod:`assay.adapters.coders.claude_usage`.
- codex 0.171 (stdout, ``exec --json``): ``turn.completed`` gives the turn's ``usage`` once
  the turn ended; ``exec`` runs one turn, so nothing arrives before the end. Its session file
  (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``) gets a
  ``token_usage_record`` (``response_id``, that call's ``usage``) after every model call, and
  ``turn_context`` names the model. No cost anywhere.
- aider 0.86.2 (stdout): one ``Tokens: 2.3k sent, 1.1k cache write, 181 received.`` line per
  reply, with ``Cost: $0.0076 message, $0.02 session.`` after it (on the next line when both
  cache figures are given) for a priced model; ``Model: X with ... edit format`` names it.
- mini-swe-agent 2.4.6: its trajectory file, rewritten after every step, holds
  ``info.model_stats`` (``instance_cost``, ``api_calls``), every response's ``usage`` and the
  model name under ``info.config.model``; its console prints only a cost rounded to cents.
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, TypeVar

from assay.core.usage import UsageFigures

_LINE_END = re.compile(r"\r\n|\r|\n")
# A line longer than this is not a usage report; it is dropped, not kept growing in memory.
MAX_LINE_CHARS = 4 * 1024 * 1024


class LineReader(ABC):
    """Output in chunks of any size, read a whole line at a time (``\\n``, ``\\r\\n`` or a
    bare ``\\r`` ends one, as Python reads text). A line is read once it has ended, the last
    one once :meth:`close` says the output has."""

    def __init__(self) -> None:
        self._partial = ""
        self._overlong = False

    def feed(self, text: str) -> None:
        if not text:
            return
        pieces = _LINE_END.split(self._partial + text)
        self._partial = pieces.pop()
        for piece in pieces:
            if self._overlong:
                self._overlong = False  # the rest of a dropped line
            elif piece:
                self.line(piece)
        if len(self._partial) > MAX_LINE_CHARS:
            self._partial, self._overlong = "", True

    def close(self) -> None:
        partial, self._partial = self._partial, ""
        if partial and not self._overlong:
            self.line(partial)
        self._overlong = False

    @abstractmethod
    def line(self, text: str) -> None:
        """Read one whole line of the program's output."""

    @abstractmethod
    def figures(self) -> UsageFigures | None:
        """The running total read so far (None: nothing reported yet)."""

    def settling(self) -> bool:
        """Whether a call is being printed whose final figures are still to come."""
        return False


R = TypeVar("R", bound=LineReader)


def read_all(reader: R, text: str) -> R:
    """``reader`` fed the whole of ``text`` (then closed), for a final parse."""
    reader.feed(text)
    reader.close()
    return reader


# -- codex --------------------------------------------------------------------------------------

_THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


class CodexEvents(LineReader):
    """``codex exec --json`` on stdout: the turns' usage, and the thread id that names the
    session file."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens_in = 0
        self.tokens_out = 0
        self.turns = 0
        self.thread_id: str | None = None

    def line(self, text: str) -> None:
        event = json_object(text)
        if event is None:
            return
        kind = event.get("type")
        if kind == "turn.completed":
            usage = event.get("usage")
            tokens_in, tokens_out = (
                json_count(usage, "input_tokens"),
                json_count(usage, "output_tokens"),
            )
            if tokens_in is None and tokens_out is None:
                return
            self.tokens_in += tokens_in or 0
            self.tokens_out += tokens_out or 0
            self.turns += 1
        elif kind == "thread.started" and self.thread_id is None:
            thread = event.get("thread_id")
            if isinstance(thread, str) and _THREAD_ID.match(thread):
                self.thread_id = thread

    def figures(self) -> UsageFigures | None:
        if not self.turns:
            return None
        # ``input_tokens`` already counts the cached input; each turn made one call at least.
        return UsageFigures(self.tokens_in, self.tokens_out, calls=self.turns)


class CodexRollout(LineReader):
    """codex's session file: one ``token_usage_record`` per model call, by response id."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, tuple[int, int]] = {}
        self.model: str | None = None

    def line(self, text: str) -> None:
        entry = json_object(text)
        if entry is None:
            return
        payload = json_dict(entry.get("payload"))
        kind = entry.get("type")
        if kind == "token_usage_record":
            usage = payload.get("usage")
            tokens_in, tokens_out = (
                json_count(usage, "input_tokens"),
                json_count(usage, "output_tokens"),
            )
            if tokens_in is None and tokens_out is None:
                return
            response = payload.get("response_id")
            key = response if isinstance(response, str) and response else f"#{len(self.calls)}"
            # Never lowered: the file is in the seat's home, where the coder's commands can
            # append a record that would hide a call already counted.
            seen = self.calls.get(key, (0, 0))
            self.calls[key] = (max(seen[0], tokens_in or 0), max(seen[1], tokens_out or 0))
        elif kind == "turn_context":
            self.model = json_name(payload.get("model")) or self.model

    def figures(self) -> UsageFigures | None:
        if not self.calls:
            return None
        return UsageFigures(
            tokens_in=sum(t[0] for t in self.calls.values()),
            tokens_out=sum(t[1] for t in self.calls.values()),
            model=self.model,
            calls=len(self.calls),
        )


# -- aider --------------------------------------------------------------------------------------

AIDER_TOKENS = re.compile(
    r"Tokens:\s*(?P<sent>[\d.,]+k?)\s+sent"
    r"(?:,\s*(?P<write>[\d.,]+k?)\s+cache write)?"
    r"(?:,\s*(?P<hit>[\d.,]+k?)\s+cache (?:hit|read))?"
    r"(?:[,;]\s*(?P<received>[\d.,]+k?)\s+(?:received|Total))?",
    re.IGNORECASE,
)
_AIDER_COST = re.compile(
    r"Cost:\s*\$(?P<message>[\d.,]+)\s+message,\s*\$(?P<session>[\d.,]+)\s+session",
    re.IGNORECASE,
)
_AIDER_MODEL = re.compile(r"^(?:Main model|Model): (\S+) with ")


class AiderUsage(LineReader):
    """aider's console: a ``Tokens:`` line per reply (aider's ``sent`` counts the input it
    sent, cache writes included), a ``Cost:`` report for a priced model (the session's total,
    rounded as aider prints it), and the model in its announcement."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens_in = 0
        self.tokens_out = 0
        self.calls = 0
        self.session_cost: float | None = None
        self.message_costs = 0.0
        self.model: str | None = None

    def line(self, text: str) -> None:
        text = text.strip()
        if match := AIDER_TOKENS.search(text):
            self.calls += 1
            self.tokens_in += aider_count(match.group("sent"))
            self.tokens_out += aider_count(match.group("received"))
        if cost := _AIDER_COST.search(text):
            self.session_cost = _money(cost.group("session"))
            self.message_costs += _money(cost.group("message")) or 0.0
        elif self.model is None and (model := _AIDER_MODEL.match(text)):
            self.model = model.group(1)

    def figures(self) -> UsageFigures | None:
        if not self.calls:
            return None
        cost = self.session_cost if self.session_cost is not None else self.message_costs
        return UsageFigures(
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            cost_usd=cost or None,
            model=self.model,
            calls=self.calls,
        )


def aider_count(text: str | None) -> int:
    """A count as aider prints it: ``181``, ``2.3k``, ``12k``, ``1,234``."""
    if not text:
        return 0
    text = text.replace(",", "").lower()
    try:
        return round(float(text[:-1]) * 1000) if text.endswith("k") else round(float(text))
    except (ValueError, OverflowError):
        return 0


def _money(text: str) -> float | None:
    try:
        return non_negative_float(float(text.replace(",", "")))
    except ValueError:
        return None


# -- mini-swe-agent ----------------------------------------------------------------------------


def mini_usage(trajectory: str | None) -> UsageFigures | None:
    """The usage a mini trajectory file records (the whole file: mini rewrites it after every
    step), or None when it is not (yet) a trajectory: one read mid-write is not JSON."""
    data = load_json(trajectory)
    info = json_dict(data.get("info"))
    stats = json_dict(info.get("model_stats"))
    messages = data.get("messages")
    tokens_in = tokens_out = 0
    seen = False
    for message in messages if isinstance(messages, list) else []:
        usage = json_dict(
            json_dict(json_dict(json_dict(message).get("extra")).get("response")).get("usage")
        )
        prompt, completion = (
            json_count(usage, "prompt_tokens"),
            json_count(usage, "completion_tokens"),
        )
        total = json_count(usage, "total_tokens")
        if prompt is None and completion is None and total is None:
            continue
        seen = True
        tokens_out += completion or 0
        # A total above prompt + completion is input the split left out (a cache).
        tokens_in += max(prompt or 0, (total or 0) - (completion or 0))
    calls = non_negative_int(stats.get("api_calls"))
    if not seen and calls is None:
        return None
    return UsageFigures(
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        # mini adds 0.0 for a call it cannot price: a total of 0.0 is unknown, never free.
        cost_usd=non_negative_float(stats.get("instance_cost")) or None,
        model=json_name(json_dict(json_dict(info.get("config")).get("model")).get("model_name")),
        calls=calls or 0,
    )


def load_json(text: str | None) -> dict[str, Any]:
    """A JSON document as an object, or ``{}`` for anything else."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


# -- shared -------------------------------------------------------------------------------------


def json_dict(value: object) -> dict[str, Any]:
    """A JSON value as an object, ``{}`` for anything else."""
    return value if isinstance(value, dict) else {}


def json_count(usage: object, key: str) -> int | None:
    """The count a JSON usage object gives under ``key``, or None."""
    return non_negative_int(usage.get(key)) if isinstance(usage, dict) else None


def json_name(value: object) -> str | None:
    """A name (a model's) from JSON, trimmed and bounded, or None."""
    if not isinstance(value, str):
        return None
    return value.strip()[:200] or None


def json_object(line: str) -> dict[str, Any] | None:
    """One JSONL line as an object, or None for anything else (banners, partial writes)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def non_negative_int(value: object) -> int | None:
    """An int count from JSON, or None (bools, negatives and non-numbers are not counts)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value) if value >= 0 else None


def count_sum(usage: object, keys: Sequence[str]) -> int | None:
    """The sum of the counts a JSON usage object gives under ``keys``; None when it gives none."""
    if not isinstance(usage, dict):
        return None
    counts = [non_negative_int(usage.get(key)) for key in keys]
    present = [c for c in counts if c is not None]
    return sum(present) if present else None


def non_negative_float(value: object) -> float | None:
    """A finite, non-negative amount from JSON, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None
