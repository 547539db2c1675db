"""The Aider adapter: one ``--message-file`` run, read from its console output.

Aider's exit code is not evidence: it prints a fatal API error and still exits 0. So the
output is scanned for litellm's exception names and aider's own descriptions of them, and an
error counts as the run's end only when no successful model call (a ``Tokens:`` line) follows.

Format sources:
- Scripting flags (``--message-file``, ``--yes-always``, ``--no-auto-commits``,
  ``--no-stream``, ``--no-pretty``, ...): https://aider.chat/docs/scripting.html and
  https://aider.chat/docs/config/options.html.
- The usage line ``Tokens: 2.3k sent, 1.1k cache write, 181 received. Cost: $0.0076 message,
  $0.02 session.`` (counts under 1000 raw, under 10000 as ``1.2k``, else ``12k``): aider's
  ``Coder.calculate_and_show_tokens_and_cost`` in Aider-AI/aider ``aider/coders/base_coder.py``
  and ``format_tokens`` in ``aider/utils.py``; one line per model call.
- Error names and descriptions ("The API provider has rate limited you. ...", "The API
  provider's servers are down or overloaded.", ...): Aider-AI/aider ``aider/exceptions.py``;
  a context overflow prints ``Model X has hit a token limit!`` (``show_exhausted_error``).

Checked against the real aider 0.86.2 (tests/e2e/interop): it still exits 0 after giving up on a
rate limit, which it retries for about a minute first (0.25 s doubling to 32 s, each try with
the client's own retries); a reply naming a file not yet in the chat makes it add the file and
ask the model again before any edit is applied; it leaves ``.aider.tags.cache.v4`` in the
worktree.

The brief reaches aider as a conventions file, ``--read <log dir>/aider.conventions.md``
(https://aider.chat/docs/usage/conventions.html: a ``--read`` file is read-only context, sent
with every request); it lies in the seat's log folder, never in the repository, so it is not
part of the candidate. The final answer is the model's last reply in aider's chat history file
(``--chat-history-file``, unwrapped, unlike the console): it is the summary when no edit was
applied, so a ``NO CHANGE NEEDED:`` reply is a no-op claim. Aider cannot run a command
unattended: ``--yes-always`` answers "n" to "Run shell command?" (``run_shell_commands`` asks
with ``explicit_yes_required=True``), so a command in a reply never runs. The brief therefore
tells the model to write a halt command alone in a ```bash block, and once aider has exited
the adapter fires each halt so proposed itself, never through a shell
(:mod:`assay.adapters.coders.aider_halts`); every other suggested command is left unrun.

Aider has no turn limit, so ``max_turns`` is not honoured, and no spending cap (0.86.2's
options name none): a budget is enforced by the host alone, from the usage line of each reply
(:mod:`assay.adapters.coders.usage_read`). Its history files go to the seat's
output folder (the one folder besides the worktree it may write; the chat history is read
from there safely and a copy kept in the log folder), and a ``.aider.tags.cache*`` directory
it creates in the worktree is removed afterwards: they are aider's bookkeeping, not the seat's
work.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from assay.adapters import folders
from assay.adapters.coders.agentcli import (
    ParsedRun,
    apply_fault,
    conclude,
    model_and_args,
    now_utc,
    run_cli,
    setting,
)
from assay.adapters.coders.aider_halts import fire_proposed, model_replies, proposed_halts
from assay.adapters.coders.base import DispatchRequest, DispatchResult, assay_env
from assay.adapters.coders.command import write_log_file
from assay.adapters.coders.usage_read import AIDER_TOKENS, AiderUsage, read_all
from assay.adapters.coders.usage_watch import UsageSources
from assay.adapters.process import ProcessResult
from assay.adapters.safe_files import keep_copy, remove_file
from assay.core.preflight import install_hint
from assay.core.vocab import StopReason

INSTALL = install_hint("aider")
_TAGS_CACHE = ".aider.tags.cache*"
BRIEF_FILE = "aider.conventions.md"
HISTORY_FILE = "aider.chat.history.md"
INPUT_HISTORY_FILE = "aider.input.history"
_HISTORY_CHARS = 200_000  # the tail read for the final reply
_HALT_HISTORY_CHARS = 4_000_000  # the tail read for proposed halts: the whole dispatch

# An error line starts with litellm's exception (optionally after a short label such as
# "API Error:"), or is one of aider's own descriptions; code in a reply does not count.
_ERROR = re.compile(
    r"^(?:[A-Za-z ]{1,24}:\s*)?(?:litellm\.Timeout\b|(?:litellm\.)?(?:RateLimitError"
    r"|APIError|APIConnectionError|AuthenticationError|BadRequestError"
    r"|ContextWindowExceededError|InternalServerError|ServiceUnavailableError|NotFoundError"
    r"|PermissionDeniedError|BudgetExceededError|ContentPolicyViolationError"
    r"|UnprocessableEntityError|InvalidRequestError|OpenAIError)\b)"
    r"|The API provider(?: has rate limited you|'s servers are down| is not able to authenticate"
    r"| timed out| has refused)"
    r"|has hit a token limit|possibly exhausted context window",
)
_APPLIED = re.compile(r"^Applied edit to (.+)$")


class AiderCoder:
    """Aider with every confirmation answered yes and no commits of its own."""

    kind = "aider"
    honoured_settings = frozenset({"kind", "model", "timeout_seconds", "args", "base_url"})

    def command(
        self, request: DispatchRequest, message_file: Path, brief_file: Path | None = None
    ) -> list[str]:
        model, args = model_and_args(request)
        out = request.output_dir  # aider writes its histories itself
        argv = [
            "aider",
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-check-update",
            "--no-show-model-warnings",
            "--analytics-disable",
            "--no-stream",
            "--no-pretty",
            "--no-fancy-input",
            "--chat-history-file",
            str(out / HISTORY_FILE),
            "--input-history-file",
            str(out / INPUT_HISTORY_FILE),
        ]
        if model:
            argv += ["--model", model]
        base_url = setting(request, "base_url")
        if isinstance(base_url, str) and base_url:
            argv += ["--openai-api-base", base_url]
        if brief_file is not None:
            argv += ["--read", str(brief_file)]  # read-only context: aider's conventions file
        return [*argv, *args, "--message-file", str(message_file)]

    def dispatch(self, request: DispatchRequest) -> DispatchResult:
        message_file = write_log_file(request, "aider.message.md", request.prompt)
        brief_file = write_brief(request)
        request.output_dir.mkdir(parents=True, exist_ok=True)
        remove_file(request.output_dir, HISTORY_FILE)  # aider appends: this dispatch's only
        before = set(request.worktree.glob(_TAGS_CACHE))
        history: list[str | None] = [None]  # read once aider has exited, for the halts too

        def parse(proc: ProcessResult) -> ParsedRun:
            history[0], warning = keep_history(request)
            parsed = parse_aider_output(
                proc.stdout,
                stderr=proc.stderr,
                exit_code=proc.exit_code,
                now=now_utc(),
                history=history[0][-_HISTORY_CHARS:] if history[0] else None,
            )
            parsed.warnings += [warning] if warning else []
            return parsed

        try:
            result = run_cli(
                request,
                tool="aider",
                install=INSTALL,
                argv=self.command(request, message_file, brief_file),
                env=assay_env(request),
                parse=parse,
                usage=usage_sources(),
            )
        finally:
            for path in set(request.worktree.glob(_TAGS_CACHE)) - before:
                folders.remove_tree(path)  # never followed, at any depth
        # aider has exited (its process group with it): fire the halts its replies proposed.
        proposals = proposed_halts(history[0], request.dispatch_id)
        result.warnings += fire_proposed(proposals, request.dispatch_id, request.halt_state_dir)
        return result


def usage_sources(*, output_dir: Path | None = None, home: Path | None = None) -> UsageSources:
    """Where aider reports its usage: a ``Tokens:`` line (and a cost) per reply on stdout."""
    return UsageSources(stdout=AiderUsage())


def keep_history(request: DispatchRequest) -> tuple[str | None, str | None]:
    """The tail of the chat history aider wrote in the output folder (the final reply is at
    its end), read safely and kept in the log folder; with a warning when it was refused."""
    folder = request.output_dir.resolve()
    read = keep_copy(
        folder / HISTORY_FILE,
        folder,
        _HALT_HISTORY_CHARS,
        request.log_dir / HISTORY_FILE,
        tail=True,
    )
    warning = f"aider's chat history was not read: {read.warning}" if read.warning else None
    if read.data is None:
        return None, warning
    return read.data.decode("utf-8", errors="replace"), warning


def write_brief(request: DispatchRequest) -> Path | None:
    """The brief as aider's conventions file, in the seat's log folder: outside the repository,
    so it is never part of the candidate (and aider cannot edit a ``--read`` file)."""
    if not request.brief.strip():
        request.log_dir.mkdir(parents=True, exist_ok=True)
        remove_file(request.log_dir, BRIEF_FILE)
        return None
    return write_log_file(request, BRIEF_FILE, request.brief)


def final_reply(history: str | None) -> str | None:
    """The model's last reply in aider's chat history file, or None (see ``model_replies``)."""
    replies = model_replies(history)
    return replies[-1] if replies else None


def parse_aider_output(
    stdout: str,
    *,
    stderr: str = "",
    exit_code: int | None = 0,
    now: datetime | None = None,
    history: str | None = None,
) -> ParsedRun:
    """Read aider's console output (and its chat history file, for the model's final reply).
    Pure and total: any text gives a ParsedRun."""
    parsed = ParsedRun()
    lines = (stdout + "\n" + stderr).splitlines()
    turns = 0
    last_call = -1
    errors: list[tuple[int, str]] = []
    applied: list[str] = []
    for index, raw in enumerate(lines):
        line = raw.strip()
        if AIDER_TOKENS.search(line):
            turns += 1
            last_call = index
        elif _ERROR.search(line):
            errors.append((index, line))
        elif match := _APPLIED.match(line):
            applied.append(match.group(1).strip())
    parsed.turns_used = turns or None
    parsed.read_usage(read_all(AiderUsage(), stdout).figures())
    if applied:
        parsed.summary = "Applied edit to " + ", ".join(dict.fromkeys(applied))
    else:  # the final answer: a ``NO CHANGE NEEDED:`` claim, or why nothing was edited
        parsed.summary = final_reply(history)
    fatal = [line for index, line in errors if index > last_call]
    if fatal:
        apply_fault(parsed, " ".join(fatal[-6:]), now=now, tool="aider")
    elif exit_code == 0:
        parsed.stop_reason = StopReason.COMPLETED
        if turns == 0:
            parsed.warnings.append("aider printed no usage line: it may not have called a model")
    return conclude(parsed, tool="aider", exit_code=exit_code, stderr=stderr, now=now)
