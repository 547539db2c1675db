"""Live progress of a run, printed as it happens (to stderr, so ``--json`` stdout stays clean)."""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue
from rich.console import Console
from rich.markup import escape

from assay.core.text import printable
from assay.core.vocab import EventKind
from assay.engine.effects import RunEvent

_STYLE = {"pass": "green", "warn": "yellow", "block": "red"}


def _items(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _printable(value: JsonValue) -> Any:
    """Event data with every string made safe for the terminal (coder output, instructions)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [_printable(item) for item in value]
    if isinstance(value, dict):
        return {key: _printable(item) for key, item in value.items()}
    return value


def _type_changes(changes: list[JsonValue]) -> str:
    """``; type changed: lib/x.py symlink → file``: a unified diff hides these, so say them."""
    named = [
        f"{c.get('path')} {c.get('before')} → {c.get('after')}"
        for c in changes
        if isinstance(c, dict)
    ]
    if not named:
        return ""
    return "; type changed: " + ", ".join(named[:5]) + (" …" if len(named) > 5 else "")


class Progress:
    def __init__(self, *, quiet: bool = False) -> None:
        self.console = Console(
            stderr=True, highlight=False, soft_wrap=True
        )  # never cut a path in two
        self.quiet = quiet

    def __call__(self, event: RunEvent) -> None:
        if self.quiet:
            return
        data = _printable(event.data)
        out = self.console.print
        if event.kind == EventKind.RUN_STARTED:
            out(f"[bold]run {data['run_id']}[/bold] · {data['seats']} seat(s)")
        elif event.kind == EventKind.ATTEMPT_STARTED:
            out(f"[bold cyan]attempt {data['attempt']}[/bold cyan]")
        elif event.kind == EventKind.SEAT_FINISHED:
            files = [str(f) for f in _items(data.get("files"))]
            shown = ", ".join(files[:5]) + (" …" if len(files) > 5 else "")
            what = f"{len(files)} file(s) changed ({shown})" if files else "no change"
            what += _type_changes(_items(data.get("type_changes")))
            err = f" · [red]{escape(str(data['error']))}[/red]" if data.get("error") else ""
            stop = f" · stopped: {data['stop_reason']}" if data.get("stop_reason") else ""
            coder = escape(f"[{data['coder']}]")
            # Never wrapped by us: a path cut in two cannot be searched for in a log.
            out(f"  seat {data['seat']} {coder}: {escape(what)}{stop}{err}")
        elif event.kind == EventKind.VALIDATOR_FINISHED:
            severity = "error" if data.get("error") else str(data["severity"])
            style = _STYLE.get(severity, "magenta")
            out(f"  validator {data['validator']}: [{style}]{severity}[/{style}]")
        elif event.kind == EventKind.ATTEMPT_DECIDED:
            going = data.get("next", data["action"])  # what the run does, not the bare policy
            why = f": {escape(str(data['why']))}" if data.get("why") else ""
            out(f"  decision: [bold]{going}[/bold] (seat {data['seat']}){why}")
            for failure in _items(data.get("failures")):
                out(f"    [red]✗[/red] {escape(str(failure))}")
        elif event.kind == EventKind.JUDGES_RANKED:
            lost = f", {data['lost_to_quota']} lost to quota" if data.get("lost_to_quota") else ""
            if data.get("lost_to_fault"):
                lost += f", {data['lost_to_fault']} lost to a provider fault"
            verdict = f"winner {data['winner']}" if data.get("winner") else "[red]no winner[/red]"
            out(
                f"  judges: {verdict} ({data['present']} usable ranking(s), "
                f"quorum {data['quorum']}{lost})"
            )
        elif event.kind == EventKind.WARNING:
            out(f"  [yellow]warning:[/yellow] {escape(str(data['message']))}")
