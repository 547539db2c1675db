"""The ``command`` coder: any command line as a coder.

It is the escape hatch for tools assay has no adapter for, and the simplest honest adapter:
the command runs in the worktree, what it wrote is read back from disk by the engine, and the
adapter reports only what it can see (exit code, timeout, wall time). It parses no output, so
it derives no report; a command that wants to report writes ``$ASSAY_REPORT_PATH`` itself.

The prompt is always written to a file outside the worktree (``$ASSAY_PROMPT_FILE``, and
``{prompt_file}`` in the command line is replaced by its path); ``prompt_via: stdin`` also
pipes it to the command's stdin, and ``prompt_via: env`` also sets ``$ASSAY_PROMPT``. The
brief (the rules: scope, halts, report, the no-op protocol) is in the file at
``$ASSAY_BRIEF_PATH``, next to the prompt file.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from assay.adapters.coders.agentcli import stopped_error
from assay.adapters.coders.base import DispatchRequest, DispatchResult, assay_env
from assay.adapters.coders.usage_watch import UsageSources, UsageWatch
from assay.adapters.preflight import command_problem
from assay.adapters.process import (
    SHELL,
    SHELL_NOT_EXECUTABLE,
    SHELL_NOT_FOUND,
    ProcessResult,
    run_process,
)
from assay.adapters.safe_files import write_file

PROMPT_PLACEHOLDER = "{prompt_file}"
# What a failed dispatch keeps of the output in its error text (the whole output is in the log).
ERROR_TAIL_CHARS = 1200


class CommandCoder:
    """Runs ``coder.command`` (a shell string or an argv list) in the worktree."""

    kind = "command"
    honoured_settings: frozenset[str] = frozenset(
        {"command", "prompt_via", "timeout_seconds", "args"}
    )

    def dispatch(self, request: DispatchRequest) -> DispatchResult:
        command = request.settings.get("command")
        if not command:
            return DispatchResult(
                exit_code=None,
                environment_error=(
                    "the command coder has no command to run: set `coder.command` in the "
                    'contract (a shell string such as "my-agent --prompt-file {prompt_file}", '
                    "or a list of arguments)"
                ),
            )
        prompt_file = write_prompt_file(request)
        via = str(request.settings.get("prompt_via") or "file")
        argv = build_argv(command, prompt_file, _string_list(request.settings.get("args")))
        env = assay_env(request)
        env["ASSAY_PROMPT_FILE"] = str(prompt_file)
        env["ASSAY_BRIEF_PATH"] = str(write_brief_file(request))
        if via == "env":
            env["ASSAY_PROMPT"] = request.prompt
        log_path = request.log_dir / f"coder-attempt{request.attempt}.log"
        try:
            ran = run_process(
                argv,
                cwd=request.worktree,
                env=env,
                timeout=request.timeout_seconds,
                log_path=log_path,
                stdin=request.prompt if via == "stdin" else None,
                sandbox=request.sandbox,
                # It reports no usage, but a budget its run's other seats spent stops it too.
                watch=UsageWatch(UsageSources(), request.meter) if request.meter else None,
            )
        except FileNotFoundError as exc:
            if exc.filename is not None and Path(str(exc.filename)) == request.worktree:
                missing = (
                    f"the worktree {request.worktree} does not exist; the run's preparation failed"
                )
                return DispatchResult(exit_code=None, environment_error=missing)
            return DispatchResult(
                exit_code=None, setting_error=missing_executable_message(request, command, env)
            )
        except PermissionError as exc:  # not executable: the operator's file
            return DispatchResult(
                exit_code=None,
                setting_error=(
                    f"the command coder could not start {argv[0]!r}: {exc.strerror or exc}; "
                    "check `coder.command`"
                ),
                log_path=log_path,
            )
        except OSError as exc:  # an argument list too long, ...
            return DispatchResult(
                exit_code=None,
                environment_error=(
                    f"the command coder could not start {argv[0]!r}: {exc.strerror or exc}; "
                    "check `coder.command` (and use prompt_via: file for a long prompt)"
                ),
                log_path=log_path,
            )
        result = result_from_process(ran, argv, shell=isinstance(command, str))
        if result.setting_error is not None:  # say why, as the preflight does, when it can
            found = command_problem(
                "the command coder",
                command,
                env,
                request.sandbox,
                fix="`coder.command`",
                declared_shown=True,
            )
            if found:
                said = ran.tail(400) or "nothing"
                result.setting_error = f"{'; '.join(found)} (exit {ran.exit_code}: {said})"
        return result


def write_prompt_file(request: DispatchRequest) -> Path:
    """Write the prompt next to the seat's logs: outside the worktree, so never in the diff."""
    return write_log_file(request, f"prompt-attempt{request.attempt}.md", request.prompt)


