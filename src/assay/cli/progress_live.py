"""The live progress on a terminal: the run's lines kept in the scrollback, and under them a
footer redrawn four times a second with the elapsed time and one line per running seat
(its coder, what it is doing, for how long). The footer goes when the display closes; what
stays is the lines, and one that says how long each run took."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assay.cli.progress import Progress, shown_data, spent_text
from assay.core.vocab import EventKind

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.live import Live
    from rich.text import Text

    from assay.engine.effects import RunEvent

REFRESH_PER_SECOND = 4


def clock_text(seconds: float) -> str:
    """``0:07``, ``12:34``, ``1:02:03``: elapsed time as people read it."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class _Seat:
    coder: str
    since: float
    state: str = "coding"
    until: float | None = None  # when it stopped counting (no candidate to check)
    spent: str = ""  # what its program reported spending so far ("1,200 tokens · $0.0312")


@dataclass
class _Run:
    since: float
    run_id: str = ""
    attempt: int | None = None
    state: str = "starting"
    seats: dict[int, _Seat] = field(default_factory=dict)


class LiveProgress(Progress):
    """Plain lines above, a live footer below (see the module's docstring)."""

    def __init__(
        self,
        *,
        console: Console | None = None,
        clock: Callable[[], float] = time.monotonic,
        idle: str = "",
    ) -> None:
        super().__init__(console=console)
        self.clock = clock
        self.idle = idle  # what the footer says with no run in progress (serve: waiting)
        self.since = clock()
        self.runs: dict[str | None, _Run] = {}
        self._lock = threading.RLock()
        self._live: Live | None = None
        self._notice: str | None = None  # a signal handler's line, printed by the next call

    def __enter__(self) -> LiveProgress:
        from rich.live import Live

        self._live = Live(
            _Footer(self),
            console=self.console,
            refresh_per_second=REFRESH_PER_SECOND,
            transient=True,  # the footer goes; the lines printed above it stay
            redirect_stdout=False,  # stdout is --json's and --events'
            redirect_stderr=False,
        )
        self._live.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        self._print_notice()

    def notice(self, text: str) -> None:
        # Called in a signal handler: no lock and no write here. A line written through the
        # footer would share its line and leave a copy of it behind when it is redrawn; the
        # next line the display prints (the stopped seat's, the result's) prints it first.
        self._notice = text

    def _print_notice(self) -> None:
        with self._lock:
            text, self._notice = self._notice, None
        if text:
            self.console.print(text, markup=False, highlight=False)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The footer goes (its lines erased, the cursor where its first line was) while the
        caller writes, to whichever stream, and comes back under what was written."""
        # Not under self._lock: the footer's refresh takes Live's lock, then ours.
        self._print_notice()
        live = self._live
        if live is None or not live.is_started:
            yield
            return
        live.stop()
        try:
            yield
        finally:
            for stream in (sys.stdout, sys.stderr):
                with suppress(OSError, ValueError):
                    stream.flush()  # what was written is on the screen before the footer
            live.start(refresh=True)

    def show(self, event: RunEvent, *, label: str | None) -> None:
        self._print_notice()
        with self._lock:
            self._track(event, label)
        super().show(event, label=label)

    def say(self, text: str) -> None:
        self._print_notice()
        super().say(text)

    def ended(self, label: str | None = None) -> None:
        self._print_notice()
        with self._lock:
            run = self.runs.pop(label, None)
        if run is not None and run.run_id:
            took = clock_text(self.clock() - run.since)
            self.console.print(f"[dim]run {run.run_id} took {took}[/dim]")

    # -- what the footer shows -------------------------------------------------------------

    def _track(self, event: RunEvent, label: str | None) -> None:
        now = self.clock()
        data: dict[str, Any] = shown_data(event.data)
        run = self.runs.setdefault(label, _Run(since=now))
        if event.kind == EventKind.RUN_STARTED:
            run.run_id = str(data.get("run_id") or "")
            run.state = "preparing"
        elif event.kind == EventKind.ATTEMPT_STARTED:
            run.attempt = _int(data.get("attempt"))
            run.state = "coding"
            run.seats.clear()
        elif event.kind == EventKind.DISPATCH_STARTED:
            number = _int(data.get("seat"))
            if number is not None:
                run.seats[number] = _Seat(coder=str(data.get("coder") or "?"), since=now)
        elif event.kind == EventKind.SEAT_FINISHED:
            seat = run.seats.get(_int(data.get("seat")) or 0)
            if seat is not None:
                if data.get("viable"):
                    seat.state = "checking"
                else:
                    seat.state = "no candidate" if not data.get("error") else "error"
                    seat.until = now
            run.state = "checking"
        elif event.kind == EventKind.VALIDATOR_FINISHED:
            seat = run.seats.get(_int(data.get("seat")) or 0)
            if seat is not None:
                halted = data.get("error") and not data.get("advisory")  # advisory: warns
                severity = "error" if halted else str(data.get("severity"))
                seat.state = f"validator {data.get('validator')}: {severity}"
        elif event.kind == EventKind.JUDGES_RANKED:
            run.state = "judged"
            for judged in run.seats.values():
                judged.until = judged.until or now
        elif event.kind == EventKind.ATTEMPT_DECIDED:
            run.state = str(data.get("next") or data.get("action") or "decided")
            run.seats.clear()
        elif event.kind == EventKind.USAGE_REPORTED and data.get("role") == "coder":
            seat = run.seats.get(_int(data.get("seat")) or 0)
            if seat is not None:
                seat.spent = spent_text(data.get("tokens"), data.get("total_cost_usd"))

    def footer(self) -> list[Text]:
        from rich.text import Text

        now = self.clock()
        with self._lock:
            runs = list(self.runs.items())
            lines = [
                Text.assemble(
                    ("assay ", "bold"),
                    (clock_text(now - self.since), "bold cyan"),
                    (" elapsed" + (f" · {self.idle}" if self.idle and not runs else ""), "dim"),
                )
            ]
            for label, run in runs:
                name = label or run.run_id or "run"
                attempt = f" · attempt {run.attempt}" if run.attempt is not None else ""
                lines.append(
                    Text.assemble(
                        (f"  {name}", "bold"),
                        f"{attempt} · {run.state} · ",
                        (clock_text(now - run.since), "cyan"),
                    )
                )
                for number, seat in sorted(run.seats.items()):
                    took = (seat.until or now) - seat.since
                    lines.append(
                        Text.assemble(
                            f"    seat {number} [{seat.coder}] {seat.state} · ",
                            (clock_text(took), "cyan"),
                            (f" · {seat.spent}" if seat.spent else "", "dim"),
                        )
                    )
        return lines


class _Footer:
    """Rendered afresh at each refresh, so the elapsed times tick without an event."""

    def __init__(self, progress: LiveProgress) -> None:
        self.progress = progress

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.console import Group

        yield Group(*self.progress.footer())


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
