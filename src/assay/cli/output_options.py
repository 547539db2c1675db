"""The options that say where ``assay run`` and ``assay serve`` report what they do.

Light on purpose (the standard library and typer): both commands build their options from
here, and neither may pay for rich or the store before it runs.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, TextIO

import typer


class EventsFormat(StrEnum):
    """How ``--events`` writes the ledger's events to stdout."""

    JSONL = "jsonl"  # one event object per line, flushed as it happens


class ProgressMode(StrEnum):
    """What the human progress on stderr does."""

    AUTO = "auto"  # a live display on a terminal, nothing when stderr is not one
    ALWAYS = "always"  # also plain lines when stderr is not a terminal (logs, CI)
    NEVER = "never"  # no progress at all (run warnings are still said)


EventsFlag = Annotated[
    EventsFormat | None,
    typer.Option(
        "--events",
        help="Write every ledger event to stdout as it happens: jsonl, one JSON object a line"
        " (with --json the result is the last line).",
    ),
]

ProgressFlag = Annotated[
    ProgressMode,
    typer.Option(
        "--progress",
        envvar="ASSAY_PROGRESS",
        help="Progress on stderr: auto (live on a terminal, quiet otherwise), always (plain"
        " lines when not a terminal), never.",
    ),
]


def live_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (stderr by default) is a terminal a live display may redraw."""
    stream = stream if stream is not None else sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream is no terminal
        return False
