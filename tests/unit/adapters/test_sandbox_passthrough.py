"""Every process assay starts for a seat honours the seat's sandbox: the coders (command,
replay), command validators and CLI judges, given a :class:`SandboxSpec`, run inside bwrap."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.repo import git

from assay.adapters.coders.base import DispatchRequest
from assay.adapters.coders.command import CommandCoder
from assay.adapters.coders.replay import ReplayCoder
from assay.adapters.judging import rank
from assay.adapters.sandbox import bwrap_problem
from assay.adapters.sandbox_spec import SandboxSpec
from assay.adapters.validators.base import ValidationContext
from assay.adapters.validators.command import CommandValidator
from assay.core.blind import BlindCandidate
from assay.core.changes import ChangeSet
from assay.core.contract import JudgeSpec
from assay.core.results import Severity
from assay.core.vocab import JudgeKind

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support" / "standins"))

from coder_harness import SEARCH_PATH

SECRET = "planted-key-31c9"
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


@pytest.fixture(autouse=True)
def _bwrap_works() -> None:
    problem = bwrap_problem()
    assert problem is None, f"these tests need a working bubblewrap: {problem}"


class Seat:
    def __init__(self, root: Path) -> None:
        self.home = root / "operator"
        (self.home / ".ssh").mkdir(parents=True)
        self.key = self.home / ".ssh" / "id_rsa"
        self.key.write_text(SECRET)
        self.repo = root / "repo"
        self.repo.mkdir()
        git(self.repo, "init", "-q", "-b", "main")
        (self.repo / "README.md").write_text("hello\n")
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "base")
        self.tree = root / "seat-1"
        git(root, "clone", "-q", str(self.repo), str(self.tree))
        self.logs = root / "logs" / "seat-1"
        self.spec = SandboxSpec(
            writable=(self.tree, self.logs, root / "halt"),
            hidden=(self.home, self.repo),
            home=root / "seat-1.home",
        )

    def request(self, **settings: object) -> DispatchRequest:
        return DispatchRequest(
            worktree=self.tree,
            prompt="fix it",
            dispatch_id="d-1",
            attempt=1,
            seat=1,
            halt_state_dir=self.tree.parent / "halt",
            report_path=self.logs / "report.json",
            log_dir=self.logs,
            env=ENV,
            settings=settings,
            timeout_seconds=20.0,
            repo_root=self.repo,
            sandbox=self.spec,
        )


@pytest.fixture
def seat(tmp_path: Path) -> Seat:
    return Seat(tmp_path)


def test_a_command_coder_runs_confined(seat: Seat) -> None:
    command = f"cat {seat.key} > leaked.txt; git config user.name EVIL; echo done > made.txt"
    result = CommandCoder().dispatch(seat.request(kind="command", command=command))
    assert result.exit_code == 0, result.error
    assert (seat.tree / "made.txt").read_text() == "done\n"
    assert (seat.tree / "leaked.txt").read_text() == ""
    assert "EVIL" in (seat.tree / ".git" / "config").read_text()  # its own repo: writable
    assert "EVIL" not in (seat.repo / ".git" / "config").read_text()
    assert "# sandbox: bwrap" in (seat.logs / "coder-attempt1.log").read_text()


def test_a_replay_diff_from_the_hidden_repository_still_applies(seat: Seat) -> None:
    diff = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-hello\n+hello, sandbox\n"
    (seat.repo / "fix.diff").write_text(diff)
    result = ReplayCoder().dispatch(
        seat.request(
            kind="replay", steps=[{"diff": "fix.diff", "script": f"cat {seat.key} || echo hidden"}]
        )
    )
    assert result.exit_code == 0, result.error
    assert (seat.tree / "README.md").read_text() == "hello, sandbox\n"
    script_log = (seat.logs / "replay-attempt1-script.log").read_text()
    assert SECRET not in script_log and "hidden" in script_log


def test_a_command_validator_runs_confined(seat: Seat) -> None:
    def validate(spec: SandboxSpec | None) -> Severity:
        context = ValidationContext(
            worktree=seat.tree,
            change=ChangeSet(base_commit="0" * 40),
            task="t",
            env=ENV,
            settings={"id": "probe", "run": f"! cat {seat.key}"},
            log_dir=seat.logs,
            sandbox=spec,
        )
        return CommandValidator().validate(context).result.severity

    assert validate(seat.spec) is Severity.PASS  # the key is not there to read
    assert validate(None) is Severity.BLOCK  # unconfined it is: the probe can fail


def test_a_cli_judge_runs_confined_with_its_own_folder_writable(seat: Seat, tmp_path: Path) -> None:
    candidates = [
        BlindCandidate(label="A", diff="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"),
        BlindCandidate(label="B", diff="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+c\n"),
    ]
    env = {
        "PATH": SEARCH_PATH,
        "HOME": str(seat.home),
        "STANDIN_SCENARIO": "rank",
        "STANDIN_RECORD": str(seat.logs / "record.json"),
        "ANTHROPIC_API_KEY": "standin-key",  # claude is never started without one
    }
    judge = JudgeSpec(kind=JudgeKind.CLAUDE, model="m-1", timeout_seconds=20)
    workdir = tmp_path / "judges" / "judge-1"  # not among the spec's writable paths
    result = rank(candidates, "t", judge, env=env, workdir=workdir, sandbox=seat.spec)
    assert result.ranking is not None, result.error
    assert "# sandbox: bwrap" in (workdir / "claude.log").read_text()
