"""The real `assay run` landing on main: a base that moves during the run, and a run that
nothing verifies."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from support.repo import BUGGY, CHECK_TESTS, FIXED, PYTEST, git, make_repo

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)

# Run by the coder: the fix in its seat, and meanwhile a commit on the user's main checkout.
MOVE_MAIN = """set -e
cp {fixes}/fixed.py src/slug.py
printf '{text}' > {root}/tests/{name}
git -C {root} add tests/{name}
git -C {root} -c user.name=other -c user.email=o@example.org commit -q -m "theirs"
"""


@pytest.mark.parametrize("moved_by", ["an unrelated test", "a failing test"])
def test_main_moving_during_the_run_is_revalidated_before_landing(
    tmp_path: Path, moved_by: str
) -> None:
    repo = make_repo(tmp_path)
    passes = moved_by == "an unrelated test"
    text = "def test_more():\\n    assert %s\\n" % ("True" if passes else "False")
    script = repo.fixes / "move_main.sh"
    script.write_text(
        MOVE_MAIN.format(fixes=repo.fixes, root=repo.root, text=text, name="test_more.py")
    )
    contract = repo.contract(
        "moved.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: "sh {script}"}}
validators: [{{id: tests, kind: command, run: "{PYTEST}"}}]
budgets: {{max_recovery: 0}}
land: merge
# Unconfined on purpose: this coder commits on the user's main checkout to simulate main
# moving during the run, a write into the user's repository the seat's sandbox forbids.
sandbox: none
""",
    )
    base = git(repo.root, "rev-parse", "main")
    done = repo.main("run", "--contract", str(contract), "--json")
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    theirs = git(repo.root, "rev-list", "--reverse", f"{base}..main").split()[0]
    if passes:
        assert done.returncode == 0, done.stderr
        assert payload["status"] == "merged"
        # theirs, then ours on top of it: nothing lost, one commit of the run.
        ours = git(repo.root, "rev-parse", "main")
        assert git(repo.root, "rev-list", "--count", f"{base}..main") == "2"
        assert git(repo.root, "rev-parse", "main^") == theirs != ours
        assert (repo.root / "src" / "slug.py").read_text() == FIXED
        assert (repo.root / "tests" / "test_more.py").exists()
        assert git(repo.root, "status", "--porcelain") == ""
        return
    assert done.returncode == 1, done.stderr  # failed, runnable again from the new base
    assert payload["status"] == "blocked" and payload["task_status"] == "failed"
    assert payload["halt_type"] == "blocker" and payload["attempt_spent"] is True
    assert payload["reason"].startswith(
        f"the base branch moved to {theirs[:12]}; combined with it the validators block: tests:"
    )
    assert git(repo.root, "rev-parse", "main") == theirs  # main holds only what passed
    assert (repo.root / "src" / "slug.py").read_text() == BUGGY


@pytest.mark.parametrize("land_unverified", [False, True])
def test_a_run_nothing_verifies_is_not_merged_unless_the_contract_says_so(
    tmp_path: Path, land_unverified: bool
) -> None:
    repo = make_repo(tmp_path)
    base = git(repo.root, "rev-parse", "main")
    if land_unverified:
        contract = repo.contract(
            "unverified.yaml",
            'task: make the tests pass\ncoder: {kind: command, command: "echo garbage >> a.py"}\n'
            "land: merge\nland_unverified: true\n",
        )
        done = repo.main("run", "--contract", str(contract), "--json")
    else:
        done = repo.main(
            "run", "make the tests pass", "--coder-command", "echo garbage >> a.py",
            "--land", "merge", "--json",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "halt-verification-gap" in line]
    assert len(warning) == 1 and warning[0].startswith("warning: ")
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    assert [h["name"] for h in payload["halts"]["warnings"]] == ["halt-verification-gap"]
    branch = f"assay/{payload['run_id']}/seat-1"
    if land_unverified:
        assert payload["status"] == "merged"
        assert git(repo.root, "show", "main:a.py") == "garbage"
        return
    assert payload["status"] == "ready"
    assert payload["reason"] == (
        "no validator verified the change (only scope and secret checks); "
        f"branch {branch} left instead of merging; to merge, give a validator that can block "
        "(--validator, or the contract's validators:) or land_unverified: true"
    )
    assert git(repo.root, "rev-parse", "main") == base
    assert git(repo.root, "show", f"{branch}:a.py") == "garbage"


def test_a_check_that_only_warns_verifies_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    base = git(repo.root, "rev-parse", "main")
    contract = repo.contract(
        "warn_only.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: "{repo.put("fixed.py", "src/slug.py")}"}}
validators: [{{id: t, kind: command, run: "false", on_fail: warn}}]
land: merge
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "ready"
    assert "halt-verification-gap" in [h["name"] for h in payload["halts"]["warnings"]]
    assert payload["reason"].startswith("no validator verified the change")
    assert git(repo.root, "rev-parse", "main") == base


def test_the_squashed_commit_names_each_validator_with_its_severity(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "severities.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: "{repo.put("fixed.py", "src/slug.py")}"}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
  - {{id: lint, kind: command, run: "false", on_fail: warn}}
land: merge
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "merged"
    body = git(repo.root, "log", "-1", "--format=%B", "main")
    assert "Validators: tests: pass; lint: warn." in body
    assert "passed the validators" not in body
