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
  codex-cli 0.171.0 (tests/e2e/interop).

Codex has no turn limit of its own, so ``max_turns`` is not honoured; ``turns_used`` counts
codex's own turns (one per prompt), and no cost is reported. It has no spending cap either
(0.171's ``exec --help`` and config keys name none): a budget is enforced by the host alone,
from the tokens of each model call its session file records as the turn goes on
(:mod:`assay.adapters.coders.usage_read`).

Its world (checked against 0.171 with bubblewrap installed):
- ``CODEX_HOME`` is private to the seat: ``<home>/.codex`` when the seat has a private home,
  else ``<output dir>/codex-home``, never the operator's. The brief is codex's global
  instructions there, ``AGENTS.md`` (https://developers.openai.com/codex/guides/agents-md: the
  Codex home's ``AGENTS.override.md`` wins over ``AGENTS.md``, so a stale one is removed);
  codex sends it to the model as an "AGENTS.md instructions" message. ``--ignore-user-config``
  keeps a ``config.toml`` left in that home (by an earlier attempt) from changing the run.
- Codex's own sandbox is off (``--dangerously-bypass-approvals-and-sandbox``, "intended solely
  for running in environments that are externally sandboxed"): assay's sandbox is the
  boundary. With its own sandbox on, codex nests a bwrap of its own, which needs helper
  binaries in ``CODEX_HOME`` and refuses to create them under ``/tmp`` (``Refusing to create
  helper binaries under temporary dir``): every shell call then fails with ``bwrap: execvp
  codex-linux-sandbox: No such file or directory`` and every patch with ``Failed to write
  file``, and codex still ends its turn normally. A contract that asks for codex's own sandbox
  (``-s``/``--sandbox`` in ``args``) gets it instead of the bypass.
- Shell calls run in a plain shell (``-c allow_login_shell=false``, a 0.171 config key): a
  login shell's /etc/profile resets PATH, and the brief's ``assay`` is found through PATH.
- Failed tool calls are read from the stream (a ``file_change`` or ``mcp_tool_call`` item with
  ``status: failed``, a declined command, a command whose output is a sandbox error) and from
  the ``codex_core::tools::router: error=`` lines codex logs on stderr. They are warnings; a run
  whose tool calls all failed is not ``completed`` but ``abandoned`` with the failures as its
  error, and one that failed on codex's own sandbox is an environment error.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from assay.adapters.coders.agentcli import (
    ParsedRun,
    apply_fault,
    conclude,
    model_and_args,
    now_utc,
    run_cli,
    setting,
    shorten,
)
from assay.adapters.coders.base import DispatchRequest, DispatchResult, assay_env
from assay.adapters.coders.usage_read import CodexEvents, CodexRollout, json_object, read_all
from assay.adapters.coders.usage_watch import AppendedFile, UsageSources
from assay.adapters.safe_files import ensure_folder, remove_file, write_file
from assay.core.preflight import install_hint
from assay.core.vocab import StopReason

INSTALL = install_hint("codex")
PROVIDER = "assay"  # the model provider id a base URL is configured under
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


BYPASS = "--dangerously-bypass-approvals-and-sandbox"
INSTRUCTIONS = "AGENTS.md"
OVERRIDE = "AGENTS.override.md"


class CodexCoder:
    """Codex in exec mode, its own sandbox off, its home private; the prompt goes in on stdin."""

    kind = "codex"
    honoured_settings = frozenset(
        {"kind", "model", "timeout_seconds", "args", "base_url", "api_key_env"}
    )

    def command(self, request: DispatchRequest) -> list[str]:
        model, args = model_and_args(request)
        own_sandbox = any(a in ("-s", "--sandbox") or a.startswith("--sandbox=") for a in args)
        argv = ["codex", "exec", "--json", "--skip-git-repo-check", "--ignore-user-config"]
        if not own_sandbox:
            argv.append(BYPASS)
        # A login shell (codex's default, ``bash -lc``) runs /etc/profile, which resets PATH on
        # Debian: the brief's `assay halt check` would then not find assay. A plain shell keeps
        # the PATH assay gave the seat.
        argv += ["-c", "allow_login_shell=false"]
        if model:
            argv += ["--model", model]
        return [*argv, *provider_overrides(request), *args, "-"]

    def dispatch(self, request: DispatchRequest) -> DispatchResult:
        env = assay_env(request)
        env["CODEX_HOME"] = str(prepare_home(request))
        return run_cli(
            request,
            tool="codex",
            install=INSTALL,
            argv=self.command(request),
            env=env,
            stdin=request.prompt,
            parse=lambda proc: parse_codex_events(
                proc.stdout, stderr=proc.stderr, exit_code=proc.exit_code, now=now_utc()
            ),
            usage=usage_sources(output_dir=request.output_dir, home=request.home),
        )


def usage_sources(*, output_dir: Path, home: Path | None) -> UsageSources:
    """Where codex reports its usage: its turns on stdout, and every model call in its session
    file (``sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`` in its home), found by the
    thread id its stdout starts with."""
    events = CodexEvents()
    base, name = _place(output_dir, home)

    def find() -> tuple[Path, str] | None:
        thread = events.thread_id  # a checked name: no separator, no wildcard
        sessions = base / name / "sessions"
        if thread is None or not sessions.is_dir():
            return None
        found = sorted(sessions.glob(f"[0-9]*/[0-9]*/[0-9]*/rollout-*-{thread}.jsonl"))
        return (base, found[-1].relative_to(base).as_posix()) if found else None

    return UsageSources(stdout=events, files=(AppendedFile(find, CodexRollout()),))


def codex_home(request: DispatchRequest) -> Path:
    """The seat's own ``CODEX_HOME``: in its private home, else in its output folder (codex
    writes there; never the operator's, and not under ``/tmp`` unless the seat itself is)."""
    base, name = _home_place(request)
    return base / name


def _home_place(request: DispatchRequest) -> tuple[Path, str]:
    """The folder ``CODEX_HOME`` is made in, and its name there."""
    return _place(request.output_dir, request.home)


def _place(output_dir: Path, home: Path | None) -> tuple[Path, str]:
    return (home, ".codex") if home is not None else (output_dir, "codex-home")


def prepare_home(request: DispatchRequest) -> Path:
    """Make the seat's ``CODEX_HOME`` and put the brief in it as codex's global instructions.

    The folder is the seat's: a link an earlier attempt's codex left on the way is replaced,
    never followed. Raises OSError when it cannot be written: the engine records that as the
    seat's environment fault, as for any other file assay writes for a seat.
    """
    base, name = _home_place(request)
    base.mkdir(parents=True, exist_ok=True)
    ensure_folder(base, name)
    remove_file(base, f"{name}/{OVERRIDE}")  # it would win over the brief
    if request.brief.strip():
        write_file(base, f"{name}/{INSTRUCTIONS}", request.brief)
    else:
        remove_file(base, f"{name}/{INSTRUCTIONS}")  # no stale brief of an earlier dispatch
    return base / name


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
    tools = ToolCalls()
    turns = 0
    completed = 0
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
        elif kind == "turn.failed":
            failure = _message(event.get("error")) or "codex reported a failed turn"
        elif kind == "error":
            message = _message(event) or "codex reported an error"
            errors.append(message)
            pending_error = message
        elif kind == "item.completed":
            _read_item(parsed, tools, event.get("item"))
    tools.read_stderr(stderr)
    parsed.turns_used = turns or None
    parsed.read_usage(read_all(CodexEvents(), stdout).figures())
    context = " ".join(errors)
    if failure is not None:
        apply_fault(parsed, failure, now=now, context=context, tool="codex")
    elif pending_error is not None:
        apply_fault(parsed, pending_error, now=now, context=context, tool="codex")
    elif completed:
        parsed.stop_reason = StopReason.COMPLETED
    elif exit_code == 0:
        parsed.error = "codex ended without turn.completed or turn.failed"
    if parsed.stop_reason is StopReason.COMPLETED:
        tools.judge(parsed)
    elif tools.failures:
        parsed.warnings.append(tools.describe())
    return conclude(parsed, tool="codex", exit_code=exit_code, stderr=stderr, now=now)


# What codex's own sandbox prints when it cannot start (its helper binary missing, bwrap
# refused): a machine fact, not the agent's mistake.
_SANDBOX_BROKEN = ("codex-linux-sandbox", "bwrap:")
_ROUTER_ERROR = re.compile(r"codex_core::tools::router: error=(.*)")
_LOG_LINE = re.compile(r"^(?:\d{4}-\d{2}-\d{2}T\S+\s+[A-Z]+\s|WARNING:)")
_HELPERS_REFUSED = "Refusing to create helper binaries"


class ToolCalls:
    """The tool calls of one run: which succeeded, which failed and why (pure bookkeeping).

    A command that ran and exited non-zero (a failing test, ``grep`` finding nothing) is a
    result, not a failure; only a command codex could not run counts as one.
    """

    def __init__(self) -> None:
        self.succeeded = 0
        self.failures: list[str] = []
        self.sandbox_broken = False
        self.helpers_refused = False

    def command(self, item: dict[str, object]) -> None:
        status = item.get("status")
        output = item.get("aggregated_output")
        output = output if isinstance(output, str) else ""
        command = item.get("command")
        name = shorten(command if isinstance(command, str) else "a command", 120)
        if status == "declined":
            self.failures.append(f"command declined: {name}")
        elif any(sign in output for sign in _SANDBOX_BROKEN):
            self.sandbox_broken = True
            self.failures.append(f"command could not run: {name}: {shorten(output, 200)}")
        elif status == "completed" or item.get("exit_code") is not None:
            self.succeeded += 1

    def change(self, item: dict[str, object]) -> None:
        if item.get("status") == "failed":
            self.failures.append(f"patch failed: {_paths(item.get('changes')) or 'a file'}")
        elif item.get("status") == "completed":
            self.succeeded += 1

    def mcp(self, item: dict[str, object]) -> None:
        if item.get("status") == "failed":
            tool = item.get("tool")
            detail = _message(item.get("error")) or "failed"
            self.failures.append(
                f"tool call failed: {tool if isinstance(tool, str) else '?'}: {detail}"
            )
        elif item.get("status") == "completed":
            self.succeeded += 1

    def read_stderr(self, stderr: str) -> None:
        """The errors codex's tool router logged (a patch it could not write, a tool it does
        not have), each with the lines that follow it up to the next log line."""
        lines = stderr.splitlines()
        for index, line in enumerate(lines):
            if _HELPERS_REFUSED in line:
                self.helpers_refused = True
            match = _ROUTER_ERROR.search(line)
            if match is None:
                continue
            body = [match.group(1)]
            for following in lines[index + 1 :]:
                if _LOG_LINE.match(following):
                    break
                body.append(following)
            text = " ".join(" ".join(body).split())
            if any(sign in text for sign in _SANDBOX_BROKEN):
                self.sandbox_broken = True
            self.failures.append(f"codex: {shorten(text, 200)}")

    def describe(self) -> str:
        shown = "; ".join(dict.fromkeys(self.failures[-5:]))
        return f"codex: {len(self.failures)} tool call(s) failed: {shown}"

    def judge(self, parsed: ParsedRun) -> None:
        """A run that ended its turn normally: its failed tool calls are a warning, unless none
        of its tool calls worked: then it did not complete, and when codex's own sandbox broke
        them the machine failed the seat, not the agent."""
        if not self.failures:
            return
        detail = self.describe()
        if self.succeeded:
            parsed.warnings.append(detail)
            return
        parsed.stop_reason = StopReason.ABANDONED
        parsed.error = shorten(detail)
        if self.sandbox_broken:
            where = ": its CODEX_HOME is under /tmp" if self.helpers_refused else ""
            parsed.environment_error = shorten(
                f"{detail} (codex's own sandbox could not start{where}; leave it off and let "
                "assay's sandbox confine the seat)"
            )


def _paths(changes: object) -> str:
    if not isinstance(changes, list):
        return ""
    paths = [c.get("path") for c in changes if isinstance(c, dict)]
    return ", ".join(p for p in paths if isinstance(p, str))


def _read_item(parsed: ParsedRun, tools: ToolCalls, item: object) -> None:
    if not isinstance(item, dict):
        return
    kind = item.get("type") or item.get("item_type")  # item_type: the 0.4x field name
    text = item.get("text")
    if kind in ("agent_message", "assistant_message") and isinstance(text, str) and text:
        parsed.summary = text
    elif kind == "command_execution":
        tools.command(item)
    elif kind == "file_change":
        tools.change(item)
    elif kind == "mcp_tool_call":
        tools.mcp(item)
    elif kind == "error":
        message = _message(item)
        if message:
            parsed.warnings.append(f"codex: {message}")


def _message(value: object) -> str | None:
    if isinstance(value, dict):
        message = value.get("message")
        return message if isinstance(message, str) and message else None
    return value if isinstance(value, str) and value else None
