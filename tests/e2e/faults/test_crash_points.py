"""A run killed at every named effect boundary, then recovered: exact counts, one landing.

The real `assay run` is ended with ``os._exit`` at a boundary (``ASSAY_CRASH_AT``), so it is a
process; the 1-seat run is recovered by ``assay run --resume``, the 3-seat run by ``assay serve
--once``, both run in this process (``Repo.main``) as are the reads of the ledger. After
each: main holds the change once, the ledger's counts are the dispatches that started, no task
is running, no seat repository or branch is left, and every payload agrees with the ledger.
``judged`` is reached only with blind judges: one 3-seat run ranked by a scripted judge.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.crash import LANDED_POINTS, crash_contract, invariant_failures, landings
from support.model_server import ModelServer
from support.repo import git, make_repo
from support.script import Turn

from assay.core.vocab import CrashPoint
from assay.engine.crashpoints import CRASH_EXIT

BOUNDARIES = [p.value for p in CrashPoint if p is not CrashPoint.JUDGED]


@pytest.mark.parametrize("crash_at", BOUNDARIES)
def test_one_seat_killed_at_a_boundary_resumes_exact(tmp_path: Path, crash_at: str) -> None:
    repo = make_repo(tmp_path)
    base = landings(repo.root)
    killed = repo.assay("run", "--contract", str(crash_contract(repo, 1)), ASSAY_CRASH_AT=crash_at)
    assert killed.returncode == CRASH_EXIT, killed.stderr
    landed_before = landings(repo.root) - base

    resumed = repo.main("run", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert invariant_failures(repo, base_landings=base) == []
    assert landed_before == (1 if CrashPoint(crash_at) in LANDED_POINTS else 0)
    again = repo.main("run", "--resume")  # a second recovery finds nothing to do
    assert again.returncode == 0 and "no interrupted run" in again.stderr
    assert invariant_failures(repo, base_landings=base) == []
    runs = _runs(repo)
    if CrashPoint(crash_at) in LANDED_POINTS:  # recognised as landed, never landed again
        assert [r["status"] for r in runs] == ["merged"]
    else:  # closed once as interrupted (refunded), then run again
        assert [r["status"] for r in runs] == ["failed", "merged"]
        interrupted = json.loads(Path(runs[0]["payload_path"]).read_text())
        assert interrupted["halt_type"] == "environment_error"
        assert interrupted["attempt_spent"] is False
        ran = crash_at not in ("task_started", "armed")
        assert interrupted["attempts"]["coder_dispatches"] == (1 if ran else 0)


@pytest.mark.parametrize(
    "crash_at", [*BOUNDARIES, "dispatch_started:3", "dispatch_ended:2", "validated:2"]
)
def test_three_seats_killed_at_a_boundary_serve_recovers_exact(
    tmp_path: Path, crash_at: str
) -> None:
    repo = make_repo(tmp_path)
    base = landings(repo.root)
    killed = repo.assay("run", "--contract", str(crash_contract(repo, 3)), ASSAY_CRASH_AT=crash_at)
    assert killed.returncode == CRASH_EXIT, killed.stderr

    served = repo.main("serve", "--once", "--poll", "0.1")
    assert served.returncode == 0, served.stderr
    assert invariant_failures(repo, base_landings=base) == []
    runs = _runs(repo)
    assert runs[-1]["status"] == "merged"
    if crash_at.startswith(("dispatch", "validated", "landing")):
        interrupted = json.loads(Path(runs[0]["payload_path"]).read_text())
        assert interrupted["attempts"]["coder_dispatches"] == 3  # all three had started


def test_three_judged_seats_killed_after_judging_serve_recovers_exact(tmp_path: Path) -> None:
    rank = Turn.call("rank", {"ranking": ["A", "B", "C"], "reasons": "all the same"})
    with ModelServer(when_exhausted=rank) as server:
        repo = make_repo(tmp_path)
        judged = (
            f"judges: 1\njudge: {{kind: llm, model: m, base_url: {server.base_url!r}}}\n"
            "env: {OPENAI_API_KEY: local-test-key}\n"
        )
        contract = crash_contract(repo, 3, extra=judged)
        base = landings(repo.root)
        killed = repo.assay("run", "--contract", str(contract), ASSAY_CRASH_AT="judged")
        assert killed.returncode == CRASH_EXIT, killed.stderr
        assert server.requests, "the judge was never asked"
        served = repo.main("serve", "--once", "--poll", "0.1")
        assert served.returncode == 0, served.stderr
    assert invariant_failures(repo, base_landings=base) == []
    runs = _runs(repo)
    assert [r["status"] for r in runs] == ["failed", "merged"]
    interrupted = json.loads(Path(runs[0]["payload_path"]).read_text())
    assert interrupted["attempts"]["coder_dispatches"] == 3


def _runs(repo) -> list[dict]:  # type: ignore[no-untyped-def]
    tasks = json.loads(repo.main("task", "list", "--json").stdout)
    assert len(tasks) == 1 and tasks[0]["status"] == "done"
    return json.loads(repo.main("task", "show", tasks[0]["id"], "--json").stdout)["runs"]


def test_recovery_leaves_the_seats_an_operator_asked_to_keep(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = str(crash_contract(repo, 1))
    kept = repo.main("run", "--contract", contract, "--keep-worktrees")
    assert kept.returncode == 0, kept.stderr
    seats = repo.root / ".assay" / "seats"
    before = sorted(p.name for p in seats.glob("*/*"))
    assert before == [
        "seat-1",
        "seat-1.candidates.git",
        "seat-1.home",
        "seat-1.index",
        "seat-1.out",
    ]
    branches = git(repo.root, "branch", "--list", "assay/*")
    assert branches  # the candidate passed its scope and secret checks: kept as a branch too
    assert repo.main("run", "--resume").returncode == 0
    assert sorted(p.name for p in seats.glob("*/*")) == before
    assert git(repo.root, "branch", "--list", "assay/*") == branches
