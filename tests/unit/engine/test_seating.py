"""The seats of a run as the engine holds them: fresh seats per dispatch, the sandbox each
seat's processes get, the candidate captured from a seat, and which candidates may enter the
user's repository."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support.repo import git, make_repo
from support.seat_trees import forge, listing

from assay.core.contract import Contract
from assay.core.results import ValidatorResult
from assay.core.vocab import NetworkMode, SandboxMode, Severity
from assay.engine.effects import RunPlan
from assay.engine.local.seating import Seating


def plan_for(root: Path, **contract: Any) -> RunPlan:
    task = Contract(task="Make slugify keep digits.", **contract)
    return RunPlan("t1", "r1", "r1", task, root, git(root, "rev-parse", "HEAD"), "main")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path).root


def captured(seating: Seating, plan: RunPlan, seat: int, attempt: int) -> str:
    """The seat's work tree captured (unconfined here: the contract says ``sandbox: none``)
    and imported as the attempt's candidate; its commit."""
    capture = seating.capture(plan, seat)
    assert capture.ok, capture
    return seating.import_capture(plan, attempt, seat, capture)


def test_the_coder_writes_its_seat_and_output_only_and_sees_neither_home_nor_repo(
    root: Path, tmp_path: Path
) -> None:
    home = root / ".assay"
    seating = Seating(home, {"HOME": str(tmp_path / "operator")})
    plan = plan_for(root, coder={"kind": "claude"}, network="none")
    seat = seating.prepare(plan, 1)
    logs = home / "runs" / "r1" / "attempt-1" / "seat-1"
    out = home / "seats" / "r1" / "seat-1.out" / "attempt-1.x"
    relay = tmp_path / "relay"
    relay.mkdir()
    spec = seating.coder_sandbox(plan, 1, logs, out, relay)
    assert spec.mode is SandboxMode.BWRAP
    assert spec.network is NetworkMode.ON  # an agent keeps the network to reach its model
    assert spec.writable == (seat.path.resolve(), out.resolve())
    assert (home / "halt-state").resolve() not in spec.writable
    assert spec.hidden == ((tmp_path / "operator").resolve(), root.resolve(), home.resolve())
    candidates = home / "seats" / "r1" / "seat-1.candidates.git" / "objects"
    assert spec.readable == (
        (root / ".git" / "objects").resolve(),
        candidates.resolve(),
        logs.resolve(),
        relay.resolve(),
    )
    assert spec.home == seat.home.resolve() and spec.home.is_dir()
    assert spec.home.name == "seat-1.home" and spec.home.parent == seat.path.parent.resolve()


def test_network_none_takes_the_network_from_command_coders_and_validators(root: Path) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, coder={"kind": "command", "command": "true"}, network="none")
    seating.prepare(plan, 1)
    logs = root / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    coder_spec = seating.coder_sandbox(plan, 1, logs, logs.parent / "out")
    checkout = seating.checkout(plan, 1, plan.base_commit)
    validator_spec = seating.validator_sandbox(plan, 1, checkout)
    assert coder_spec.network is NetworkMode.NONE and validator_spec.network is NetworkMode.NONE
    # A validator writes its own fresh checkout and home, nothing of the run's.
    assert validator_spec.writable == (checkout.path.resolve(),)
    assert validator_spec.home == checkout.home.resolve()
    assert validator_spec.hidden == (root.resolve(), (root / ".assay").resolve())


def rules(spec: Any) -> list[str]:
    return [f"{r.host}:{r.port}" if r.port else r.host for r in spec.allow]