def write_brief_file(request: DispatchRequest) -> Path:
    """Write the brief (the dispatch's rules) next to the seat's logs, for ``$ASSAY_BRIEF_PATH``."""
    return write_log_file(request, f"brief-attempt{request.attempt}.md", request.brief)


def write_log_file(request: DispatchRequest, name: str, text: str | bytes) -> Path:
    """A new file ``name`` in the seat's log folder (the engine's: a program may read it, never
    write it), written without following a link; its absolute path."""
    request.log_dir.mkdir(parents=True, exist_ok=True)
    return write_file(request.log_dir, name, text).resolve()


def build_argv(command: str | Sequence[str], prompt_file: Path, args: Sequence[str]) -> list[str]:
    """A shell string runs via ``/bin/sh -c``; a list is the argv itself (no shell)."""
    if isinstance(command, str):
        line = command.replace(PROMPT_PLACEHOLDER, shlex.quote(str(prompt_file)))
        if args:
            line = " ".join([line, *(shlex.quote(a) for a in args)])
        return [SHELL, "-c", line]
    argv = [str(part).replace(PROMPT_PLACEHOLDER, str(prompt_file)) for part in command]
    return [*argv, *args]


def result_from_process(ran: ProcessResult, argv: Sequence[str], *, shell: bool) -> DispatchResult:
    """Map what the process did onto a dispatch result; a timeout is a fact, not a stop reason."""
    result = DispatchResult(
        exit_code=ran.exit_code,
        wall_time_ms=ran.wall_time_ms,
        timed_out=ran.timed_out,
        log_path=ran.log_path,
        output=ran.printed,
        refused=list(ran.refused),
        stopped=ran.stopped,
    )
    if ran.stopped is not None:
        result.error = stopped_error(ran.stopped)
        return result
    if ran.timed_out or ran.exit_code == 0:
        return result
    shown = argv[-1] if shell else shlex.join(argv)
    if shell and ran.exit_code in (SHELL_NOT_FOUND, SHELL_NOT_EXECUTABLE):
        what = "was not found" if ran.exit_code == SHELL_NOT_FOUND else "is not executable"
        result.setting_error = (
            f"the command coder's command {what} (exit {ran.exit_code}): "
            f"{ran.tail(400) or shown}; install the tool or fix `coder.command`"
        )
        return result
    tail = ran.tail(ERROR_TAIL_CHARS)  # on lines of its own: shown quoted, under the error
    result.error = f"`{shown}` exited with code {ran.exit_code}" + (
        f"; output tail:\n{tail}" if tail else ""
    )
    return result


def missing_executable_message(
    request: DispatchRequest, command: str | Sequence[str], env: Mapping[str, str]
) -> str:
    """Why the command coder's executable could not be found, as the preflight says it."""
    found = command_problem(
        "the command coder", command, env, request.sandbox, fix="`coder.command`",
        declared_shown=True,
    )  # fmt: skip
    if found:
        return "; ".join(found)
    program = command if isinstance(command, str) else (list(command) or ["?"])[0]
    return (
        f"the command coder's executable {str(program)!r} was not found on the PATH given to "
        "coders; install it, or name it by absolute path in `coder.command`"
    )


def _string_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [str(value)]
