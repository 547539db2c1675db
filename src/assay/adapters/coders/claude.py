"""The Claude Code adapter: ``claude -p`` headless, read through its ``stream-json`` events.

Format sources:
- Headless mode and flags (``-p``, ``--output-format stream-json``, ``--verbose``,
  ``--include-partial-messages``, ``--max-turns``, ``--model``, ``--permission-mode``):
  https://code.claude.com/docs/en/headless
  and https://docs.claude.com/en/docs/claude-code/sdk/sdk-headless ("each conversation begins
  with an initial ``init`` system message, followed by a list of user and assistant messages,
  followed by a final ``result`` system message with stats").
- The ``result`` message (``subtype`` success | error_max_turns | error_during_execution |
  error_max_budget_usd, ``is_error``, ``num_turns``, ``total_cost_usd``, ``usage``,
  ``result``) and the assistant message's ``error`` (rate_limit, server_error,
  authentication_failed, ...): the Agent SDK's ``SDKResultMessage`` / ``SDKAssistantMessage``
  types, https://tessl.io/registry/tessl/npm-anthropic-ai--claude-agent-sdk/0.1.0/files/docs/
  apis/messages.md. A failed API call still ends in ``subtype: success`` with ``is_error: true``
  and the message in ``result`` (https://docs.rs/claude-code-agent/0.6.0/claude_code_agent/
  protocol/struct.ResultMessage.html).
- Checked against the real ``claude`` 2.1.332 (tests/e2e/interop): the prompt is read from stdin
  with no prompt argument; ``--max-turns N`` ends with exit code 1 and a result of
  ``subtype: error_max_turns``, ``is_error: true``, ``terminal_reason: max_turns``,
  ``num_turns: N + 1``; a failed API call (after ``CLAUDE_CODE_MAX_RETRIES`` retries, 10 by
  default) ends with exit code 1, ``subtype: success``, ``is_error: true``,
  ``api_error_status``, ``api_error_type`` and ``terminal_reason`` (``api_error``,
  ``prompt_too_long``), after an assistant message flagged ``is_api_error_message``.
- ``rate_limit_event`` lines with ``rate_limit_info.resetsAt`` (epoch seconds): a captured
  2.1.83 stream in https://github.com/anthropics/claude-code/issues/38673.
- Limit messages: ``Claude AI usage limit reached|<epoch>`` (anthropics/claude-code issues
  #6119, #4375), ``You've hit your limit - resets Feb 7, 11am (Asia/Seoul)`` (#22976),
  ``API Error: 429 {... rate_limit_error ...}`` and ``You have reached your specified API usage
  limits. You will regain access on 2026-04-01 at 00:00 UTC.`` (#38035).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assay.adapters.coders.agentcli import (
    ParsedRun,
    apply_fault,
    conclude,
    model_and_args,
    money_cap,
    now_utc,
    run_cli,
    setting,
    turn_limit,
)
from assay.adapters.coders.base import DispatchRequest, DispatchResult, assay_env
from assay.adapters.coders.claude_usage import STREAM_EVENT, ClaudeUsage
from assay.adapters.coders.command import write_log_file
from assay.adapters.coders.usage_read import (
    json_object,
    non_negative_float,
    non_negative_int,
    read_all,
)
from assay.adapters.coders.usage_watch import UsageSources
from assay.adapters.safe_files import write_file
from assay.core.halt_skill import SKILL_NAME, render_halt_skill
from assay.core.preflight import install_hint, key_problem
from assay.core.vocab import StopReason

INSTALL = install_hint("claude")
SKIP_PERMISSIONS = "--dangerously-skip-permissions"
CONFIG_FOLDER = ".claude"
_PERMISSION_FLAGS = ("--permission-mode", SKIP_PERMISSIONS)
BUDGET_FLAG = "--max-budget-usd"
# The API's stream events, the only place claude prints a message's output count before its
# final result event, which a stopped claude never prints.
PARTIAL_FLAG = "--include-partial-messages"


class ClaudeCoder:
    """Claude Code in print mode; the prompt goes in on stdin, events come out on stdout."""

    kind = "claude"
    honoured_settings = frozenset(
        {"kind", "model", "timeout_seconds", "max_turns", "args", "base_url"}
    )

    def command(self, request: DispatchRequest, brief_file: Path | None = None) -> list[str]:
        """The command line. The sandbox, not claude's permission prompt, is the boundary, so
        it runs with ``--dangerously-skip-permissions`` (under ``acceptEdits`` it refuses the
        brief's own ``assay halt check --dispatch-id "$ASSAY_DISPATCH_ID"`` call) unless
        ``args`` chooses a permission mode of its own. The brief (in ``brief_file``: a long
        task in one argument would exceed the kernel's 128 KiB limit) is appended to its system
        prompt; the task itself goes in on stdin. A money budget is claude's own cap too
        (``--max-budget-usd``, last: it wins over one in ``args``): claude stops after the
        call that reached it, where the host only sees the cost in claude's final event.
        Partial messages (the API's stream events) give each call's output count as the call
        ends, so a claude stopped before its final event is still counted in full."""
        model, args = model_and_args(request)
        argv = ["claude", "-p", "--output-format", "stream-json", "--verbose", PARTIAL_FLAG]
        if (limit := turn_limit(request)) is not None:
            argv += ["--max-turns", str(limit)]
        if model:
            argv += ["--model", model]
        if brief_file is not None:
            argv += ["--append-system-prompt-file", str(brief_file)]
        if not any(arg.split("=", 1)[0] in _PERMISSION_FLAGS for arg in args):
            argv.append(SKIP_PERMISSIONS)
        cap = money_cap(request)
        return argv + args + ([BUDGET_FLAG, cap] if cap is not None else [])

    def dispatch(self, request: DispatchRequest) -> DispatchResult:
        env = assay_env(request)
        base_url = setting(request, "base_url")
        if isinstance(base_url, str) and base_url:
            env["ANTHROPIC_BASE_URL"] = base_url
        # Without a key claude would start only to ask for a login no seat can use.
        unkeyed = key_problem(self.kind, self.kind, request.settings, env)
        if unkeyed is not None:
            return DispatchResult(exit_code=None, setting_error=unkeyed)
        try:
            env["CLAUDE_CONFIG_DIR"] = str(install_config(request))
            brief_file = write_brief(request)
        except OSError as exc:  # assay's own write for the seat: its environment error
            return DispatchResult(
                exit_code=None,
                environment_error=f"cannot write claude's private config folder: {exc}",
            )
        argv = self.command(request, brief_file)
        if SKIP_PERMISSIONS in argv:
            env["IS_SANDBOX"] = "1"  # claude refuses to skip permissions as root otherwise
        return run_cli(
            request,
            tool="claude",
            install=INSTALL,
            argv=argv,
            env=env,
            stdin=request.prompt,
            max_turns=turn_limit(request),
            parse=lambda proc: parse_claude_stream(
                proc.stdout, stderr=proc.stderr, exit_code=proc.exit_code, now=now_utc()
            ),
            usage=usage_sources(),
        )


def usage_sources(*, output_dir: Path | None = None, home: Path | None = None) -> UsageSources:
    """Where claude reports its usage: its ``stream-json`` on stdout."""
    return UsageSources(stdout=ClaudeUsage())


def config_dir(request: DispatchRequest) -> Path:
    """claude's private config folder: in the seat's private home, else in its output folder
    (claude writes there; never the operator's ``~/.claude``)."""
    return _config_base(request) / CONFIG_FOLDER


def _config_base(request: DispatchRequest) -> Path:
    return request.home if request.home is not None else request.output_dir / "claude-home"


def install_config(request: DispatchRequest) -> Path:
    """Create the config folder with seed 002's halt-state skill installed as a Claude Code
    skill (``skills/<name>/SKILL.md``); returns the folder, for ``CLAUDE_CONFIG_DIR``.

    The folder is the seat's: an earlier attempt's claude may have left a link anywhere on the
    way, which is replaced, never followed."""
    base = _config_base(request)
    base.mkdir(parents=True, exist_ok=True)
    skill = f"{CONFIG_FOLDER}/skills/{SKILL_NAME}/SKILL.md"
    write_file(base, skill, render_halt_skill())
    return config_dir(request)


def write_brief(request: DispatchRequest) -> Path | None:
    """The brief in the seat's log folder, for ``--append-system-prompt-file``; None without one."""
    if not request.brief:
        return None
    return write_log_file(request, "claude.brief.md", request.brief)


def parse_claude_stream(
    stdout: str,
    *,
    stderr: str = "",
    exit_code: int | None = 0,
    now: datetime | None = None,
) -> ParsedRun:
    """Read a ``stream-json`` transcript. Pure and total: any text gives a ParsedRun."""
    parsed = ParsedRun()
    usage = read_all(ClaudeUsage(), stdout)
    parsed.read_usage(usage.figures())
    result: dict[str, Any] | None = None
    api_errors: list[str] = []
    last_text: str | None = None
    reset_at: datetime | None = None
    reset_rejected = False
    for line in stdout.splitlines():
        if line.startswith(STREAM_EVENT):  # usage only, read above
            continue
        event = json_object(line)
        if event is None:
            continue
        kind = event.get("type")
        if kind == "assistant":
            message = event.get("message")
            message = message if isinstance(message, dict) else {}
            text = _text(message.get("content"))
            if text:
                last_text = text
            flagged = (
                event.get("error")
                or message.get("error")
                or event.get("is_api_error_message")  # 2.1.x
                or event.get("isApiErrorMessage")
            )
            if flagged or (text or "").startswith("API Error"):
                api_errors.append(text or str(flagged))
        elif kind == "rate_limit_event":
            info = event.get("rate_limit_info")
            info = info if isinstance(info, dict) else {}
            epoch = non_negative_float(info.get("resetsAt"))
            rejected = info.get("status") not in (None, "allowed")
            if epoch is not None and (rejected or not reset_rejected):
                reset_at = _from_epoch(epoch) or reset_at
                reset_rejected = reset_rejected or rejected
        elif kind == "result":
            result = event
    if result is None:
        parsed.turns_used = len(usage.messages) or None
        parsed.summary = last_text
        if api_errors:
            apply_fault(parsed, api_errors[-1], now=now, reset_at=reset_at, tool="claude")
        elif exit_code == 0:
            parsed.error = "claude ended without its final result event"
        return conclude(parsed, tool="claude", exit_code=exit_code, stderr=stderr, now=now)
    _read_result(parsed, result, api_errors, reset_at, now)
    if parsed.summary is None and parsed.stop_reason is StopReason.COMPLETED:
        parsed.summary = last_text
    return conclude(parsed, tool="claude", exit_code=exit_code, stderr=stderr, now=now)


def _read_result(
    parsed: ParsedRun,
    result: dict[str, Any],
    api_errors: list[str],
    reset_at: datetime | None,
    now: datetime | None,
) -> None:
    parsed.turns_used = non_negative_int(result.get("num_turns"))
    subtype = result.get("subtype")
    terminal = result.get("terminal_reason")  # 2.1.x: completed | max_turns | api_error | ...
    text = result.get("result") if isinstance(result.get("result"), str) else None
    if subtype == "error_max_turns" or terminal == "max_turns":
        parsed.stop_reason = StopReason.TURN_BUDGET
        parsed.error = "claude stopped at its --max-turns limit"
        return
    if subtype == "error_max_budget_usd":
        parsed.stop_reason = StopReason.TURN_BUDGET
        parsed.warnings.append("claude stopped on its cost budget; recorded as turn_budget")
        parsed.error = "claude stopped at its --max-budget-usd limit"
        return
    if subtype == "success" and result.get("is_error") is not True:
        parsed.stop_reason = StopReason.COMPLETED
        parsed.summary = text
        return
    parts = [text or ""]
    errors = result.get("errors")
    if isinstance(errors, list):
        parts += [str(e) for e in errors]
    parts += api_errors
    status = non_negative_int(result.get("api_error_status"))
    if status is not None:
        parts.append(f"API Error: {status}")
    if isinstance(result.get("api_error_type"), str):
        parts.append(result["api_error_type"])  # rate_limit_error, overloaded_error, ...
    message = ""
    for part in (p.strip() for p in parts):  # claude repeats its API error in the result text
        if part and part not in message:
            message = f"{message} {part}".strip()
    message = message or f"claude reported an error ({subtype})"
    apply_fault(parsed, message, now=now, reset_at=reset_at, tool="claude")
    if terminal == "prompt_too_long":  # whatever the words, the context was the limit
        parsed.stop_reason = StopReason.CONTEXT_BUDGET
        parsed.quota = None


def _text(content: object) -> str | None:
    if isinstance(content, str):
        return content or None
    if not isinstance(content, list):
        return None
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts) or None


def _from_epoch(epoch: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(epoch, UTC)
    except (OverflowError, OSError, ValueError):
        return None
