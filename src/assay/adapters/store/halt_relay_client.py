"""The halt command's side of the engine's halt relay: one request line, one answer line.

Inside a coder's sandbox the halt state is the engine's: the coder can neither read nor write
its state file. ``assay halt check`` (a query or a fire) therefore sends what it was asked, as
one JSON line (:func:`check_request`), to the relay socket ``$ASSAY_HALT_RELAY`` names, and the
engine performs the transition on its own state file for the dispatch that socket serves,
journals a firing, and answers with the document and exit code seed 002 prescribes
(:mod:`assay.engine.local.halt_relay`). The dispatch id the command claims is checked by the engine,
never believed. Standard library only: this runs at every ``assay halt check`` of a coder.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing is an import `assay halt check` does without (assay.core.frozen)
if TYPE_CHECKING:
    from typing import Any

    Answer = tuple[dict[str, Any], int, str | None]

RELAY_ENV = "ASSAY_HALT_RELAY"
# A request is one line of at most this many bytes; the engine reads no more of a connection.
RELAY_MAX_LINE = 64 * 1024
# The answer carries the evidence up to three times (state, transition, violations).
RELAY_MAX_ANSWER = 8 * RELAY_MAX_LINE
# Seconds the command waits for the engine: it performs the transition under the state file's
# lock and journals a firing in the ledger before it answers.
RELAY_TIMEOUT = 30.0


def check_request(
    dispatch_id: str, condition: str, *, fire: bool, evidence: str | None
) -> dict[str, Any]:
    """What ``assay halt check`` asks the relay: the claimed dispatch, the halt, the move."""
    return {
        "op": "check",
        "dispatch_id": dispatch_id,
        "condition": condition,
        "fire": fire,
        "evidence": evidence,
    }


def call_relay(socket_path: str, request: dict[str, Any]) -> Answer | str:
    """Send ``request`` to the relay at ``socket_path`` and wait for the engine's answer: the
    document, its exit code and a warning (or None); or, as a string, why there is none (no
    relay there, a timeout, a refusal, a garbled answer). Never raises."""
    import socket  # here: the halt command imports this module for RELAY_ENV on every call

    try:
        line = json.dumps(request).encode() + b"\n"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(RELAY_TIMEOUT)
            conn.connect(socket_path)
            conn.sendall(line)
            answer = b""
            while b"\n" not in answer and len(answer) <= RELAY_MAX_ANSWER:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                answer += chunk
        reply = json.loads(answer.split(b"\n", 1)[0] or b"null")
    except Exception as exc:  # no engine there, a timeout, a garbled answer: said, not raised
        return f"the halt relay at {socket_path} did not answer: {exc}"
    if not isinstance(reply, dict):
        return f"the halt relay at {socket_path} answered no JSON object"
    if reply.get("ok") is not True:
        error = reply.get("error")
        return f"the halt relay refused the request: {error or 'no reason given'}"
    document, code, warning = reply.get("document"), reply.get("exit_code"), reply.get("warning")
    if not isinstance(document, dict) or code not in (0, 1) or isinstance(code, bool):
        return f"the halt relay at {socket_path} answered without a document and exit code"
    return document, code, warning if isinstance(warning, str) else None
