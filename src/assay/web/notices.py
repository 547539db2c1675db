"""The green banner after an action: a closed vocabulary of codes, each with its fixed text.

An action redirects with ``?notice=<code>``; a page shows the text of a known code and nothing
for any other value, so a link cannot put words of its own in the dashboard's mouth.
"""

from __future__ import annotations

from enum import StrEnum


class Notice(StrEnum):
    HELD = "held"
    RELEASED = "released"
    WAIT_CLEARED = "wait-cleared"
    CANCELLED = "cancelled"
    REARMED = "rearmed"
    STOPPING = "stopping"
    RETRIED = "retried"


TEXTS: dict[Notice, str] = {
    Notice.HELD: "Task held: no run starts it until it is released.",
    Notice.RELEASED: "Task released: queued again, attempts reset to 0.",
    Notice.WAIT_CLEARED: "Task released: its quota wait is cleared and it can run now.",
    Notice.CANCELLED: "Task cancelled: held as cancelled until someone releases it.",
    Notice.REARMED: "Halt re-armed: the evidence is kept with it.",
    Notice.STOPPING: "Stop sent: its run is being stopped, and the task is held once it closes.",
    Notice.RETRIED: "Task will run again now: its wait is cleared, attempts kept.",
}


def notice_text(code: object) -> str | None:
    """The banner for ``code``, or None when it is not one of ours."""
    try:
        return TEXTS[Notice(str(code))]
    except ValueError:
        return None
