"""The seats of a run as the engine holds them: the sandbox each seat's processes get, and
which candidates may enter the user's repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.repo import git, make_repo

from assay.adapters import git as gitops
from assay.core.contract import Contract
from assay.core.results import ValidatorResult
from assay.core.vocab import NetworkMode, SandboxMode, Severity
from assay.engine.effects import RunPlan
from assay.engine.seating import Seating


def plan_for(root: Path, **contract: Any) -> RunPlan:
    task = Contract(task="Make slugify keep digits.", **contract)
    return RunPlan("t1", "r1", "r1", task, root, git(root, "rev-parse", "HEAD"), "main")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path).root


def test_the_coder_may_write_its_seat_and_logs_never_the_halt_state_and_sees_no_home_or_repo(
    root: Path, tmp_path: Path
) -> None:
    home = root / ".assay"
    seating = Seating(home, {"HOME": str(tmp_path / "operator")})
    plan = plan_for(root, coder={"kind": "claude"}, network="none")
    seat = seating.prepare(plan, 1)
    logs = home / "runs" / "r1" / "attempt-1" / "seat-1"
    spec = seating.coder_sandbox(plan, 1, logs)
    assert spec.mode is SandboxMode.BWRAP
    assert spec.network is NetworkMode.ON  # an agent keeps the network to reach its model
    # The halt state folder stays hidden under assay's: the engine's files are the engine's.
    assert spec.writable == (seat.path.resolve(), logs.resolve())
    assert spec.hidden == ((tmp_path / "operator").resolve(), root.resolve(), home.resolve())
    assert spec.readable == ((root / ".git" / "objects").resolve(),)
    assert spec.home == seat.home.resolve() and spec.home.is_dir()
    assert spec.home.name == "seat-1.home" and spec.home.parent == seat.path.parent.resolve()


@pytest.mark.parametrize("kind", ["command", "replay"])
def test_network_none_takes_the_network_from_command_coders_and_validators(
    root: Path, kind: str
) -> None:
    seating = Seating(root / ".assay", {})
    coder: dict[str, Any] = {"kind": kind, "command": "true"} if kind == "command" else {}
    if kind == "replay":
        coder = {"kind": "replay", "steps": [{"script": "true"}]}
    plan = plan_for(root, coder=coder, network="none", sandbox="none")
    seating.prepare(plan, 1)
    logs = root / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    coder_spec = seating.coder_sandbox(plan, 1, logs)
    validator_spec = seating.validator_sandbox(plan, 1, logs / "validators")
    assert coder_spec.network is NetworkMode.NONE and validator_spec.network is NetworkMode.NONE
    assert coder_spec.mode is SandboxMode.NONE  # the contract's explicit choice, passed on
    # Validators run the coder's code: never the halt state, and no operator home to hide.
    assert (root / ".assay" / "halt-state").resolve() not in validator_spec.writable
    assert validator_spec.hidden == (root.resolve(), (root / ".assay").resolve())


def result(name: str, severity: Severity, error: bool = False) -> ValidatorResult:
    return ValidatorResult(validator_id=name, severity=severity, error=error)


@pytest.mark.parametrize(
    ("scope", "secrets", "published"),
    [
        (Severity.PASS, Severity.PASS, True),
        (Severity.PASS, Severity.BLOCK, False),
        (Severity.BLOCK, Severity.PASS, False),
        (Severity.PASS, None, False),
    ],
)
def test_only_a_candidate_that_passed_scope_and_secrets_is_fetched(
    root: Path, scope: Severity, secrets: Severity | None, published: bool
) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root)
    seat = seating.prepare(plan, 1)
    (seat.path / "src" / "slug.py").write_text("changed\n")
    git(seat.path, "commit", "-qam", "attempt 1")
    seating.record_candidate(plan, 1, 1)
    results = [result("scope", scope), result("tests", Severity.BLOCK)]
    if secrets is not None:
        results.append(result("secrets", secrets))
    seating.record_checks(1, 1, results)
    seating.record_checks(1, 1, [result("scope", Severity.PASS), result("secrets", Severity.PASS)])
    branch = seating.publish(plan, 1, 1)
    refs = git(root, "for-each-ref", "--format=%(refname)", "refs/heads/assay/")
    if published:
        assert branch == "assay/r1/seat-1" and refs == "refs/heads/assay/r1/seat-1"
        assert git(root, "log", "-1", "--format=%s%n%b", branch).splitlines() == [
            "Make slugify keep digits.",
            "assay run r1, seat 1, attempt 1",
        ]
        assert git(root, "rev-parse", f"{branch}^") == plan.base_commit
    else:  # the first validation of the attempt decides; a later one of another tree does not
        assert branch is None and refs == ""
    seating.cleanup(plan, keep_branches=set())
    assert git(root, "for-each-ref", "refs/heads/assay/") == ""
    assert not (root / ".assay" / "seats").exists()


def test_a_file_the_contract_env_names_is_readable_but_never_the_repo_or_a_hidden_folder(
    root: Path, tmp_path: Path
) -> None:
    operator = tmp_path / "operator"
    registry = operator / ".config" / "registry.json"
    registry.parent.mkdir(parents=True)
    registry.write_text("{}")
    bundle = tmp_path / "ca.pem"
    bundle.write_text("pem")
    seating = Seating(root / ".assay", {"HOME": str(operator), "CA": str(bundle)})
    env = {
        "REGISTRY": str(registry),  # under the hidden home: named, so shown read-only
        "BUNDLE": "$CA",  # the operator's variable, resolved
        "IN_REPO": str(root / "src" / "slug.py"),  # the user's repository stays hidden
        "HOME_ITSELF": str(operator),  # naming the hidden home does not show it
        "PARENT": str(tmp_path),  # nor does a folder holding hidden ones
        "RELATIVE": "src/slug.py",
        "MISSING": str(tmp_path / "nothing"),
        "WORD": "plain",
    }
    metadata = tmp_path / "metadata.json"
    metadata.write_text("{}")
    coder = {"kind": "aider", "args": ["--model-metadata-file", str(metadata), str(operator)]}
    plan = plan_for(root, coder=coder, env=env)
    seating.prepare(plan, 1)
    spec = seating.coder_sandbox(plan, 1, root / ".assay" / "runs" / "r1" / "logs")
    assert spec.readable == (
        (root / ".git" / "objects").resolve(),
        registry.resolve(),
        bundle.resolve(),
        metadata.resolve(),  # a coder argument naming a file
    )


def test_the_halt_relay_folder_is_read_only_for_its_coder_only(root: Path, tmp_path: Path) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, coder={"kind": "claude"})
    seating.prepare(plan, 1)
    logs = root / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    relay = tmp_path / "relay"
    relay.mkdir()
    assert relay.resolve() not in seating.coder_sandbox(plan, 1, logs).readable
    spec = seating.coder_sandbox(plan, 1, logs, relay)
    assert relay.resolve() in spec.readable  # its socket takes connections, nothing else
    assert relay.resolve() not in spec.writable
    assert spec.readable[0] == (root / ".git" / "objects").resolve()  # the rest as before
    validator = seating.validator_sandbox(plan, 1, logs / "validators")
    assert relay.resolve() not in (*validator.writable, *validator.readable)


def test_a_retried_dispatch_starts_where_its_attempt_started_not_on_a_lost_ones_leftovers(
    root: Path,
) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, sandbox="none")
    seat = seating.prepare(plan, 1, attempt=1)
    (seat.path / "kept.txt").write_text("attempt 1's candidate\n")
    first = gitops.commit_all(seat.path, "assay: attempt 1, seat 1")
    assert first is not None
    # Attempt 2's dispatch starts on attempt 1's candidate; its coder is lost midway, leaving
    # a half-written file, a changed one, and even a commit of its own.
    seat = seating.prepare(plan, 1, attempt=2)
    assert git(seat.path, "rev-parse", "HEAD") == first
    (seat.path / "half.txt").write_text("half")
    (seat.path / "kept.txt").write_text("scribbled\n")
    gitops.commit_all(seat.path, "assay: attempt 2, seat 1")
    (seat.path / "later.txt").write_text("after the commit")
    (seat.path / ".gitignore").write_text("cache/\n")
    retried = seating.prepare(plan, 1, attempt=2)
    assert retried.path == seat.path
    assert git(seat.path, "rev-parse", "HEAD") == first
    assert (seat.path / "kept.txt").read_text() == "attempt 1's candidate\n"
    assert not (seat.path / "half.txt").exists() and not (seat.path / "later.txt").exists()
    assert git(seat.path, "status", "--porcelain") == ""
