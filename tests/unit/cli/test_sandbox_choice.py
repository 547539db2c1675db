"""The contract's `sandbox:` through `assay` (in-process): a bwrap contract on a machine without
bwrap is refused (exit 2, install / opt-out advice, nothing created); `sandbox: none` is an
explicit choice the payload records.

A machine without bwrap is simulated with ``ASSAY_BWRAP`` naming a program that is not there
(or one that cannot create a sandbox).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.repo import Repo, make_repo

CONTRACT = """task: Make slugify keep digits.
scope: {{allow: ["src/**"]}}
coder: {{kind: replay, steps: [{{script: "echo '# x' >> src/slug.py"}}]}}
land: branch
{extra}"""


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(tmp_path)


def missing(tmp_path: Path) -> dict[str, str]:
    return {"ASSAY_BWRAP": str(tmp_path / "no-bwrap-here")}


def test_a_bwrap_contract_without_bwrap_is_refused_before_anything_is_created(
    repo: Repo, tmp_path: Path
) -> None:
    contract = repo.contract("c.yaml", CONTRACT.format(extra=""))
    done = repo.main("run", "--contract", str(contract), **missing(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "bubblewrap (bwrap) is not installed: apt-get install bubblewrap" in done.stderr
    assert "sandbox: none" in done.stderr
    assert not (repo.root / ".assay" / "tasks").exists() or not list(
        (repo.root / ".assay" / "tasks").iterdir()
    )
    flags = repo.main("run", "fix it", "--coder", "command", "--coder-command", "true",
                       **missing(tmp_path))  # fmt: skip
    assert flags.returncode == 2 and "apt-get install bubblewrap" in flags.stderr
    queued = repo.main("task", "add", "--contract", str(contract), **missing(tmp_path))
    assert queued.returncode == 2 and "apt-get install bubblewrap" in queued.stderr
    listed = repo.main("task", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_a_bwrap_that_cannot_create_a_sandbox_is_refused(repo: Repo, tmp_path: Path) -> None:
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    contract = repo.contract("c.yaml", CONTRACT.format(extra=""))
    done = repo.main("run", "--contract", str(contract), ASSAY_BWRAP=str(broken))
    assert done.returncode == 2
    assert "cannot create a sandbox here: bwrap: setting up uid map" in done.stderr


def test_contract_check_only_warns(repo: Repo, tmp_path: Path) -> None:
    contract = repo.contract("c.yaml", CONTRACT.format(extra=""))
    done = repo.main("contract", "check", str(contract), **missing(tmp_path))
    assert done.returncode == 0 and done.stdout.strip().endswith(": ok")
    assert "warning: `assay run` would refuse this contract here" in done.stderr


def test_sandbox_none_runs_without_bwrap_and_the_payload_says_so(
    repo: Repo, tmp_path: Path
) -> None:
    contract = repo.contract("none.yaml", CONTRACT.format(extra="sandbox: none\n"))
    done = repo.main("run", "--contract", str(contract), "--json", **missing(tmp_path))
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["sandbox"] == "none"
    plain = repo.contract("plain.yaml", CONTRACT.format(extra=""))
    flagged = repo.main(
        "run", "--contract", str(plain), "--sandbox", "none", "--json", **missing(tmp_path)
    )
    assert flagged.returncode in (0, 1), flagged.stderr
    assert json.loads(flagged.stdout)["sandbox"] == "none"


def test_a_sandboxed_run_records_bwrap(repo: Repo) -> None:
    contract = repo.contract("c.yaml", CONTRACT.format(extra=""))
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["sandbox"] == "bwrap"


def test_serve_refuses_a_queued_bwrap_task_without_bwrap(repo: Repo, tmp_path: Path) -> None:
    contract = repo.contract("c.yaml", CONTRACT.format(extra=""))
    queued = repo.main("task", "add", "--contract", str(contract), "--json")
    assert queued.returncode == 0, queued.stderr
    task_id = json.loads(queued.stdout)["id"]
    served = repo.main("serve", "--once", **missing(tmp_path))
    assert served.returncode == 2 and "apt-get install bubblewrap" in served.stderr
    shown = json.loads(repo.main("task", "show", task_id, "--json").stdout)
    assert shown["status"] == "queued" and shown["attempts"] == 0
