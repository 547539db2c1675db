"""The ``llm`` coder: assay's own tool loop over any OpenAI-compatible chat endpoint.

For models that come without an agent program of their own (a local server, a gateway). The
model gets a few tools and nothing else: list, read, write and replace files, run one of the
contract's command validators, fire a halt, finish. Every path goes through :func:`confine`,
so no absolute path, ``..`` escape or symlink reaches outside the worktree. What the loop
returns is evidence (files it wrote, turns, tokens, why it stopped), never a verdict.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path, PurePosixPath
from typing import Any

from assay.adapters import folders
from assay.adapters.coders.agentcli import turn_limit
from assay.adapters.coders.base import DispatchRequest, DispatchResult, ProviderFault
from assay.adapters.envpolicy import model_environment
from assay.adapters.llm_client import (
    ChatClient,
    FailureKind,
    LlmError,
    ToolCallRequest,
    function_tool,
    resolve_endpoint,
)
from assay.adapters.process import SHELL, run_process
from assay.adapters.run_files import writing
from assay.adapters.safe_files import append_file, write_file
from assay.adapters.stop_request import stopping_now
from assay.adapters.store import halt_ops
from assay.core.quota import Quota
from assay.core.report import CoderReport, FileChange
from assay.core.vocab import FileChangeKind, StopReason

DEFAULT_MAX_TURNS = 30
VALIDATOR_TIMEOUT = 600.0
LIST_LIMIT = 500
# How much of the worktree a listing looks through for them (the coder shapes the tree).
LIST_WALK_LIMIT = 50 * LIST_LIMIT
LIST_DEPTH_LIMIT = 64
READ_LIMIT = 60_000
OUTPUT_TAIL = 3000
TRANSCRIPT = "llm-transcript.jsonl"

SYSTEM_PROMPT = """\
You are a coding agent working alone in a git worktree. Change the files so that the task is \
done, using only the tools. Paths are relative to the worktree root; nothing outside it can be \
read or written. Do not commit. Run the validators to check your work when they help.
If the task names a file, symbol or line that does not exist, contradicts itself or the code, \
or needs an action that cannot be undone, do not guess: fire the matching halt \
(halt-anchor-resolution-failure, halt-spec-contradiction, halt-irreversible-action) with \
evidence, then finish.
When you are done, call finish with a short summary of what you changed and why."""

NUDGE = "Answer with tool calls only. Call finish(summary) when the task is done."

TOOLS: list[dict[str, Any]] = [
    function_tool(
        "list_files",
        "List the files under a directory of the worktree (recursively; '.' for the root).",
        {"path": {"type": "string"}},
        ["path"],
    ),
    function_tool("read_file", "Read a text file.", {"path": {"type": "string"}}, ["path"]),
    function_tool(
        "write_file",
        "Create or overwrite a file with the given content.",
        {"path": {"type": "string"}, "content": {"type": "string"}},
        ["path", "content"],
    ),
    function_tool(
        "replace",
        "Replace the one exact occurrence of `old` in a file with `new`.",
        {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
        ["path", "old", "new"],
    ),
    function_tool(
        "run_validator",
        "Run one of the task's validator commands in the worktree; returns exit code and output.",
        {"id": {"type": "string"}},
        ["id"],
    ),
    function_tool(
        "fire_halt",
        "Fire a halt class with evidence, to stop the task for a human.",
        {"name": {"type": "string"}, "evidence": {"type": "string"}},
        ["name", "evidence"],
    ),
    function_tool(
        "finish",
        "Stop working and report what you changed.",
        {"summary": {"type": "string"}},
        ["summary"],
    ),
]


class PathRefused(ValueError):
    """A tool asked for a path outside the worktree (or inside its ``.git``)."""


def confine(root: Path, raw: str) -> Path:
    """The real path of ``raw`` inside ``root``; raises :class:`PathRefused` otherwise.

    Symlinks are resolved before the check, so a link that leads outside is refused too.
    """
    if not raw or "\x00" in raw:
        raise PathRefused("a non-empty path is required")
    if PurePosixPath(raw).is_absolute() or Path(raw).is_absolute():
        raise PathRefused(f"{raw!r} is absolute; give a path relative to the worktree")
    base = root.resolve()
    target = (base / raw).resolve()
    if target != base and base not in target.parents:
        raise PathRefused(f"{raw!r} leads outside the worktree")
    if target.relative_to(base).parts[:1] == (".git",):
        raise PathRefused(f"{raw!r} is inside .git, which is not part of the work")
    return target


class LlmCoder:
    """Drives a chat model through the tool loop until it finishes or a budget runs out."""

    kind = "llm"
    honoured_settings = frozenset(
        {"model", "base_url", "api_key_env", "max_turns", "timeout_seconds"}
    )

    def dispatch(self, request: DispatchRequest) -> DispatchResult:
        started = time.monotonic()
        request.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = request.log_dir / TRANSCRIPT
        # The key is read by assay itself, never handed to a child process.
        environ = {**model_environment(os.environ, self.kind, request.settings), **request.env}
        try:
            endpoint = resolve_endpoint(
                request.settings, environ, timeout=request.timeout_seconds, role="llm coder"
            )
            client = ChatClient(endpoint)
        except LlmError as exc:  # no key, no model: the operator's setting
            return DispatchResult(exit_code=None, setting_error=exc.detail, log_path=log_path)
        max_turns = turn_limit(request) or DEFAULT_MAX_TURNS
        session = _Session(request, client, max_turns, started, log_path)
        return session.run()


class _Session:
    """One dispatch's conversation, its counters and the files it wrote."""

    def __init__(
        self,
        request: DispatchRequest,
        client: ChatClient,
        max_turns: int,
        started: float,
        log_path: Path,
    ) -> None:
        self.request = request
        self.client = client
        self.max_turns = max_turns
        self.started = started
        self.deadline = started + request.timeout_seconds
        self.log_path = log_path
        self.root = request.worktree.resolve()
        self.written: dict[str, FileChangeKind] = {}
        self.validator_runs = 0
        if request.meter is not None:  # every answer journaled as it arrives
            client.on_spent = request.meter.report
        self.output: list[str] = []  # the transcript's events after its start (the system prompt)

    def run(self) -> DispatchResult:
        system = SYSTEM_PROMPT + self._validator_note()
        if self.request.brief:  # the dispatch's rules: scope, halts, the no-op protocol
            system += "\n\n" + self.request.brief
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": self.request.prompt},
        ]
        self._log(event="start", model=self.client.endpoint.model, system=system)
        turns = tokens = 0
        stop: StopReason | None = None
        summary: str | None = None
        quota: Quota | None = None
        error: str | None = None
        setting_error: str | None = None
        stopped: str | None = None
        timed_out = False
        while stop is None:
            remaining = self.deadline - time.monotonic()
            if turns >= self.max_turns:
                stop = StopReason.TURN_BUDGET
                break
            if remaining <= 0:
                timed_out = True
                break
            meter = self.request.meter
            if meter is not None and (stopped := meter.stop_reason()) is not None:
                error = f"stopped by assay: {stopped}"
                self._log(event="stopped", reason=stopped)
                break
            if (why := stopping_now()) is not None:  # the run is being stopped
                error = f"stopped by assay: {why}"
                self._log(event="stopped", reason=why)
                break
            # Written before the call: a host that dies while it waits leaves this last, so its
            # recovery knows the provider may have spent on an answer nobody journaled.
            self._log(event="call", turn=turns + 1)
            try:
                reply = self.client.complete(messages, tools=TOOLS, timeout=remaining)
            except LlmError as exc:
                self._log(event="error", kind=exc.kind.value, detail=exc.detail)
                if exc.kind is FailureKind.PROVIDER and time.monotonic() >= self.deadline:
                    timed_out = True
                elif exc.kind is FailureKind.CONFIG:  # a key refused, a model unknown
                    setting_error = exc.detail
                else:
                    stop, error, quota = _stop_for(exc), exc.detail, exc.quota
                break
            turns += 1
            tokens += reply.total_tokens
            self._log(event="reply", turn=turns, message=reply.as_message(), tokens=tokens)
            messages.append(reply.as_message())
            if not reply.tool_calls:
                messages.append({"role": "user", "content": NUDGE})
                continue
            for call in reply.tool_calls:
                result, finished = self._run_tool(call)
                self._log(event="tool", turn=turns, name=call.name, result=result[:OUTPUT_TAIL])
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
                if finished is not None:
                    stop, summary = StopReason.COMPLETED, finished
                    break
        wall = int((time.monotonic() - self.started) * 1000)
        report = CoderReport(
            files=[FileChange(path=p, kind=k) for p, k in sorted(self.written.items())],
            summary=summary,
            turns_used=turns,
            turns_available=self.max_turns,
            tokens_used=tokens,
            wall_time_ms=wall,
            stop_reason=stop,
        )
        self._log(event="end", stop_reason=stop, timed_out=timed_out, error=error)
        self._write_report(report)
        lost = stop is StopReason.PROVIDER_FAULT and quota is None
        return DispatchResult(
            exit_code=_exit_code(stop, timed_out or setting_error is not None),
            fault=ProviderFault(f"llm: {error}") if lost else None,
            stop_reason=stop,
            report=report,
            tokens_used=tokens,
            turns_used=turns,
            wall_time_ms=wall,
            timed_out=timed_out,
            quota=quota,
            setting_error=setting_error,
            error=error,
            log_path=self.log_path,
            output="\n".join(self.output),
            usage=self.client.spent if self.client.spent.calls else None,
            stopped=stopped,
        )

    def _validator_note(self) -> str:
        commands = self.request.validator_commands
        if not commands:
            return "\nThis task declares no validator commands."
        lines = "\n".join(f"- {vid}: {command}" for vid, command in sorted(commands.items()))
        return f"\nValidators you can run with run_validator(id):\n{lines}"

    def _run_tool(self, call: ToolCallRequest) -> tuple[str, str | None]:
        """The tool's result text, and the summary when the tool was ``finish``."""
        try:
            args = call.parsed_arguments()
        except ValueError as exc:
            return f"error: the arguments are not a JSON object ({exc})", None
        try:
            if call.name == "finish":
                return "finished", str(args.get("summary", ""))
            handler = getattr(self, f"_tool_{call.name}", None)
            if handler is None or call.name not in _TOOL_NAMES:
                return f"error: unknown tool {call.name!r}", None
            return str(handler(**args)), None
        except PathRefused as exc:
            return f"error: refused: {exc}", None
        except TypeError as exc:
            return f"error: bad arguments for {call.name}: {exc}", None
        except OSError as exc:
            return f"error: {exc.strerror or exc}", None

    def _tool_list_files(self, path: str = ".") -> str:
        target = confine(self.root, path)
        if target.is_file():
            return target.relative_to(self.root).as_posix()
        if not target.is_dir():
            return f"error: {path!r} does not exist"
        entries: list[str] = []
        # A worktree's .git (a directory, or a file in a linked worktree) is not the work.
        top_git = self.root / ".git"
        listed = folders.walk(
            target,
            max_entries=LIST_WALK_LIMIT,
            max_depth=LIST_DEPTH_LIMIT,
            skip=lambda entry: entry.path == top_git,
        )
        for entry in listed:
            if not entry.is_dir:
                entries.append(entry.path.relative_to(self.root).as_posix())
                if len(entries) > LIST_LIMIT:
                    break
        if len(entries) > LIST_LIMIT:
            entries = [*entries[:LIST_LIMIT], f"... and more (listing stops at {LIST_LIMIT})"]
        elif listed.cut:
            entries.append(f"... and more ({listed.cut[0]})")
        return "\n".join(entries) or "(empty)"

    def _tool_read_file(self, path: str) -> str:
        target = confine(self.root, path)
        if not target.is_file():
            return f"error: {path!r} is not a file"
        text = target.read_bytes().decode("utf-8", errors="replace")
        if len(text) > READ_LIMIT:
            return text[:READ_LIMIT] + f"\n... (truncated: {len(text)} characters in all)"
        return text

    def _tool_write_file(self, path: str, content: str) -> str:
        target = confine(self.root, path)
        if target.is_dir():
            return f"error: {path!r} is a directory"
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(str(content).encode("utf-8"))
        self._wrote(target, existed)
        return f"wrote {len(content)} characters to {target.relative_to(self.root).as_posix()}"

    def _tool_replace(self, path: str, old: str, new: str) -> str:
        target = confine(self.root, path)
        if not target.is_file():
            return f"error: {path!r} is not a file"
        if not old:
            return "error: `old` must not be empty"
        text = target.read_bytes().decode("utf-8")
        count = text.count(old)
        if count != 1:
            what = "not found" if count == 0 else f"found {count} times; include more context"
            return f"error: `old` {what} in {path!r}; nothing changed"
        target.write_bytes(text.replace(old, str(new), 1).encode("utf-8"))
        self._wrote(target, existed=True)
        return f"replaced 1 occurrence in {target.relative_to(self.root).as_posix()}"

    def _tool_run_validator(self, id: str) -> str:
        command = self.request.validator_commands.get(id)
        if command is None:
            known = ", ".join(sorted(self.request.validator_commands)) or "none"
            return f"error: no validator command {id!r} (known: {known})"
        self.validator_runs += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", id)
        log = self.request.log_dir / f"llm-validator-{self.validator_runs}-{safe}.log"
        remaining = max(1.0, self.deadline - time.monotonic())
        result = run_process(
            [SHELL, "-c", command],
            cwd=self.root,
            env=dict(self.request.env),
            timeout=min(VALIDATOR_TIMEOUT, remaining),
            log_path=log,
            sandbox=self.request.sandbox,
        )
        head = "timed out" if result.timed_out else f"exit code: {result.exit_code}"
        return f"{head}\n{result.tail(OUTPUT_TAIL)}"

    def _tool_fire_halt(self, name: str, evidence: str) -> str:
        if not str(evidence).strip():
            return "error: evidence is required to fire a halt"
        doc, _ = halt_ops.check(
            self.request.dispatch_id,
            name,
            self.request.halt_state_dir,
            fire=True,
            evidence=str(evidence),
        )
        keys = ("fired", "condition", "violations", "warnings")
        return json.dumps({key: doc[key] for key in keys if key in doc})

    def _wrote(self, target: Path, existed: bool) -> None:
        rel = target.relative_to(self.root).as_posix()
        self.written.setdefault(rel, FileChangeKind.MODIFIED if existed else FileChangeKind.CREATED)

    def _log(self, **event: Any) -> None:
        # Appended event by event, so a crash keeps everything before it.
        # A machine fault here (the file-size limit, a full disk) is named with the transcript.
        line = json.dumps(event, default=str)
        with writing(self.log_path), append_file(self.log_path) as handle:
            handle.write((line + "\n").encode("utf-8", errors="replace"))
        if event.get("event") not in ("start", "call"):
            self.output.append(line)

    def _write_report(self, report: CoderReport) -> None:
        path = self.request.report_path
        try:  # a link a validator run left in the output folder is replaced, never followed
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(path.parent, path.name, report.model_dump_json(exclude_none=True))
        except OSError as exc:
            self._log(event="report_not_written", detail=str(exc))


_TOOL_NAMES = frozenset(tool["function"]["name"] for tool in TOOLS)


def _stop_for(exc: LlmError) -> StopReason:
    if exc.kind is FailureKind.CONTEXT:
        return StopReason.CONTEXT_BUDGET
    if exc.kind is FailureKind.REQUEST:
        return StopReason.ABANDONED
    return StopReason.PROVIDER_FAULT


def _exit_code(stop: StopReason | None, no_exit: bool) -> int | None:
    """No process ran; 0 when the loop ended on its own terms, as an agent program would."""
    if no_exit:
        return None
    ended_cleanly = (StopReason.COMPLETED, StopReason.TURN_BUDGET, StopReason.CONTEXT_BUDGET)
    return 0 if stop in ended_cleanly else 1
