"""The human progress of a run on stderr (stdout stays for ``--json`` and ``--events``).

Three displays, chosen by ``--progress`` and whether stderr is a terminal
(:func:`assay.cli.progress_choice.progress_for`):
a live one on a terminal (the lines below kept in the scrollback, under them a redrawn footer
with the elapsed time and one line per running seat, :mod:`assay.cli.progress_live`), plain
lines (``--progress always`` when stderr is a file or a pipe: no ANSI), and a quiet one that
says only run warnings (``auto`` off a terminal, ``never``): a warning is not progress, it is
something the operator has to read, and it is in the payload too.

rich is imported only by the displays that draw: a quiet run does not pay for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from assay.core.text import shown
from assay.core.vocab import STOPPED_SAID, AttemptNext, EventKind, StopReason

if TYPE_CHECKING:
    from rich.console import Console

    from assay.engine.effects import RunEvent

Sink = Callable[["RunEvent"], None]

_STYLE = {"pass": "green", "warn": "yellow", "block": "red"}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def shown_data(value: Any) -> Any:
    """Event data with every string as :func:`~assay.core.text.shown` shows it: a file name, a
    coder's error or a finding is one line, with no control or bidi character (a name holding
    a newline would print a progress line of its own)."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, list):
        return [shown_data(item) for item in value]
    if isinstance(value, dict):
        return {key: shown_data(item) for key, item in value.items()}
    return value


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _type_changes(changes: list[Any]) -> str:
    """``; type changed: lib/x.py symlink → file``: a unified diff hides these, so say them."""
    named = [
        f"{c.get('path')} {c.get('before')} → {c.get('after')}"
        for c in changes
        if isinstance(c, dict)
    ]
    if not named:
        return ""
    return "; type changed: " + ", ".join(named[:5]) + (" …" if len(named) > 5 else "")


def _stopped(reason: object) -> str:
    """`` · stopped at its turn budget (max_turns)``: why the coder stopped, when that is
    news (not a coder that finished); a reason this version does not know, as given."""
    if not reason or reason == StopReason.COMPLETED:
        return ""
    known = (
        STOPPED_SAID.get(StopReason(reason))
        if isinstance(reason, str) and reason in set(StopReason)
        else None
    )
    return f" · {known or f'stopped: {reason}'}"


def spent_text(tokens: object, cost: object) -> str:
    """ "1,200 tokens · $0.0312" (a cost only when one is known; "" when nothing is)."""
    parts = []
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        parts.append(f"{tokens:,} tokens")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        parts.append(f"${cost:,.4f}")
    return " · ".join(parts)


def describe(event: RunEvent) -> list[str]:
    """The progress lines (rich markup) one event adds to the scrollback; none for most."""
    data = shown_data(event.data)
    if event.kind == EventKind.RUN_STARTED:
        return [f"[bold]run {data['run_id']}[/bold] · {data['seats']} seat(s)"]
    if event.kind == EventKind.ATTEMPT_STARTED:
        return [f"[bold cyan]attempt {data['attempt']}[/bold cyan]"]
    if event.kind == EventKind.SEAT_FINISHED:
        files = [str(f) for f in _items(data.get("files"))]
        shown = ", ".join(files[:5]) + (" …" if len(files) > 5 else "")
        what = f"{len(files)} file(s) changed ({shown})" if files else "no change"
        what += _type_changes(_items(data.get("type_changes")))
        head, quoted = error_lines(event.data.get("error"))  # split before shown
        err = f" · [red]{head}[/red]" if head else ""
        stop = _stopped(data.get("stop_reason"))
        spent = spent_text(data.get("tokens_used"), data.get("cost_usd"))
        spent = f" · {spent}" if spent else ""
        coder = _escape(f"[{data['coder']}]")
        # Never wrapped by us: a path cut in two cannot be searched for in a log.
        return [f"  seat {data['seat']} {coder}: {_escape(what)}{spent}{stop}{err}", *quoted]
    if event.kind == EventKind.VALIDATOR_FINISHED:
        # An advisory validator that could not run only warns (a run warning says why).
        severity = "error" if data.get("error") and not data.get("advisory") else data["severity"]
        severity = str(severity)
        style = _STYLE.get(severity, "magenta")
        return [f"  validator {data['validator']}: [{style}]{severity}[/{style}]"]
    if event.kind == EventKind.ATTEMPT_DECIDED:
        going = data.get("next", data["action"])  # what the run does, not the bare policy
        why = f": {_escape(str(data['why']))}" if data.get("why") else ""
        lines = [f"  decision: [bold]{going}[/bold] (seat {data['seat']}){why}"]
        return lines + failure_lines(event.data.get("failures"))  # split before shown
    if event.kind == EventKind.JUDGES_RANKED:
        lost = f", {data['lost_to_quota']} lost to quota" if data.get("lost_to_quota") else ""
        if data.get("lost_to_fault"):
            lost += f", {data['lost_to_fault']} lost to a provider fault"
        verdict = f"winner {data['winner']}" if data.get("winner") else "[red]no winner[/red]"
        return [
            f"  judges: {verdict} ({data['present']} usable ranking(s), "
            f"quorum {data['quorum']}{lost})"
        ]
    if event.kind == EventKind.WARNING:
        return [f"  [yellow]warning:[/yellow] {_escape(str(data['message']))}"]
    return []


