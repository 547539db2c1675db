"""A blocked run killed after its close (``ASSAY_CRASH_AT`` ends the process): recovery removes
its seat, never its branch. The rest of what a closed run leaves behind is
tests/unit/cli/test_cleanup.py."""

from __future__ import annotations

from pathlib import Path

from support.repo import git, make_repo

from tests.unit.cli.test_cleanup import _contract, _left


def test_a_blocked_run_killed_after_its_close_loses_its_seat_to_recovery_not_its_branch(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    contract = str(_contract(repo, "wrong"))
    killed = repo.assay("run", "--contract", contract, ASSAY_CRASH_AT="ledger_closed")
    assert killed.returncode == 137, killed.stderr
    [payload] = repo.payloads()
    run = payload["run_id"]
    assert payload["status"] == "blocked"
    assert (repo.root / ".assay" / "seats" / run / "seat-1").is_dir()  # killed before cleanup
    assert repo.assay("run", "--resume").returncode == 0
    assert _left(repo) == []
    assert git(repo.root, "branch", "--list", "assay/*").strip() == f"assay/{run}/seat-1"
