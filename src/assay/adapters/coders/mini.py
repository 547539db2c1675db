"""The mini-swe-agent adapter: ``mini`` headless, read from the trajectory file it saves.

Format sources (SWE-agent/mini-swe-agent):
- The command line (``-t/--task``, ``-y/--yolo``, ``--exit-immediately``, ``-m/--model``,
  ``-o/--output``, ``-c/--config`` taking files and ``key=value`` specs, merged in order, the
  default ``mini.yaml`` dropped once ``-c`` is given): ``src/minisweagent/run/mini.py`` and
  ``docs/usage/mini.md``. ``MSWEA_CONFIGURED`` skips the first-run setup prompt.
- The trajectory (``trajectory_format`` mini-swe-agent-1 / 1.1): ``info.exit_status`` (the
  name of the exception that ended the run: ``Submitted``, ``LimitsExceeded``, or an uncaught
  one such as ``RateLimitError`` with ``exception_str`` on the final ``exit`` message),
  ``info.submission``, ``info.model_stats.instance_cost`` and ``api_calls``; each model
  message keeps the provider response, usage included, under ``extra.response``:
  ``src/minisweagent/agents/default.py``, ``run/utils/save.py``, ``models/litellm_model.py``.
- ``LimitsExceeded`` (step or cost limit; ``TimeExceeded`` is a subclass) and
  ``ContextWindowExceeded``: ``src/minisweagent/exceptions.py``. Older interactive agents ask
  for new limits on stdin and die on EOF after printing ``Limits exceeded.``.
- The brief is appended to mini's system template: ``-c <log dir>/mini.brief.yaml`` right after
  ``-c mini.yaml`` sets ``agent.system_template`` (config files merge in order, a later ``-c``
  of the contract's ``args`` still wins). Templates are Jinja (``agents/default.py``
  ``_render_template``), so the brief goes in as one Jinja string literal, ``{{ "..." }}``:
  braces or ``{%`` in a task are never read as template code.
- The final answer: the submission (what the submit command printed after its first line),
  else the text of the model's last message (the one that submitted), so ``NO CHANGE
  NEEDED:`` works either way.
- Checked against the real mini-swe-agent 2.4.6 (tests/e2e/interop): the model calls one ``bash``
  tool; ``-c mini.yaml -c agent.step_limit=N -c model.model_kwargs.api_base=URL`` work as
  written here (``run/mini.py``, ``config/__init__.py``); with stdin not a terminal a step limit
  ends the run with ``exit_status: LimitsExceeded`` (``agents/interactive.py``); an uncaught
  provider error (``RateLimitError``, ``ContextWindowExceededError``) is saved as the exit
  status, then mini exits 1; model calls are retried ``MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT``
  times, ten by default, 4 to 60 s apart (``models/utils/retry.py``); the first-run setup is
  in ``run/utilities/config.py``.
- Usage and spending (2.4.6): the trajectory is saved after every step (``DefaultAgent.run``),
  so the host reads a running total from it; ``-l/--cost-limit`` sets ``agent.cost_limit``
  (``mini.yaml``'s own is $3), checked before each model call (``DefaultAgent.query``), the
  run then ending ``LimitsExceeded``.
"""

from __future__ import annotations

import json
from datetime import datetime
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
from assay.adapters.coders.command import write_log_file
from assay.adapters.coders.usage_read import load_json, mini_usage, non_negative_int
from assay.adapters.coders.usage_watch import DocumentFile, UsageSources
from assay.adapters.process import ProcessResult
from assay.adapters.safe_files import keep_copy, remove_file
from assay.core.preflight import install_hint
from assay.core.vocab import StopReason

INSTALL = install_hint("mini")
TRAJECTORY = "mini.traj.json"
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024  # a long run's trajectory, not a file without end
BRIEF_CONFIG = "mini.brief.yaml"  # JSON is YAML; mini wants the .yaml suffix
# mini.yaml's own system template (mini-swe-agent 2.4.6), which the brief is appended to.
SYSTEM_TEMPLATE = "You are a helpful assistant that can interact with a computer."
_BUDGET = frozenset({"LimitsExceeded", "TimeExceeded"})
_CONTEXT = frozenset({"ContextWindowExceeded", "ContextWindowExceededError"})


class MiniCoder:
    """mini in yolo mode that exits when the agent submits; its trajectory is kept in the logs."""

    kind = "mini"
    honoured_settings = frozenset(
        {"kind", "model", "timeout_seconds", "max_turns", "args", "base_url"}
    )

    def command(self, request: DispatchRequest) -> list[str]:
        model, args = model_and_args(request)
        argv = [
            "mini",
            "-y",
            "--exit-immediately",
            "-o",
            str(request.output_dir / TRAJECTORY),  # mini writes it itself
            "-c",
            "mini.yaml",
        ]
        if request.brief.strip():
            argv += ["-c", str(request.log_dir / BRIEF_CONFIG)]
        if (limit := turn_limit(request)) is not None:
            argv += ["-c", f"agent.step_limit={limit}"]
        base_url = setting(request, "base_url")
        if isinstance(base_url, str) and base_url:
            argv += ["-c", f"model.model_kwargs.api_base={base_url}"]
        if model:
            argv += ["-m", model]
        # A money budget is mini's own cost limit too (checked before each model call), last so
        # it wins over the contract's; 0 would mean no limit, so it is never 0.
        cap = money_cap(request)
        return [*argv, *args, *(["-l", cap] if cap is not None else []), "-t", request.prompt]

    def dispatch(self, request: DispatchRequest) -> DispatchResult:
        write_brief_config(request)
        request.output_dir.mkdir(parents=True, exist_ok=True)
        remove_file(request.output_dir, TRAJECTORY)  # this dispatch's trajectory only
        env = assay_env(request)
        env.setdefault("MSWEA_CONFIGURED", "true")  # no first-run setup wizard
        env.setdefault("MSWEA_COST_TRACKING", "ignore_errors")  # unpriced models do not crash
        env.setdefault("MSWEA_VISUAL_MODE_DEFAULT", "false")

        def parse(proc: ProcessResult) -> ParsedRun:
            text, warning = keep_trajectory(request)
            parsed = parse_mini_run(
                text,
                stdout=proc.stdout,
                stderr=proc.stderr,
                exit_code=proc.exit_code,
                now=now_utc(),
            )
            parsed.warnings += [warning] if warning else []
            return parsed

        return run_cli(
            request,
            tool="mini",
            install=INSTALL,
            argv=self.command(request),
            env=env,
            parse=parse,
            max_turns=turn_limit(request),
            usage=usage_sources(output_dir=request.output_dir),
        )