def test_an_agent_reaches_its_provider_and_the_contracts_hosts_only(root: Path) -> None:
    seating = Seating(root / ".assay", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    plan = plan_for(root, coder={"kind": "claude"}, network={"allow": ["pypi.org"]}, env={"X": "1"})
    seating.prepare(plan, 1)
    logs = root / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    spec = seating.coder_sandbox(plan, 1, logs, logs.parent / "out")
    assert spec.network is NetworkMode.ON
    # Its base URL (from its own credential variables) replaces api.anthropic.com.
    assert rules(spec) == ["127.0.0.1:9", "pypi.org"]
    none = plan_for(root, coder={"kind": "claude"}, network={"mode": "none", "allow": ["x.org"]})
    assert rules(seating.coder_sandbox(none, 1, logs, logs.parent / "out")) == ["127.0.0.1:9"]


def test_validators_get_the_coders_allowlist_only_when_granted(root: Path) -> None:
    seating = Seating(root / ".assay", {})
    granted = {"allow": ["pypi.org"], "validators": "on"}
    plan = plan_for(root, coder={"kind": "command", "command": "true"}, network=granted)
    seating.prepare(plan, 1)
    checkout = seating.checkout(plan, 1, plan.base_commit)
    spec = seating.validator_sandbox(plan, 1, checkout)
    assert spec.network is NetworkMode.ON and rules(spec) == ["pypi.org"]
    default = plan_for(
        root, coder={"kind": "command", "command": "true"}, network={"allow": ["a.b"]}
    )
    assert seating.validator_sandbox(default, 1, checkout).network is NetworkMode.NONE
    host = plan_for(root, coder={"kind": "command", "command": "true"}, network="host")
    assert seating.validator_sandbox(host, 1, checkout).network is NetworkMode.NONE
    logs = root / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    assert seating.coder_sandbox(host, 1, logs, logs.parent / "out").network is NetworkMode.HOST


def test_a_cli_judge_reaches_its_own_provider(root: Path) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(
        root,
        seats=2,
        judges=2,
        judge=[{"kind": "codex", "base_url": "https://gw.example.com/v1"}, {"kind": "claude"}],
    )
    spec = seating.judge_sandbox(plan)
    assert spec.network is NetworkMode.ON
    assert rules(spec) == ["gw.example.com:443", "api.anthropic.com"]


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
    plan = plan_for(root, sandbox="none")
    seat = seating.prepare(plan, 1)
    (seat.path / "src" / "slug.py").write_text("changed\n")
    git(seat.path, "commit", "-qam", "the coder's own history never leaves the seat")
    commit = captured(seating, plan, 1, 1)
    results = [result("scope", scope), result("tests", Severity.BLOCK)]
    if secrets is not None:
        results.append(result("secrets", secrets))
    seating.record_checks(1, 1, results)
    seating.record_checks(1, 1, [result("scope", Severity.PASS), result("secrets", Severity.PASS)])
    branch = seating.publish(plan, 1, 1)
    refs = git(root, "for-each-ref", "--format=%(refname)", "refs/heads/assay/")
    if published:
        assert branch == "assay/r1/seat-1" and refs == "refs/heads/assay/r1/seat-1"
        assert git(root, "rev-parse", branch) == commit
        assert git(root, "log", "-1", "--format=%s%n%b", branch).splitlines() == [
            "Make slugify keep digits.",
            "assay run r1, seat 1, attempt 1",
        ]
        assert git(root, "rev-parse", f"{branch}^") == plan.base_commit
        assert git(root, "show", f"{branch}:src/slug.py") == "changed"
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
    logs = root / ".assay" / "runs" / "r1" / "logs"
    spec = seating.coder_sandbox(plan, 1, logs, logs / "out")
    assert spec.readable[-3:] == (registry.resolve(), bundle.resolve(), metadata.resolve())


def test_every_dispatch_gets_a_fresh_seat_on_its_seats_latest_earlier_candidate(
    root: Path,
) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, sandbox="none")
    seat = seating.prepare(plan, 1, attempt=1)
    (seat.path / "kept.txt").write_text("attempt 1's candidate\n")
    (seat.path / "ignored.log").write_text("the coder's own\n")
    (seat.path / ".gitignore").write_text("*.log\n")
    first = captured(seating, plan, 1, 1)
    # Attempt 2's dispatch starts on attempt 1's candidate; its coder is lost midway, leaving
    # a half-written file, a changed one, a hook and a replace ref in its .git.
    seat = seating.prepare(plan, 1, attempt=2)
    assert git(seat.path, "rev-parse", "HEAD") == first
    assert git(seat.path, "status", "--porcelain") == ""
    assert not (seat.path / "ignored.log").exists()  # the candidate is the tree, nothing else
    (seat.path / "half.txt").write_text("half")
    (seat.path / "kept.txt").write_text("scribbled\n")
    (seat.path / ".git" / "hooks" / "post-checkout").write_text("#!/bin/sh\ntouch /tmp/x\n")
    (seat.path.with_name("seat-1.home") / "planted").write_text("in the home")
    retried = seating.prepare(plan, 1, attempt=2)
    assert retried.path == seat.path
    assert git(seat.path, "rev-parse", "HEAD") == first
    assert (seat.path / "kept.txt").read_text() == "attempt 1's candidate\n"
    assert not (seat.path / "half.txt").exists()
    assert not (seat.path / ".git" / "hooks" / "post-checkout").exists()
    assert list(retried.home.iterdir()) == []


