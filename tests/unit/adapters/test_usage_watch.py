"""A dispatch's usage journaled while its program runs: the places each program reports it
(stdout, codex's session file, mini's trajectory), the adapters wired to the meter (the
stand-in programs), the caps they pass, a budget spent before the start, and the recovery's
re-reading of a seat's files."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest

from assay.adapters.coders import usage_of_logs
from assay.adapters.coders.aider import AiderCoder
from assay.adapters.coders.claude import ClaudeCoder
from assay.adapters.coders.claude_usage import ClaudeUsage
from assay.adapters.coders.codex import usage_sources as codex_sources
from assay.adapters.coders.mini import MiniCoder
from assay.adapters.coders.mini import usage_sources as mini_sources
from assay.adapters.coders.usage_watch import SETTLE_SECONDS, UsageSources, UsageWatch
from assay.core.usage import UsageFigures
from assay.core.vocab import StopReason

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support" / "standins"))

from coder_harness import BudgetMeter, make_request, recorded

SAMPLES = Path(__file__).resolve().parents[2] / "support" / "usage_samples"
THREAD = "01a241f3-ba6e-7953-b0c3-7f69c4e71af5"
ROLLOUT = f"sessions/2026/12/04/rollout-2026-12-04T16-47-01-{THREAD}.jsonl"


CLAUDE_KEY = {"ANTHROPIC_API_KEY": "standin-key"}  # claude is never started without one


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0  # every look is a second later: files are looked at every time
        return self.now


def test_the_meter_hears_each_growth_of_the_running_total_once() -> None:
    meter = BudgetMeter()
    watch = UsageWatch(UsageSources(stdout=ClaudeUsage()), meter)
    lines = sample("claude-2.1.332-success.jsonl").splitlines(keepends=True)
    for line in lines:  # a line in two pieces: nothing is read before its end
        watch.seen(line[:10], "")
        watch.seen(line[10:], "")
    watch.ended()
    assert [(r.tokens_in, r.tokens_out, r.cost_usd) for r in meter.reports] == [
        (1200, 1, None),
        (2700, 2, None),
        (4700, 3, None),
        (4700, 140, 0.0162),
    ]


def partial_lines() -> tuple[list[str], int, int]:
    """claude's partial-messages sample by line; where its first message starts and stops."""
    lines = sample("claude-2.1.332-partial-success.jsonl").splitlines(keepends=True)
    starts = [n for n, line in enumerate(lines) if '"type":"message_start"' in line]
    stops = [n for n, line in enumerate(lines) if '"type":"message_stop"' in line]
    return lines, starts[0], stops[0]


def test_a_stop_waits_for_the_end_of_the_call_being_printed() -> None:
    meter = BudgetMeter(max_tokens=1000)
    watch = UsageWatch(UsageSources(stdout=ClaudeUsage()), meter, clock=lambda: 0.0)
    lines, start, stop = partial_lines()
    watch.seen("".join(lines[: start + 1]), "")
    assert meter.reports[-1].tokens == 1201  # spent as the call started...
    assert watch.stop_reason() is None  # ...but its output count is still to come
    watch.seen("".join(lines[start + 1 : stop]), "")
    assert meter.reports[-1].tokens == 1250 and watch.stop_reason() is None
    watch.seen(lines[stop], "")
    assert watch.stop_reason() == "the run spent 1250 tokens of its 1000-token budget"


def test_a_call_that_never_ends_delays_a_stop_a_moment_only() -> None:
    now = [0.0]
    meter = BudgetMeter(max_tokens=1000)
    watch = UsageWatch(UsageSources(stdout=ClaudeUsage()), meter, clock=lambda: now[0])
    lines, start, _stop = partial_lines()
    watch.seen("".join(lines[: start + 1]), "")
    assert watch.stop_reason() is None
    now[0] += SETTLE_SECONDS
    assert watch.stop_reason() == "the run spent 1201 tokens of its 1000-token budget"


def test_codex_calls_are_read_from_its_session_file_as_they_are_made(tmp_path: Path) -> None:
    home = tmp_path / "seat.home"
    rollout = home / ".codex" / ROLLOUT
    rollout.parent.mkdir(parents=True)
    meter = BudgetMeter()
    watch = UsageWatch(codex_sources(output_dir=tmp_path / "out", home=home), meter, clock=Clock())
    stdout = sample("codex-0.171.0-exec.jsonl").splitlines(keepends=True)
    watch.seen(stdout[0], "")  # thread.started: the file is looked for, not there yet
    records = sample("codex-0.171.0-rollout.jsonl").splitlines(keepends=True)
    with rollout.open("w") as file:
        for record in records:
            file.write(record)
            file.flush()
            watch.seen("", "")
        assert [r.tokens_in for r in meter.reports] == [1200, 2700, 4700]  # before the end
    watch.seen("".join(stdout[1:]), "")
    watch.ended()
    assert meter.reports[-1] == UsageFigures(4700, 140, None, "scripted-model", calls=3)


def test_a_session_file_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    home = tmp_path / "seat.home"
    rollout = home / ".codex" / ROLLOUT
    rollout.parent.mkdir(parents=True)
    elsewhere = tmp_path / "operator.jsonl"
    elsewhere.write_text(sample("codex-0.171.0-rollout.jsonl"))
    rollout.symlink_to(elsewhere)
    sources = codex_sources(output_dir=tmp_path / "out", home=home)
    sources.seen(sample("codex-0.171.0-exec.jsonl").splitlines(keepends=True)[0], "", 1.0)
    sources.close()
    assert sources.figures() is None