def usage_sources(*, output_dir: Path, home: Path | None = None) -> UsageSources:
    """Where mini reports its usage: the trajectory it rewrites after every step (its console
    gives only a cost rounded to cents)."""
    trajectory = DocumentFile(output_dir, TRAJECTORY, mini_usage, MAX_TRAJECTORY_BYTES)
    return UsageSources(files=(trajectory,))


def keep_trajectory(request: DispatchRequest) -> tuple[str | None, str | None]:
    """The trajectory mini wrote in the output folder, read safely (at most
    :data:`MAX_TRAJECTORY_BYTES`) and kept in the log folder; with a warning when refused."""
    folder = request.output_dir.resolve()
    read = keep_copy(
        folder / TRAJECTORY, folder, MAX_TRAJECTORY_BYTES, request.log_dir / TRAJECTORY
    )
    warning = f"mini's trajectory was not read: {read.warning}" if read.warning else None
    if read.data is None:
        return None, warning
    return read.data.decode("utf-8", errors="replace"), warning


def brief_template(brief: str) -> str:
    """mini's system template with the brief appended, the brief as a Jinja string literal.

    Jinja reads a string literal's escapes with Python's ``unicode-escape``; a JSON string
    without ASCII escaping only has ``\\"``, ``\\\\`` and control-character escapes, which it
    reads back to the same text.
    """
    return f"{SYSTEM_TEMPLATE}\n\n{{{{ {json.dumps(brief, ensure_ascii=False)} }}}}\n"


def write_brief_config(request: DispatchRequest) -> None:
    """The config file that appends the brief to the system template (in the log folder, not
    in the repository); removed when there is no brief."""
    if not request.brief.strip():
        request.log_dir.mkdir(parents=True, exist_ok=True)
        remove_file(request.log_dir, BRIEF_CONFIG)
        return
    config = {"agent": {"system_template": brief_template(request.brief)}}
    write_log_file(request, BRIEF_CONFIG, json.dumps(config, ensure_ascii=False, indent=1))


def parse_mini_run(
    trajectory: str | None,
    *,
    stdout: str = "",
    stderr: str = "",
    exit_code: int | None = 0,
    now: datetime | None = None,
) -> ParsedRun:
    """Read a trajectory file (and the console output). Pure and total."""
    parsed = ParsedRun()
    data = load_json(trajectory)
    info = _dict(data.get("info"))
    stats = _dict(info.get("model_stats"))
    parsed.turns_used = non_negative_int(stats.get("api_calls"))
    # mini prices a call only when the price is above 0 (litellm_model._calculate_cost) and
    # adds 0.0 for an unpriced one: a total of 0.0 is an unknown cost (see mini_usage).
    parsed.read_usage(mini_usage(trajectory))
    messages = data.get("messages")
    messages = messages if isinstance(messages, list) else []
    status = info.get("exit_status") if isinstance(info.get("exit_status"), str) else ""
    submission = info.get("submission")
    if status == "Submitted":
        parsed.stop_reason = StopReason.COMPLETED
        parsed.summary = _final_answer(submission, messages)
    elif status in _BUDGET or (status in ("", "EOFError") and "Limits exceeded." in stdout):
        parsed.stop_reason = StopReason.TURN_BUDGET
        parsed.error = "mini stopped at its step or cost limit"
    elif status in _CONTEXT:
        parsed.stop_reason = StopReason.CONTEXT_BUDGET
        parsed.error = f"{status}: {_exit_text(messages)}".strip(": ")
    elif status:
        apply_fault(parsed, f"{status}: {_exit_text(messages)}".strip(": "), now=now, tool="mini")
    elif data:
        parsed.warnings.append("the trajectory has no exit status: mini did not finish")
    elif exit_code == 0:
        parsed.error = "mini left no trajectory"
    return conclude(parsed, tool="mini", exit_code=exit_code, stderr=stderr, now=now)


def _final_answer(submission: object, messages: list[Any]) -> str | None:
    """The submission, else the text of the model's last message (the one that submitted)."""
    if isinstance(submission, str) and submission.strip():
        return submission.strip()
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            text = content if isinstance(content, str) else _text_parts(content)
            return text.strip() or None
    return None


def _text_parts(content: object) -> str:
    """The text of a message whose content is a list of parts (``{"type": "text", ...}``)."""
    if not isinstance(content, list):
        return ""
    parts = [p.get("text") for p in content if isinstance(p, dict)]
    return "\n".join(p for p in parts if isinstance(p, str))


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _exit_text(messages: list[Any]) -> str:
    """What the final ``exit`` message says about the exception that ended the run."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "exit":
            extra = _dict(message.get("extra"))
            text = extra.get("exception_str") or message.get("content")
            return text if isinstance(text, str) else ""
    return ""
