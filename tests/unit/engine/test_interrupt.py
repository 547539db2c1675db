"""A stop signal the kernel hands to an effect's thread still reaches the run at once."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from assay.adapters.process import STOP_TICK_SECONDS
from assay.engine.local.interrupt import run_awake


@pytest.fixture
def heard() -> Iterator[threading.Event]:
    """SIGUSR1's Python handler (it runs only in the main thread) sets the event."""
    event = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda *_: event.set())
    try:
        yield event
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_signal_delivered_to_an_effects_thread_is_handled_within_a_tick(
    heard: threading.Event,
) -> None:
    def effect() -> bool:
        time.sleep(0.3)  # the main thread is asleep in its event loop by now
        # As a kernel may: the signal lands on this thread, not on the main one.
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        return heard.wait(10)  # a coder that ends only when the stop reaches it

    async def run() -> bool:
        return await asyncio.to_thread(effect)

    start = time.monotonic()
    assert run_awake(run()) is True
    assert time.monotonic() - start < 0.3 + 5 * STOP_TICK_SECONDS


def test_the_result_and_the_failure_of_the_work_come_back() -> None:
    async def value() -> int:
        return 7

    async def failure() -> None:
        raise LookupError("kept")

    assert run_awake(value()) == 7
    with pytest.raises(LookupError, match="kept"):
        run_awake(failure())
