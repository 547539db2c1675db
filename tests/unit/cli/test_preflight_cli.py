"""The preflight through the commands (in-process): `run` and `task add` refuse what this
machine cannot run, exit 2, one line per problem, leaving nothing; `serve` holds such a task
and never runs it; `run --task` of a task whose program has since gone refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.repo import git
from typer.testing import CliRunner, Result

from assay.cli.app import build_app

GONE = "assay-no-such-agent"
LINE = f"assay: coder command: {GONE} not found on PATH: install it"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    monkeypatch.chdir(root)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ASSAY_HOME", raising=False)
    monkeypatch.delenv("ASSAY_DATABASE_URL", raising=False)
    return root


def assay(*args: str) -> Result:
    return CliRunner().invoke(build_app(), list(args))


def tasks(repo: Path) -> list[dict[str, object]]:
    listed = assay("task", "list", "--json")
    assert listed.exit_code == 0, listed.output
    found: list[dict[str, object]] = json.loads(listed.stdout)
    return found


def test_run_refuses_several_problems_one_line_each_and_writes_nothing(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}:/usr/bin:/bin")
    (repo / "calc.py").write_text("dirty\n")
    done = assay(
        "run", "Fix add()", "--coder", "claude", "--validator", "nosuchtest -q", "--land", "merge"
    )
    assert done.exit_code == 2, done.output
    lines = done.output.strip().splitlines()
    assert [line.split(":")[1].strip() for line in lines] == [
        "coder claude",
        "coder claude",
        "validator v1",
        "land",
    ]
    assert "claude not found on PATH" in lines[0] and "ANTHROPIC_API_KEY" in lines[1]
    assert "calc.py" in lines[3]
    assert not (repo / ".assay").exists()  # no task, no run, no ledger


def test_task_add_refuses_too_and_no_check_queues_for_another_machine(repo: Path) -> None:
    refused = assay("task", "add", "Fix add()", "--coder-command", f"{GONE} --go")
    assert refused.exit_code == 2
    assert refused.output.startswith(LINE) and len(refused.output.strip().splitlines()) == 1
    assert not (repo / ".assay").exists()
    queued = assay("task", "add", "Fix add()", "--coder-command", f"{GONE} --go", "--no-check")
    assert queued.exit_code == 0, queued.output
    assert [t["status"] for t in tasks(repo)] == ["queued"]


def test_a_dirty_checkout_does_not_refuse_a_task_add(repo: Path) -> None:
    (repo / "calc.py").write_text("being edited\n")
    added = assay("task", "add", "Fix", "--coder-command", "true", "--validator", "true")
    assert added.exit_code == 0, added.output  # the checkout is the run's to check, later


def test_serve_holds_a_task_it_cannot_run_and_never_runs_it(repo: Path) -> None:
    bad = assay("task", "add", "Fix it", "--coder-command", f"{GONE} --go", "--no-check", "--json")
    good = assay("task", "add", "Fix it", "--coder-command", "true", "--sandbox", "none", "--json")
    bad_id, good_id = (json.loads(r.stdout)["id"] for r in (bad, good))
    served = assay("serve", "--once", "--poll", "0.1", "--gc-every", "0", "--json")
    assert served.exit_code == 0, served.output
    assert f"{bad_id}: not run, held: this machine cannot run the task as set: " in served.output
    summary = json.loads(served.stdout)
    good_runs = json.loads(assay("task", "show", good_id, "--json").stdout)["runs"]
    assert summary["runs"] == len(good_runs) and list(summary["closed"]) == [good_id]
    assert [s["task_id"] for s in summary["skipped"]] == [bad_id]
    shown = json.loads(assay("task", "show", bad_id, "--json").stdout)
    assert (shown["status"], shown["hold_source"], shown["attempts"]) == ("held", "machine", 0)
    assert f"{GONE} not found on PATH" in shown["hold_reason"] and shown["runs"] == []
    [way] = shown["ways_back"]
    assert way["summary"].startswith("fix what the reason names on this machine")
    assert way["commands"] == [f"assay task release {bad_id}"]
    again = assay("serve", "--once", "--poll", "0.1", "--gc-every", "0")
    assert again.exit_code == 0 and "served 0 run(s)" in again.output  # never retried


def test_run_task_of_a_task_whose_program_has_gone_refuses_and_leaves_it(repo: Path) -> None:
    added = assay("task", "add", "Fix", "--coder-command", f"{GONE}", "--no-check", "--json")
    task_id = json.loads(added.stdout)["id"]
    done = assay("run", "--task", task_id)
    assert done.exit_code == 2 and done.output.startswith(LINE)
    [task] = tasks(repo)
    assert (task["status"], task["attempts"]) == ("queued", 0)
