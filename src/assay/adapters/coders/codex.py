"""The Codex CLI adapter: ``codex exec --json``, read through its JSONL thread events.

Format sources:
- ``codex exec`` non-interactive mode, ``--json``, ``--sandbox workspace-write``,
  ``--skip-git-repo-check``, the sample JSONL stream and the event list (``thread.started``,
  ``turn.started``, ``turn.completed`` with ``usage`` {input_tokens, cached_input_tokens,
  output_tokens}, ``turn.failed`` with ``error.message``, ``item.*``): openai/codex
  ``docs/exec.md`` and https://developers.openai.com/codex/noninteractive (a prompt of ``-``
  is read from stdin).
- The event types themselves (``error`` events carry ``message``; ``error`` items are
  non-fatal): openai/codex ``codex-rs/exec/src/exec_events.rs``.
- Limit and overflow messages: openai/codex ``codex-rs/core/src/error.rs``
  (``You've hit your usage limit. ... Try again at 3:28 PM.`` / ``at Aug 8th, 2026 12:30
  PM``, in local time; ``Codex ran out of room in the model's context window. ...``);
  transient ``Reconnecting... 1/5`` errors precede a retry, so an ``error`` event followed by
  ``turn.completed`` is not a failure; codex 0.171 reports a 500 as ``We're currently
  experiencing high demand`` and insufficient_quota as ``Quota exceeded``.
- Endpoints: codex 0.171 ignores ``OPENAI_BASE_URL``, and its built-in ``openai`` provider
  tries a Responses WebSocket before HTTPS. A base URL (the ``base_url`` setting, else
  ``$OPENAI_BASE_URL``) is therefore given as a provider of its own, ``-c model_provider=assay
  -c model_providers.assay={name, base_url, env_key, wire_api = "responses"}``: openai/codex
  ``docs/config.md`` ("model_providers"); its key is read from ``env_key`` (``api_key_env``,
  else ``OPENAI_API_KEY``). ``wire_api = "chat"`` is refused by 0.171 ("no longer
  supported"), so the endpoint must speak the Responses API. Checked against the real
  codex-cli 0.171.0 (tests/interop).

Codex has no turn limit of its own, so ``max_turns`` is not honoured; ``turns_used`` counts
codex's own turns (one per prompt), and no cost is reported.
"""

from __future__ import annotations

import json
from datetime import datetime

from assay.adapters.coders.agentcli import (
    ParsedRun,
    apply_fault,
    conclude,
    count_sum,
    json_object,
    model_and_args,
    now_utc,
    run_cli,
    setting,
)
from assay.adapters.coders.base import DispatchRequest, DispatchResult, assay_env
from assay.core.vocab import StopReason

INSTALL = "npm install -g @openai/codex"
PROVIDER = "assay"  # the model provider id a base URL is configured under
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


class CodexCoder:
    """Codex in exec mode, sandboxed to the worktree; the prompt goes in on stdin."""

    kind = "codex"
    honoured_settings = frozenset(
        {"kind", "model", "timeout_seconds", "args", "base_url", "api_key_env"}
    )

    def command(self, request: DispatchRequest) -> list[str]:
        model, args = model_and_args(request)
        argv = [
            "codex",
            "exec",
            "--json",
            "--sandbox",
            "workspace-write",
            "--skip-git-repo-check",
        ]
        if model:
            argv += ["--model", model]
        return [*argv, *provider_overrides(request), *args, "-"]

    def dispatch(self, request: DispatchRequest) -> DispatchResult:
        return run_cli(
            request,
            tool="codex",
            install=INSTALL,
            argv=self.command(request),
            env=assay_env(request),
            stdin=request.prompt,
            parse=lambda proc: parse_codex_events(
                proc.stdout, stderr=proc.stderr, exit_code=proc.exit_code, now=now_utc()
            ),
        )


def provider_overrides(request: DispatchRequest) -> list[str]:
    """``-c`` options that send codex to the seat's base URL over the Responses API, or none."""
    base_url = setting(request, "base_url") or request.env.get("OPENAI_BASE_URL")
    if not isinstance(base_url, str) or not base_url:
        return []
    key_env = setting(request, "api_key_env")
    key_env = key_env if isinstance(key_env, str) and key_env else DEFAULT_KEY_ENV
    fields = {"name": PROVIDER, "base_url": base_url, "env_key": key_env, "wire_api": "responses"}
    # A JSON string is a valid TOML basic string, so each value is quoted with json.dumps.
    table = ", ".join(f"{key} = {json.dumps(value)}" for key, value in fields.items())
    return [
        "-c",
        f"model_provider={json.dumps(PROVIDER)}",
        "-c",
        f"model_providers.{PROVIDER}={{{table}}}",
    ]


def parse_codex_events(
    stdout: str,
    *,
    stderr: str = "",
    exit_code: int | None = 0,
    now: datetime | None = None,
) -> ParsedRun:
    """Read a ``codex exec --json`` stream. Pure and total: any text gives a ParsedRun."""
    parsed = ParsedRun()
    turns = 0
    completed = 0
    tokens: int | None = None
    failure: str | None = None
    errors: list[str] = []
    pending_error: str | None = None
    for line in stdout.splitlines():
        event = json_object(line)
        if event is None:
            continue
        kind = event.get("type")
        if kind == "turn.started":
            turns += 1
        elif kind == "turn.completed":
            completed += 1
            pending_error = None
            used = _usage_tokens(event.get("usage"))
            if used is not None:
                tokens = (tokens or 0) + used
        elif kind == "turn.failed":
            failure = _message(event.get("error")) or "codex reported a failed turn"
        elif kind == "error":
            message = _message(event) or "codex reported an error"
            errors.append(message)
            pending_error = message
        elif kind == "item.completed":
            _read_item(parsed, event.get("item"))
    parsed.turns_used = turns or None
    parsed.tokens_used = tokens
    context = " ".join(errors)
    if failure is not None:
        apply_fault(parsed, failure, now=now, context=context)
    elif pending_error is not None:
        apply_fault(parsed, pending_error, now=now, context=context)
    elif completed:
        parsed.stop_reason = StopReason.COMPLETED
    elif exit_code == 0:
        parsed.error = "codex ended without turn.completed or turn.failed"
    return conclude(parsed, tool="codex", exit_code=exit_code, stderr=stderr, now=now)


def _read_item(parsed: ParsedRun, item: object) -> None:
    if not isinstance(item, dict):
        return
    kind = item.get("type") or item.get("item_type")  # item_type: the 0.4x field name
    text = item.get("text")
    if kind in ("agent_message", "assistant_message") and isinstance(text, str) and text:
        parsed.summary = text
    elif kind == "error":
        message = _message(item)
        if message:
            parsed.warnings.append(f"codex: {message}")


def _message(value: object) -> str | None:
    if isinstance(value, dict):
        message = value.get("message")
        return message if isinstance(message, str) and message else None
    return value if isinstance(value, str) and value else None


def _usage_tokens(usage: object) -> int | None:
    """Input (which already includes ``cached_input_tokens``) plus output."""
    return count_sum(usage, ("input_tokens", "output_tokens"))
