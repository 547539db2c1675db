"""Rate limits and held tasks through the `assay` command (in-process) and the stand-in `claude`.

A run lost to a provider's quota is refunded and the task waits for the reset; a storm of
them never spends an attempt (it holds the task only after ``budgets.max_refunds`` in a row,
set high here), while real failures do; a task held by a
fired block halt says who holds it, why, and both ways back, and each way works.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from support.repo import Repo, make_repo, scope_breach_run

from assay.core.backoff import RESET_MARGIN_SECONDS

STANDINS = Path(__file__).resolve().parents[2] / "support" / "standins"
MAX_ATTEMPTS = 3


def claude_task(repo: Repo) -> Path:
    """A contract for the stand-in `claude`; its scenario and reset time come from the
    operator's environment (``$NAME`` passes a variable through the child allowlist)."""
    return repo.contract(
        "claude.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: claude}}
budgets: {{max_attempts: {MAX_ATTEMPTS}, max_recovery: 0, max_refunds: 20}}
land: merge
env: {{STANDIN_SCENARIO: $STANDIN_SCENARIO, STANDIN_RESET_EPOCH: $STANDIN_RESET_EPOCH}}
""",
    )


def env(scenario: str, reset_epoch: int | None = None) -> dict[str, str]:
    chosen = {"PATH": f"{STANDINS}{os.pathsep}{os.environ['PATH']}", "STANDIN_SCENARIO": scenario}
    chosen["ANTHROPIC_API_KEY"] = "standin-key"  # claude is never started without one
    if reset_epoch is not None:
        chosen["STANDIN_RESET_EPOCH"] = str(reset_epoch)
    return chosen


def tasks(repo: Repo) -> list[dict[str, Any]]:
    listed = repo.main("task", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    loaded: list[dict[str, Any]] = json.loads(listed.stdout)
    return loaded


def show(repo: Repo, task_id: str) -> dict[str, Any]:
    shown = repo.main("task", "show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    loaded: dict[str, Any] = json.loads(shown.stdout)
    return loaded


def at(epoch: int) -> str:
    """The JSON form of the wait a reset at ``epoch`` leads to."""
    moment = datetime.fromtimestamp(epoch + RESET_MARGIN_SECONDS, UTC)
    return moment.isoformat().replace("+00:00", "Z")


def test_a_rate_limited_run_is_refunded_and_the_task_waits_for_the_reset(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    reset = int(time.time()) + 600
    ran = repo.main("run", "--contract", str(claude_task(repo)), **env("rate_limit", reset))
    assert ran.returncode == 1, ran.stderr
    assert "(refunded, this run does not count; attempts: 0 of 3 used)" in ran.stdout
    assert "waits for its provider quota until" in ran.stdout

    [task] = tasks(repo)
    assert task["status"] == "failed" and task["attempts"] == 0
    assert task["not_before"] == at(reset)
    assert show(repo, task["id"])["runs"][0]["settle_row"] == "failed_quota_no_viable"
    table = repo.main("task", "list", COLUMNS="200")
    assert re.search(r"waits until \S+ \S+ UTC \(in (9|10)m\)", table.stdout), table.stdout

    refused = repo.main("run", "--task", task["id"], **env("rate_limit", reset))
    assert refused.returncode == 2
    assert f"task {task['id']} waits for its provider quota until" in refused.stderr
    assert f"`assay task release {task['id']}` to run it now" in refused.stderr
    served = repo.main("serve", "--once", "--poll", "0.1", **env("rate_limit", reset))
    assert served.returncode == 0, served.stderr
    assert "skipping: task" in served.stderr and "served 0 run(s)" in served.stderr

    released = repo.main("task", "release", task["id"])
    assert released.returncode == 0, released.stderr
    assert "wait is cleared; attempts kept: 0" in released.stdout
    [after] = tasks(repo)
    assert after["not_before"] is None and after["status"] == "failed"


def test_a_rate_limit_storm_never_spends_an_attempt_but_real_failures_hold_the_task(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    reset = int(time.time()) + 900
    first = repo.main(
        "run", "--contract", str(claude_task(repo)), "--json", **env("rate_limit", reset)
    )
    assert first.returncode == 1, first.stderr
    task_id = json.loads(first.stdout)["task_id"]
    for storm in range(9):  # ten rate-limited runs in all, alternating the two limit kinds
        scenario = "usage_limit" if storm % 2 else "rate_limit"
        again = repo.main(
            "run", "--task", task_id, "--ignore-wait", "--json", **env(scenario, reset + storm)
        )
        assert again.returncode == 1, again.stderr
        payload = json.loads(again.stdout)
        assert payload["task_status"] == "failed" and payload["attempt_spent"] is False
    shown = show(repo, task_id)
    assert shown["status"] == "failed" and shown["attempts"] == 0
    assert shown["hold_source"] is None and shown["waiting"] is True
    assert shown["not_before"] == at(reset + 8)
    assert [r["settle_row"] for r in shown["runs"]] == ["failed_quota_no_viable"] * 10

    codes = [
        repo.main("run", "--task", task_id, "--ignore-wait", **env("crash")).returncode
        for _ in range(MAX_ATTEMPTS)
    ]
    assert codes == [1, 1, 3]  # failed, failed, held: the storm left the whole budget
    held = show(repo, task_id)
    assert held["status"] == "held" and held["held_by"] == "machine"
    assert held["attempts"] == MAX_ATTEMPTS and held["not_before"] is None
    assert "attempts exhausted (3 of 3 spent)" in held["hold_reason"]
    assert len(held["runs"]) == 13


def test_a_task_held_by_a_fired_halt_names_its_holder_and_both_ways_back(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    task_id, run_id = scope_breach_run(repo)

    shown = repo.main("task", "show", task_id)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "held by the machine: block halt fired: halt-scope-breach" in text
    assert "halt-scope-breach fired (block, now FIRED)" in text
    assert "assay halt rearm --dispatch-id" in text and "--condition halt-scope-breach" in text
    assert f"assay task release {task_id}" in text

    document = show(repo, task_id)
    assert document["held_by"] == "machine"
    [halt] = document["fired_halts"]
    assert halt["name"] == "halt-scope-breach" and halt["lifecycle"] == "FIRED"
    assert halt["dispatch_id"] == document["runs"][0]["dispatch_id"]
    rearm_way, release_way = document["ways_back"]
    assert release_way["commands"] == [f"assay task release {task_id}"]
    rearm, release = rearm_way["commands"]
    assert release == f"assay task release {task_id}"

    words = shlex.split(rearm.replace("<what you changed to remedy it>", "README is restored"))
    assert words[:3] == ["assay", "halt", "rearm"]
    rearmed = repo.main(*words[1:])
    assert rearmed.returncode == 0, rearmed.stdout + rearmed.stderr
    assert json.loads(rearmed.stdout)["rearmed"] is True
    after_rearm = show(repo, task_id)
    assert after_rearm["fired_halts"][0]["lifecycle"] == "ARMED"
    assert [w["commands"] for w in after_rearm["ways_back"]] == [[release]]

    released = repo.main(*shlex.split(release)[1:])
    assert released.returncode == 0, released.stderr
    assert "attempts reset to 0; run history kept" in released.stdout
    final = show(repo, task_id)
    assert final["status"] == "queued" and final["attempts"] == 0
    assert final["held_by"] is None and final["ways_back"] == []
    assert [r["id"] for r in final["runs"]] == final["run_ids"] == [run_id]
    assert len(final["runs"]) == 1 and final["runs"][0]["settle_row"] == "halted"


def test_a_manual_hold_has_one_way_back(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    added = repo.main(
        "task", "add", "Make slugify keep digits.", "--coder", "claude", "--no-check", "--json"
    )
    assert added.returncode == 0, added.stderr
    task_id = json.loads(added.stdout)["id"]
    assert repo.main("task", "hold", task_id, "--reason", "API freeze").returncode == 0
    document = show(repo, task_id)
    assert document["held_by"] == "manual" and document["hold_reason"] == "API freeze"
    assert document["fired_halts"] == []
    assert [w["commands"] for w in document["ways_back"]] == [[f"assay task release {task_id}"]]


def test_a_reset_time_already_past_falls_back_to_the_backoff(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    past = int((datetime.now(UTC) - timedelta(hours=2)).timestamp())
    first = repo.main("run", "--contract", str(claude_task(repo)), **env("rate_limit", past))
    assert first.returncode == 1, first.stderr
    [task] = tasks(repo)
    # One minute: the first backoff step (this run is the first of its streak).
    waited = datetime.fromisoformat(task["not_before"]) - datetime.now(UTC)
    assert timedelta(seconds=30) < waited <= timedelta(minutes=1)
