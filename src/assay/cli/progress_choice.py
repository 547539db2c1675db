"""Which progress display a run gets (:mod:`assay.cli.progress` draws the plain and quiet ones,
:mod:`assay.cli.progress_live` the live one): chosen here, above both, so neither module needs
the other's name to make one."""

from __future__ import annotations

import sys

from assay.cli.output_options import ProgressMode, live_terminal
from assay.cli.progress import Progress, WarningsOnly


def progress_for(
    mode: ProgressMode, *, many: bool = False, idle: str = "", streaming: bool = False
) -> Progress:
    """The display ``mode`` asks for here: live on a terminal (``auto``, ``always``), plain
    lines off one only with ``always`` (and one run at a time: lines of several runs at once
    would interleave), else warnings only. ``idle``: the live footer's word when no run is in
    progress (serve's "waiting for work"). ``streaming``: ``--events`` writes to stdout, so a
    stdout on the same terminal would be drawn over by the footer: plain lines then."""
    if mode is ProgressMode.NEVER:
        return WarningsOnly()
    if live_terminal() and streaming and live_terminal(sys.stdout):
        return Progress() if not many else WarningsOnly()
    if live_terminal():
        from assay.cli.progress_live import LiveProgress

        return LiveProgress(idle=idle)
    if mode is ProgressMode.ALWAYS and not many:
        return Progress()
    return WarningsOnly()