def failure_lines(failures: object, *, markup: bool = True) -> list[str]:
    """An attempt's failed validators: ``✗ tests: `pytest -q` exited 1``, then the last lines
    of its output each quoted under it (``│ FAILED test_x.py::test_y``), so no line a
    validator printed can pass for one of ours. Rich markup, or plain text (``markup=False``:
    the quiet display, which prints without rich)."""
    cross, bar = ("[red]✗[/red]", "[dim]│[/dim]") if markup else ("✗", "│")
    escape = _escape if markup else str
    lines = []
    for failure in _items(failures):
        head, *output = str(failure).split("\n")
        lines.append(f"    {cross} {escape(shown(head))}")
        lines += [f"      {bar} {escape(shown(line))}" for line in output]
    return lines


def error_lines(error: object, *, markup: bool = True) -> tuple[str, list[str]]:
    """A seat's error: its first line (said on the seat's line), and the last lines of the
    output it quotes, each under it (``│ …``) as a failed validator's are, so a coder's
    output never reads as a line of ours nor as one escaped string. ("", []) for none."""
    from assay.engine.graph.records import SUMMARY_LINES

    if not error:
        return "", []
    bar = "[dim]│[/dim]" if markup else "│"
    escape = _escape if markup else str
    head, *output = str(error).split("\n")
    tail = [line for line in output if line.strip()][-SUMMARY_LINES:]
    return escape(shown(head)), [f"      {bar} {escape(shown(line))}" for line in tail]


def stderr_console() -> Console:
    from rich.console import Console

    # soft_wrap: never cut a path in two (a log is searched for whole paths). No emoji codes:
    # a file named ":warning:" is shown as its name.
    return Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


class Progress:
    """Plain progress lines, one per step of the run, printed as they happen.

    A display is used as a context manager around the work (the live one draws while it is
    open) and as the run's sink; :meth:`view` gives the sink of one of several runs at once.
    """

    def __init__(self, *, quiet: bool = False, console: Console | None = None) -> None:
        self.console = console if console is not None else stderr_console()
        self.quiet = quiet

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def __call__(self, event: RunEvent) -> None:
        self.show(event, label=None)

    def show(self, event: RunEvent, *, label: str | None) -> None:
        if self.quiet:
            return
        for line in describe(event):
            # Lines of several runs at once interleave: each says whose it is.
            self.console.print(f"{_escape(label)}: {line.lstrip()}" if label else line)

    def say(self, text: str) -> None:
        """A line of the command's own news (``serve``'s), taken as plain text: with a live
        display it goes above the footer instead of through it."""
        self.console.print(text, markup=False, highlight=False)

    def notice(self, text: str) -> None:
        """A line a signal handler says (``assay: SIGINT: stopping …``): written at once, as
        it was said, since a handler may not wait for the console's lock."""
        _write_stderr(text)

    def view(self, label: str) -> Sink:
        """The sink of one run among several (``serve --concurrency N``), named ``label``."""
        return lambda event: self.show(event, label=label)

    def ended(self, label: str | None = None) -> None:
        """The run (``label``'s, or the only one) is over: nothing of it is drawn any more."""

    def paused(self) -> AbstractContextManager[None]:
        """Around a write of the command's own to stdout or stderr (a run's result): with a
        live display, its footer is taken away first and drawn again after, so the text never
        shares a line with it."""
        return nullcontext()


class WarningsOnly(Progress):
    """No progress, only what the user must read, as plain text (no rich, no ANSI): run
    warnings, a seat's error (a coder that could not run: a missing key, a bad command),
    which is the operator's to fix, and the validators that failed the attempt that ended
    the run (what they said, their exit, the last lines of their output), as the terminal's
    progress shows them."""

    def __init__(self) -> None:  # no console: nothing here draws
        self.quiet = True

    def say(self, text: str) -> None:
        _write_stderr(text)

    def show(self, event: RunEvent, *, label: str | None) -> None:
        where = f"{label}: " if label else ""
        if event.kind == EventKind.WARNING:
            _write_stderr(f"  warning: {where}{_one_line(event.data.get('message'))}")
        elif event.kind == EventKind.SEAT_FINISHED and event.data.get("error"):
            seat = (
                f"seat {_one_line(event.data.get('seat'))} [{_one_line(event.data.get('coder'))}]"
            )
            head, quoted = error_lines(event.data.get("error"), markup=False)
            _write_stderr(f"  error: {where}{seat}: {head}")
            for line in quoted:
                _write_stderr(f"{label}: {line.lstrip()}" if label else line)
        elif event.kind == EventKind.ATTEMPT_DECIDED and event.data.get("next") == AttemptNext.END:
            for line in failure_lines(event.data.get("failures"), markup=False):
                _write_stderr(f"{label}: {line.lstrip()}" if label else line)


def _one_line(value: object) -> str:
    return shown(str(value if value is not None else ""))


def _write_stderr(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr went away: the payload and the ledger still have it
        pass
