"""The real `assay run` in temporary git repositories: land modes, recovery, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from support.repo import BUGGY, FIXED, git, make_repo, replay_contract

from assay.adapters.store.sql import Ledger

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)


def test_wrong_fix_then_right_fix_recovers_and_merges(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    git(repo.root, "config", "user.name", "Ada Lovelace")
    git(repo.root, "config", "user.email", "ada@example.org")
    base = git(repo.root, "rev-parse", "main")
    done = repo.main("run", "--contract", str(replay_contract(repo, "wrong", "fixed")), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    assert payload["status"] == "merged" and payload["task_status"] == "done"
    assert payload["attempts"]["total"] == 2
    assert [h["outcome"] for h in payload["attempts"]["history"]] == ["blocked", "passed"]
    assert (repo.root / "src" / "slug.py").read_text() == FIXED
    # main holds exactly one new commit: the candidate's tree, squashed, with its trailers.
    landed = git(repo.root, "rev-list", f"{base}..main").split()
    assert len(landed) == 1 and git(repo.root, "rev-parse", f"{landed[0]}^@") == base
    # The candidate's tree is main's: only the fixed file differs, and the run's seat branch
    # (holding the rejected attempt's commit) is gone with the closed run.
    assert git(repo.root, "diff", "--name-only", base, "main").split() == ["src/slug.py"]
    seat_branch = f"assay/{payload['run_id']}/seat-1"
    assert git(repo.root, "branch", "--list", seat_branch) == ""
    assert git(repo.root, "log", "-1", "--format=%an <%ae>|%s", "main") == (
        "Ada Lovelace <ada@example.org>|Make slugify keep digits."
    )
    assert git(repo.root, "log", "-1", "--format=%(trailers:only,unfold)", "main").splitlines() == [
        f"Assay-Task: {payload['task_id']}",
        f"Assay-Run: {payload['run_id']}",
        "Assay-Attempts: 2 (1 blocked)",
        "Assay-Coder: replay (seat 1)",
    ]
    assert "assay: attempt" not in git(repo.root, "log", "--format=%s", "main")
    assert payload["candidates"]
    run_dir = repo.root / ".assay" / "runs" / payload["run_id"]
    assert (
        "[attempt 1] tests" in (run_dir / "attempt-2" / "seat-1" / "prompt-attempt2.md").read_text()
    )
    with Ledger.open(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        events = ledger.events(run_id=payload["run_id"])
    seats = [e.data for e in events if e.kind == "seat.finished"]
    assert [(s["attempt"], s["files"]) for s in seats] == [
        (1, ["src/slug.py"]),
        (2, ["src/slug.py"]),
    ]
    assert not (repo.root / ".assay" / "seats" / payload["run_id"]).exists()
    assert git(repo.root, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert ".assay/" in (repo.root / ".git" / "info" / "exclude").read_text()


def test_land_branch_leaves_a_ready_branch_and_main_untouched(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main(
        "run", "--contract", str(replay_contract(repo, "fixed", land="branch")), "--json"
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "ready"
    assert (repo.root / "src" / "slug.py").read_text() == BUGGY
    branch = f"assay/{payload['run_id']}/seat-1"
    assert git(repo.root, "show", f"{branch}:src/slug.py") + "\n" == FIXED


def test_land_none_lands_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main(
        "run", "--contract", str(replay_contract(repo, "fixed", land="none")), "--json"
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "ready"
    assert (repo.root / "src" / "slug.py").read_text() == BUGGY
    assert git(repo.root, "branch", "--list", "assay/*") == ""
    # The replay coder calls no model: its cost is known to be nothing.
    assert payload["usage"]["cost_usd"] == 0.0 and payload["usage"]["unpriced_dispatches"] == 0


def test_a_coder_that_reports_no_cost_leaves_the_cost_unknown(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "command.yaml",
        "task: Add a note.\ncoder: {kind: command, command: 'echo note > NOTE.md'}\nland: none\n",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 0, done.stderr
    usage = json.loads(done.stdout)["usage"]
    jsonschema.validate(json.loads(done.stdout), SCHEMA)
    assert usage["cost_usd"] is None, "an unknown cost must never read as 0"
    # It reported no usage at all: unknown, counted apart.
    assert usage["unreported_dispatches"] == 1 and usage["priced_cost_usd"] == 0.0


def test_a_dirty_checkout_is_never_touched(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo.root / "src" / "slug.py").write_text(BUGGY + "# my local edit\n")
    (repo.root / "NOTES").write_text("untracked: not in the way\n")
    contract = str(replay_contract(repo, "fixed"))
    # `assay run` says so before any coder runs: nothing is queued, nothing lands
    refused = repo.main("run", "--contract", contract, "--json")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr == (
        "assay: land: merge lands on main, whose checkout has uncommitted changes to "
        "src/slug.py: commit or stash them first, or land on a branch (--land branch)\n"
    )
    assert refused.stdout == "" and not (repo.root / ".assay").exists()
    # a queued task met by a worker: the landing leaves the branch instead
    assert repo.main("task", "add", "--contract", contract).returncode == 0
    served = repo.main("serve", "--once", "--json")
    assert served.returncode == 0, served.stderr
    assert list(json.loads(served.stdout)["closed"].values()) == ["done"]
    [task] = json.loads(repo.main("task", "list", "--json").stdout)
    [run] = json.loads(repo.main("task", "show", task["id"], "--json").stdout)["runs"]
    assert run["status"] == "ready"  # merge refused, the branch is left instead
    assert (repo.root / "src" / "slug.py").read_text() == BUGGY + "# my local edit\n"


def test_validators_that_keep_blocking_exhaust_recovery_and_fail(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "wrong", extra="budgets: {max_attempts: 2, max_recovery: 3}")
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    assert payload["status"] == "blocked" and payload["task_status"] == "failed"
    assert payload["reason"].startswith("stuck: attempt 2")
    assert payload["attempts"]["total"] == 2


def test_scope_breach_fires_the_halt_and_holds_the_task(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "scope.yaml",
        """task: fix it
scope: {allow: ["src/**"]}
coder: {kind: replay, steps: [{script: "echo x > README.md"}]}
land: merge
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 3, done.stderr
    payload = json.loads(done.stdout)
    assert payload["halt_type"] == "escalate" and payload["task_status"] == "held"
    assert [h["name"] for h in payload["halts"]["fired"]] == ["halt-scope-breach"]


@pytest.mark.parametrize(
    ("contract", "message"),
    [
        ("task: x\ncoder: {kind: replay}\nbogus: 1\n", "line 3"),
        ("task: [unclosed\n", "line"),
        ("task: x\nland: sideways\n", "land"),
    ],
)
def test_a_bad_contract_exits_2_with_key_and_line(
    tmp_path: Path, contract: str, message: str
) -> None:
    repo = make_repo(tmp_path)
    done = repo.main("run", "--contract", str(repo.contract("bad.yaml", contract)))
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_outside_a_repository_is_a_clear_error(tmp_path: Path) -> None:
    from support.in_process import run_assay

    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    done = run_assay(["run", "x"], cwd=tmp_path, env=environ)
    assert done.returncode == 2
    assert "not inside a git repository" in done.stderr