def test_mini_trajectory_is_reread_when_it_changes_and_a_torn_read_keeps_the_last(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    trajectory = out / "mini.traj.json"
    meter = BudgetMeter()
    watch = UsageWatch(mini_sources(output_dir=out), meter, clock=Clock())
    watch.seen("", "")
    assert meter.reports == []  # no trajectory yet
    trajectory.write_text(sample("mini-2.4.6-step1.traj.json"))
    watch.seen("", "")
    final = sample("mini-2.4.6-submitted.traj.json")
    trajectory.write_text(final[:1000])  # caught mid-write
    watch.seen("", "")
    trajectory.write_text(final)
    watch.ended()
    assert [(r.tokens_in, r.calls) for r in meter.reports] == [(900, 1), (2850, 3)]


def test_claude_journals_while_it_runs_and_the_result_has_the_figures(tmp_path: Path) -> None:
    meter = BudgetMeter(remaining_cost_usd=1.25)
    request = dataclasses.replace(make_request(tmp_path, env=CLAUDE_KEY), meter=meter)
    result = ClaudeCoder().dispatch(request)
    assert result.stop_reason is StopReason.COMPLETED, result
    assert meter.reports and result.usage == meter.reports[-1]
    assert result.usage is not None
    assert (result.usage.tokens_in, result.usage.tokens_out) == (13012, 250)
    assert result.usage.cost_usd == 0.0123 and result.tokens_used == 13262
    assert recorded(tmp_path)["argv"][-2:] == ["--max-budget-usd", "1.25"]


def test_no_money_budget_no_cap_flag(tmp_path: Path) -> None:
    request = dataclasses.replace(make_request(tmp_path, env=CLAUDE_KEY), meter=BudgetMeter())
    ClaudeCoder().dispatch(request)
    assert "--max-budget-usd" not in recorded(tmp_path)["argv"]


def test_mini_gets_the_remaining_budget_as_its_cost_limit(tmp_path: Path) -> None:
    meter = BudgetMeter(remaining_cost_usd=0.0)  # never 0: that is "no limit" to mini
    request = dataclasses.replace(make_request(tmp_path), meter=meter)
    result = MiniCoder().dispatch(request)
    argv = recorded(tmp_path)["argv"]
    assert argv[argv.index("-l") + 1] == "0.0001"
    assert result.usage is not None and result.usage.calls == 2
    assert meter.reports[-1] == result.usage


def test_a_spent_budget_starts_no_program(tmp_path: Path) -> None:
    meter = BudgetMeter(spent="the run spent $2 of its $2 budget")
    request = dataclasses.replace(make_request(tmp_path), meter=meter)
    result = AiderCoder().dispatch(request)
    assert result.stopped == "the run spent $2 of its $2 budget"
    assert result.exit_code is None and result.usage is None
    assert result.error == "stopped by assay: the run spent $2 of its $2 budget"
    assert not (tmp_path / "record.json").exists()  # aider never ran


def test_a_program_stopped_mid_run_says_so_in_its_result(tmp_path: Path) -> None:
    meter = BudgetMeter(max_tokens=3000)  # spent by the stand-in's third call (1050 each)
    request = dataclasses.replace(
        make_request(tmp_path, scenario="endless", env=CLAUDE_KEY), meter=meter
    )
    result = ClaudeCoder().dispatch(request)
    assert result.stopped == "the run spent 3150 tokens of its 3000-token budget"
    assert result.exit_code is None and not result.timed_out
    assert result.error == "stopped by assay: the run spent 3150 tokens of its 3000-token budget"
    assert [r.tokens for r in meter.reports[:3]] == [1050, 2100, 3150]
    assert result.usage is not None and result.usage.tokens in (3150, 4200)


# -- after a crash of the host ----------------------------------------------------------------


def test_usage_of_logs_reads_each_program_files(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "claude.log.out").write_text(sample("claude-2.1.332-success.jsonl"))
    (logs / "aider.log.out").write_text(sample("aider-0.86.2-priced.txt"))
    (logs / "codex.log.out").write_text(sample("codex-0.171.0-exec.jsonl").splitlines()[0])
    claude = usage_of_logs("claude", logs)
    assert claude is not None and (claude.tokens, claude.cost_usd) == (4840, 0.0162)
    aider = usage_of_logs("aider", logs)
    assert aider is not None and (aider.tokens, aider.cost_usd) == (4950, 0.03)
    # codex was killed mid-turn: no turn.completed, its session file has every call.
    assert usage_of_logs("codex", logs) is None
    home = tmp_path / "home"
    (home / ".codex" / ROLLOUT).parent.mkdir(parents=True)
    (home / ".codex" / ROLLOUT).write_text(sample("codex-0.171.0-rollout.jsonl"))
    codex = usage_of_logs("codex", logs, home=home)
    assert codex is not None and (codex.tokens_in, codex.calls) == (4700, 3)
    assert usage_of_logs("command", logs) is None and usage_of_logs("mini", logs) is None


def test_usage_of_logs_reads_mini_trajectory_or_the_copy_kept_in_the_logs(tmp_path: Path) -> None:
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    out.mkdir()
    (out / "mini.traj.json").write_text(sample("mini-2.4.6-submitted.traj.json"))
    (logs / "mini.traj.json").write_text(sample("mini-2.4.6-step1.traj.json"))
    end = usage_of_logs("mini", logs, out_dir=out)
    assert end is not None and end.calls == 3
    kept = usage_of_logs("mini", logs)
    assert kept is not None and kept.calls == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_usage_of_logs_never_opens_a_fifo(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    os.mkfifo(logs / "claude.log.out")
    assert usage_of_logs("claude", logs) is None


def test_a_trajectory_that_is_not_json_reports_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mini.traj.json").write_text(json.dumps(["not", "a", "trajectory"]))
    assert usage_of_logs("mini", tmp_path, out_dir=out) is None