def test_a_checkout_holds_exactly_the_candidates_bytes_whatever_its_attributes_say(
    root: Path,
) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, sandbox="none")
    seat = seating.prepare(plan, 1)
    (seat.path / ".gitattributes").write_text("* text=auto eol=crlf\n")
    (seat.path / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (seat.path / "lf.txt").write_bytes(b"one\ntwo\n")
    commit = captured(seating, plan, 1, 1)
    fresh = seating.checkout(plan, 1, commit, in_place=False)
    assert fresh.path != seat.path
    reset = seating.checkout(plan, 1, commit)
    assert reset.path == seat.path and reset.home != seat.home
    for checkout in (fresh, reset):
        assert (checkout.path / "crlf.txt").read_bytes() == b"one\r\ntwo\r\n"
        assert (checkout.path / "lf.txt").read_bytes() == b"one\ntwo\n"
        assert list(checkout.home.iterdir()) == []


def test_a_seat_reset_for_a_check_holds_what_a_fresh_checkout_holds_whatever_was_left(
    root: Path, tmp_path: Path
) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, sandbox="none")
    seat = seating.prepare(plan, 1)
    (seat.path / ".gitignore").write_text("build/\n*.pyc\n")
    (seat.path / "src" / "new.py").write_text("NEW = 1\n")
    commit = captured(seating, plan, 1, 1)
    reference = listing(seating.checkout(plan, 1, commit, in_place=False).path)
    # What a capture leaves out, and what a process writes after it: ignored and untracked
    # files, an empty folder, a read-only one, a FIFO, a link where a folder was, a tracked
    # file changed behind its stat data, an executable bit, and a planted hook and config.
    (seat.path / "build").mkdir()
    (seat.path / "build" / "conftest.py").write_text("raise SystemExit(0)\n")
    (seat.path / "src" / "slug.cpython-311.pyc").write_bytes(b"\0" * 16)
    (seat.path / "empty").mkdir()
    locked = seat.path / "locked"
    locked.mkdir()
    (locked / "inside.txt").write_text("x")
    locked.chmod(0o500)
    os.mkfifo(seat.path / "pipe")
    tests_folder = seat.path / "tests"
    for path in sorted(tests_folder.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    tests_folder.rmdir()
    tests_folder.symlink_to(tmp_path)
    slug = seat.path / "src" / "slug.py"
    forge(slug, bytes(reversed(slug.read_bytes())))
    (seat.path / "src" / "new.py").chmod(0o755)
    marker = tmp_path / "hook-ran"
    hook = seat.path / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with (seat.path / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = {hook.parent}\n")
    checkout = seating.checkout(plan, 1, commit)
    assert checkout.path == seat.path  # reset in place, not made again
    assert listing(checkout.path) == reference
    assert not marker.exists()
    assert list((checkout.path / ".git" / "hooks").iterdir()) == []
    assert "fsmonitor" not in (checkout.path / ".git" / "config").read_text()
    assert git(checkout.path, "status", "--porcelain", "--ignored") == ""


def test_each_check_finds_the_tree_again_not_what_the_check_before_left(root: Path) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, sandbox="none")
    seating.prepare(plan, 1)
    commit = captured(seating, plan, 1, 1)
    reference = listing(seating.checkout(plan, 1, commit, in_place=False).path)
    first = seating.checkout(plan, 1, commit)
    slug = first.path / "src" / "slug.py"
    forge(slug, bytes(reversed(slug.read_bytes())))
    (first.path / "src" / "__pycache__").mkdir()
    (first.path / "src" / "__pycache__" / "slug.pyc").write_bytes(b"poison")
    seating.done_with(first)
    assert first.path.is_dir() and not first.home.exists()  # the seat stays, for the next
    second = seating.checkout(plan, 1, commit)
    assert second.path == first.path and listing(second.path) == reference


def test_a_seat_that_cannot_be_reset_is_never_used_a_fresh_checkout_is(
    root: Path, tmp_path: Path
) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, sandbox="none")
    seat = seating.prepare(plan, 1)
    commit = captured(seating, plan, 1, 1)
    elsewhere = tmp_path / "elsewhere"
    seat.path.rename(elsewhere)
    seat.path.symlink_to(elsewhere)  # the seat is not the folder it was
    checkout = seating.checkout(plan, 1, commit)
    assert checkout.path != seat.path and not checkout.path.is_symlink()
    assert git(checkout.path, "status", "--porcelain", "--ignored") == ""
    assert seating.checkout(plan, 1, commit).path != seat.path  # never tried again


