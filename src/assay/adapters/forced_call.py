"""Ask a model for one answer through a forced function call, sending back what was unusable.

The ``judge`` validator (a ``verdict`` call) and the ranking judge (a ``rank`` call) share this
loop. The call is forced with ``tool_choice``; ``read`` turns a reply into the answer or says
what was wrong with it. An unusable reply is put back into the conversation, each of its calls
answered ``rejected: <problem>``, followed by ``retry_message(problem)``, up to ``turns``
replies, all within one ``deadline``. The first :class:`LlmError` ends the loop: nothing here
retries a provider fault or a rate limit, which are the caller's policy to handle.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from assay.adapters.coders.base import UsageMeter
from assay.adapters.llm_client import (
    ChatClient,
    ChatReply,
    FailureKind,
    LlmError,
    ToolCallRequest,
)
from assay.adapters.safe_files import append_file
from assay.core.usage import UsageFigures

T = TypeVar("T")


class EventLog(Protocol):
    """Where the transcript goes: one JSON-able event per call."""

    def __call__(self, **event: Any) -> None: ...


class Transcript:
    """A judge's transcript as JSON lines (``path`` None: none kept); a transcript that cannot
    be written changes nothing, least of all the judgement."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def write(self, **event: Any) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            line = json.dumps(event, default=str) + "\n"
            with append_file(self.path) as handle:  # never through a link left there
                handle.write(line.encode("utf-8", errors="replace"))
        except OSError:
            return


@dataclass(frozen=True)
class ForcedAnswer(Generic[T]):
    """How the asking ended: an answer, or none with the problems of each unusable reply.

    ``error`` is the model call fault that ended it, if one did; ``tokens`` counts every reply.
    """

    answer: T | None
    problems: tuple[str, ...] = ()
    tokens: int = 0
    error: LlmError | None = None
    usage: UsageFigures | None = None  # every reply's usage (None: no reply came)

    def tried(self) -> str:
        """The problems, turn by turn: ``turn 1: ...; turn 2: ...``."""
        return "; ".join(f"turn {n}: {p}" for n, p in enumerate(self.problems, start=1))


def call_failed(exc: LlmError, role: str = "judge") -> str:
    """What to say when the model call itself failed."""
    reason = "rate or usage limit" if exc.kind is FailureKind.QUOTA else "failure"
    return f"the {role}'s model call failed ({reason}): {exc.detail}"


def calls_to(reply: ChatReply, name: str) -> tuple[list[ToolCallRequest], str]:
    """The reply's calls to ``name``; when there are none, what the reply did instead."""
    calls = [call for call in reply.tool_calls if call.name == name]
    if calls:
        return calls, ""
    names = ", ".join(call.name for call in reply.tool_calls)
    return [], f"called {names} instead of `{name}`" if names else f"no `{name}` call"


def ask_forced(
    client: ChatClient,
    messages: Sequence[Mapping[str, Any]],
    tool: Mapping[str, Any],
    read: Callable[[ChatReply], tuple[T | None, str]],
    *,
    turns: int,
    deadline: float,
    retry_message: Callable[[str], str],
    log: EventLog | None = None,
    meter: UsageMeter | None = None,
) -> ForcedAnswer[T]:
    """Ask until ``read`` finds an answer, ``turns`` replies were unusable, or a call fails.

    ``deadline`` is a :func:`time.monotonic` time that bounds every request. ``log``, when
    given, receives the ``request``, each ``reply`` and an ``error`` event; ``meter``, each
    reply's usage as it arrives. ``messages`` is not changed.
    """
    write: EventLog = log if log is not None else _discard
    if meter is not None:  # every answer journaled as it arrives, usable or not
        client.on_spent = meter.report
    conversation = [dict(message) for message in messages]
    write(event="request", model=client.endpoint.model, messages=conversation)
    force = {"type": "function", "function": {"name": tool["function"]["name"]}}
    tokens = 0
    problems: list[str] = []
    for _ in range(turns):
        write(event="call")  # last in the transcript of a host that died waiting for it
        try:
            reply = client.complete(
                conversation,
                tools=[tool],
                tool_choice=force,
                timeout=deadline - time.monotonic(),
            )
        except LlmError as exc:
            write(event="error", kind=exc.kind.value, detail=exc.detail)
            return ForcedAnswer(None, tuple(problems), tokens, exc, _used(client))
        tokens += reply.total_tokens
        write(event="reply", message=reply.as_message(), tokens=reply.total_tokens)
        answer, problem = read(reply)
        if answer is not None:
            return ForcedAnswer(answer, tuple(problems), tokens, usage=_used(client))
        problems.append(problem)
        conversation.append(reply.as_message())
        conversation.extend(
            {"role": "tool", "tool_call_id": call.id, "content": f"rejected: {problem}"}
            for call in reply.tool_calls
        )
        conversation.append({"role": "user", "content": retry_message(problem)})
    return ForcedAnswer(None, tuple(problems), tokens, usage=_used(client))


def call_in_flight(transcript: Path) -> bool:
    """Whether a model loop's transcript ends with a call never answered (its host died while
    it waited, and the provider may have spent on it): its last event is ``call``. Only its
    tail is read."""
    try:
        with transcript.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            lines = handle.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return False
    try:
        last = json.loads(lines[-1]) if lines else None
    except ValueError:  # a line cut by the death: the call it began is not known to be one
        return False
    return isinstance(last, dict) and last.get("event") == "call"


def _used(client: ChatClient) -> UsageFigures | None:
    """Every answer the client was sent (None: none came)."""
    return client.spent if client.spent.calls else None


def _discard(**event: Any) -> None:
    return None
