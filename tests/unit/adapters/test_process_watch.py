"""A child's output watched while it runs: real processes, a real usage reader, a meter that
says stop once the budget is spent."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from assay.adapters.coders.claude_usage import ClaudeUsage
from assay.adapters.coders.usage_read import AiderUsage
from assay.adapters.coders.usage_watch import UsageSources, UsageWatch
from assay.adapters.process import run_process
from assay.core.usage import UsageFigures

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support" / "standins"))

from coder_harness import BudgetMeter

# claude-style usage, a model call every 0.1 s, for ever.
FOREVER = """
import itertools, json, time
for n in itertools.count(1):
    usage = {"input_tokens": 100, "output_tokens": 10}
    message = {"id": f"msg_{n}", "model": "claude-x", "usage": usage}
    print(json.dumps({"type": "assistant", "message": message}), flush=True)
    time.sleep(0.1)
"""


def env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}


def test_a_spent_budget_stops_the_program_within_a_line_and_says_why(tmp_path: Path) -> None:
    meter = BudgetMeter(max_tokens=550)  # spent by the fifth call
    watch = UsageWatch(UsageSources(stdout=ClaudeUsage()), meter)
    started = time.monotonic()
    result = run_process(
        [sys.executable, "-c", FOREVER],
        cwd=tmp_path,
        env=env(),
        timeout=60,
        log_path=tmp_path / "claude.log",
        watch=watch,
    )
    assert result.stopped == "the run spent 550 tokens of its 550-token budget"
    assert result.exit_code is None and not result.timed_out
    assert time.monotonic() - started < 10
    printed = [line for line in result.stdout.splitlines() if line]
    # Stopped at the fifth line: a sixth may have been on its way, never a run of them.
    assert 5 <= len(printed) <= 6, printed
    # Every call was journaled as it came, the running total growing by one call at a time.
    assert [r.tokens_in for r in meter.reports[:5]] == [100, 200, 300, 400, 500]
    assert meter.reports[-1] == watch.figures()
    assert meter.reports[-1].calls == len(printed)


def test_a_watched_program_that_ends_has_all_its_output_read(tmp_path: Path) -> None:
    # The last line has no newline, and a character is split between two writes.
    script = (
        "import sys, time\n"
        "out = sys.stdout.buffer\n"
        "out.write(b'Tokens: 1.2k sent, 50 received. Cost: $0.01 message, $0.01 session.\\n')\n"
        "out.write(b'Model: caf\\xc3'); out.flush(); time.sleep(0.2)\n"
        "out.write(b'\\xa9 with x\\nTokens: 2k sent, 5 received.'); out.flush()\n"
    )

    meter = BudgetMeter()
    watch = UsageWatch(UsageSources(stdout=AiderUsage()), meter)
    result = run_process(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env(),
        timeout=30,
        log_path=tmp_path / "aider.log",
        watch=watch,
    )
    assert result.exit_code == 0 and result.stopped is None
    assert meter.reports[-1] == UsageFigures(3200, 55, 0.01, "café", calls=2)


def test_a_budget_spent_by_another_seat_stops_a_silent_program(tmp_path: Path) -> None:
    meter = BudgetMeter(spent="the run spent $5 of its $5 budget")
    watch = UsageWatch(UsageSources(stdout=ClaudeUsage()), meter)
    started = time.monotonic()
    result = run_process(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        cwd=tmp_path,
        env=env(),
        timeout=60,
        log_path=tmp_path / "claude.log",
        watch=watch,
    )
    assert result.stopped == "the run spent $5 of its $5 budget"
    assert result.exit_code is None and time.monotonic() - started < 5
    assert meter.reports == []  # nothing reported: nothing was printed


def test_a_watched_program_still_times_out(tmp_path: Path) -> None:
    watch = UsageWatch(UsageSources(stdout=ClaudeUsage()), BudgetMeter())
    result = run_process(
        [sys.executable, "-c", FOREVER],
        cwd=tmp_path,
        env=env(),
        timeout=0.5,
        log_path=tmp_path / "claude.log",
        watch=watch,
    )
    assert result.timed_out and result.stopped is None and result.exit_code is None
    assert watch.figures() is not None