def test_the_files_holding_assays_own_secrets_are_hidden_wherever_they_are(
    root: Path, tmp_path: Path
) -> None:
    # A Temporal client key or a libpq password file outside the operator's home would be
    # readable through the read-only root; a contract naming it, or its folder, must not show it.
    keys = tmp_path / "etc" / "assay"
    keys.mkdir(parents=True)
    (keys / "worker-key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    (keys / "pgpass").write_text("db:5432:assay:assay:pw\n")
    operator = {
        "ASSAY_TEMPORAL_TLS_KEY": str(keys / "worker-key.pem"),
        "ASSAY_DATABASE_URL": "postgresql://assay@db/assay",
        "PGPASSFILE": str(keys / "pgpass"),
    }
    seating = Seating(root / ".assay", operator)
    env = {"KEY": str(keys) + "//worker-key.pem", "FOLDER": str(keys)}
    plan = plan_for(root, coder={"kind": "command", "command": "true"}, env=env)
    seating.prepare(plan, 1)
    logs = root / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    coder = seating.coder_sandbox(plan, 1, logs, logs.parent / "out")
    validator = seating.validator_sandbox(plan, 1, seating.checkout(plan, 1, plan.base_commit))
    for spec in (coder, validator, seating.judge_sandbox(plan)):
        assert {(keys / "worker-key.pem").resolve(), (keys / "pgpass").resolve()} <= set(
            spec.hidden
        )
        assert not {keys.resolve(), (keys / "worker-key.pem").resolve()} & set(spec.readable)


def test_a_sqlite_ledger_outside_the_homes_is_hidden_with_its_journals(
    root: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "srv" / "ledger.db"
    ledger.parent.mkdir()
    for name in ("ledger.db", "ledger.db-wal"):
        (ledger.parent / name).write_text("tasks")
    seating = Seating(root / ".assay", {"ASSAY_DATABASE_URL": f"sqlite:///{ledger}"})
    plan = plan_for(root, coder={"kind": "command", "command": "true"})
    seating.prepare(plan, 1)
    logs = root / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    hidden = set(seating.coder_sandbox(plan, 1, logs, logs.parent / "out").hidden)
    assert {ledger.resolve(), ledger.with_name("ledger.db-wal").resolve()} <= hidden
