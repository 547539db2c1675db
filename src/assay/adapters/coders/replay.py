"""The ``replay`` coder: scripted, deterministic work, for the demo and for tests.

It stands in for a model where none is reachable, and lets a test say exactly what each attempt
writes: ``coder.steps`` holds one step per attempt (attempt N plays ``steps[N-1]``; the last
step repeats). A step may apply a unified diff (``diff: path``, relative to the repository the
run started from), run a shell command in the worktree (``script: ...``), and leave a report at
``$ASSAY_REPORT_PATH`` (``report:`` inline JSON or a path; ``summary:`` a one-line summary).
The report is written verbatim, so a test can also replay a malformed one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from assay.adapters.coders.base import DispatchRequest, DispatchResult, assay_env
from assay.adapters.coders.command import ERROR_TAIL_CHARS, write_log_file, write_prompt_file
from assay.adapters.process import SHELL, ProcessResult, run_process
from assay.adapters.safe_files import write_file
from assay.adapters.sandbox import confines
from assay.core.contract_rules import REPLAY_STEP_KEYS

STEP_KEYS: frozenset[str] = REPLAY_STEP_KEYS  # one list, so a contract that parses can play


class ReplayError(Exception):
    """A step that cannot be played as written (a bad setting, not a failed attempt)."""


class ReplayCoder:
    """Plays the contract's scripted step for this attempt in the worktree."""

    kind = "replay"
    honoured_settings: frozenset[str] = frozenset({"steps", "timeout_seconds"})

    def dispatch(self, request: DispatchRequest) -> DispatchResult:
        started = time.monotonic()
        try:
            step = pick_step(request.settings.get("steps"), request.attempt)
            report_text = _report_text(step, request)
            patch = _resolve(step["diff"], request) if "diff" in step else None
            if patch is not None and not patch.is_file():
                raise ReplayError(
                    f"the replay diff {step['diff']!r} was not found at {patch}; paths are "
                    "relative to the repository the run started from"
                )
        except ReplayError as exc:
            return DispatchResult(exit_code=None, environment_error=str(exc))
        env = assay_env(request)
        env["ASSAY_PROMPT_FILE"] = str(write_prompt_file(request))
        deadline = started + request.timeout_seconds
        result = DispatchResult(exit_code=0, cost_usd=0.0)  # it calls no model: it costs nothing
        ran: list[ProcessResult] = []
        try:
            if patch is not None:
                patch = _visible_patch(patch, request)
                argv = ["git", "apply", "--whitespace=nowarn", str(patch)]
                ran.append(self._run(argv, "apply", request, env, deadline))
                _judge(ran[-1], result, f"the diff {step['diff']!r} does not apply")
            if "script" in step and result.exit_code == 0 and not result.timed_out:
                argv = [SHELL, "-c", step["script"]]
                ran.append(self._run(argv, "script", request, env, deadline))
                _judge(ran[-1], result, f"the script `{step['script']}` failed")
        except FileNotFoundError as exc:
            result = DispatchResult(
                exit_code=None,
                environment_error=(
                    f"the replay coder could not start {exc.filename!r}: install git "
                    "and make sure the worktree exists"
                ),
            )
        if report_text is not None:  # after the script: a link it left there is replaced
            request.report_path.parent.mkdir(parents=True, exist_ok=True)
            write_file(request.report_path.parent, request.report_path.name, report_text)
        result.log_path = _combined_log(request, ran)
        result.output = "\n".join(r.printed for r in ran)
        result.wall_time_ms = int((time.monotonic() - started) * 1000)
        return result

    @staticmethod
    def _run(
        argv: list[str],
        name: str,
        request: DispatchRequest,
        env: Mapping[str, str],
        deadline: float,
    ) -> ProcessResult:
        return run_process(
            argv,
            cwd=request.worktree,
            env=env,
            timeout=max(deadline - time.monotonic(), 0.01),
            log_path=request.log_dir / f"replay-attempt{request.attempt}-{name}.log",
            sandbox=request.sandbox,
        )


def _visible_patch(patch: Path, request: DispatchRequest) -> Path:
    """The diff where a sandboxed ``git apply`` can read it: the repository it names is hidden
    from the seat, so it is copied beside the seat's logs first."""
    if not confines(request.sandbox):
        return patch
    return write_log_file(request, f"replay-attempt{request.attempt}.diff", patch.read_bytes())


def pick_step(steps: Any, attempt: int) -> dict[str, str]:
    """Attempt N plays ``steps[N-1]``; attempts past the end repeat the last step."""
    if not isinstance(steps, list | tuple) or not steps:
        raise ReplayError(
            "the replay coder has no steps: set `coder.steps` to a list such as "
            '[{diff: fixes/first.diff}, {script: "sed -i s/a/b/ src/x.py"}]'
        )
    raw = steps[min(max(attempt, 1), len(steps)) - 1]
    if not isinstance(raw, Mapping):
        raise ReplayError(f"replay step {attempt} is not a mapping: {raw!r}")
    unknown = sorted(set(raw) - STEP_KEYS)
    if unknown:
        raise ReplayError(
            f"replay step has unknown keys {unknown}; known keys: {sorted(STEP_KEYS)}"
        )
    return {str(key): str(value) for key, value in raw.items()}


def _judge(ran: ProcessResult, result: DispatchResult, what: str) -> None:
    if ran.timed_out:
        result.timed_out = True
        result.exit_code = None
    elif ran.exit_code != 0:
        result.exit_code = ran.exit_code
        result.error = f"{what} (exit {ran.exit_code}): {ran.tail(ERROR_TAIL_CHARS)}"


def _resolve(value: str, request: DispatchRequest) -> Path:
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    return (request.repo_root or Path.cwd()) / path


def _report_text(step: Mapping[str, str], request: DispatchRequest) -> str | None:
    """The report to leave: inline JSON text or a file's text, with ``summary`` merged in."""
    text: str | None = None
    if "report" in step:
        raw = step["report"]
        if raw.lstrip().startswith(("{", "[")):
            text = raw
        else:
            source = _resolve(raw, request)
            if not source.is_file():
                raise ReplayError(f"the replay report {raw!r} was not found at {source}")
            text = source.read_text(encoding="utf-8")
    if "summary" not in step:
        return text
    if text is None:
        return json.dumps({"summary": step["summary"]})
    try:
        data = json.loads(text)
    except ValueError:
        return text  # a deliberately malformed report stays malformed
    if isinstance(data, dict) and "summary" not in data:
        data["summary"] = step["summary"]
        return json.dumps(data)
    return text


def _combined_log(request: DispatchRequest, ran: list[ProcessResult]) -> Path:
    """One log for the dispatch, so the captured output is in one place for the secret scan."""
    parts = [r.log_path.read_text(encoding="utf-8", errors="replace") for r in ran]
    return write_log_file(request, f"coder-attempt{request.attempt}.log", "\n".join(parts))
