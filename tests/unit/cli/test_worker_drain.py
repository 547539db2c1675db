"""A worker's SIGTERM: the first drains (when a drain has time), a second stops at once; a
drain's time is a duration, refused with exit 2 when it is none."""

from __future__ import annotations

import signal

import pytest
import typer

from assay.cli.worker import Drain, _drain_seconds


def test_the_first_sigterm_drains_a_second_stops_at_once() -> None:
    drain = Drain(60.0)
    assert drain(signal.SIGTERM) and drain.signum == signal.SIGTERM
    assert not drain(signal.SIGTERM)  # the second: the graceful stop, now


def test_no_drain_time_stops_at_once() -> None:
    drain = Drain(0.0)
    assert not drain(signal.SIGTERM) and drain.signum is None


def test_the_drain_time_is_a_duration() -> None:
    assert _drain_seconds("90s") == 90.0 and _drain_seconds("0") == 0.0
    with pytest.raises(typer.Exit) as refused:
        _drain_seconds("soon")
    assert refused.value.exit_code == 2
