"""Recovering a run whose landing died after the base branch moved and before the user's
checkout was brought along: finished now, or swapped back and the run not counted merged.

A real SQLite ledger and a real repository whose ``main`` is checked out; the died landing is
made as the lander leaves it: the ref moved with ``update-ref``, the index and files not.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.recovery import START, running_ledger
from support.repo import git

from assay.adapters.landing import RUN_TRAILER
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract
from assay.core.vocab import RunStatus, TaskStatus
from assay.engine.recovery.close import close_unfinished


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    (root / "a.txt").write_text("a\n")
    git(root, "add", "a.txt")
    git(root, "commit", "-qm", "base")
    return root


@pytest.fixture
def ledger(tmp_path: Path, repo: Path) -> Ledger:
    base = {"base_commit": git(repo, "rev-parse", "main"), "base_branch": "main"}
    return running_ledger(
        tmp_path,
        [
            ("run.started", base),
            ("dispatch.started", {"attempt": 1, "seat": 1, "coder": "command"}),
            ("seat.finished", {"attempt": 1, "seat": 1, "files": ["a.txt"], "viable": True}),
        ],
    )


def died_landing(repo: Path, files: dict[str, str] | None = None) -> str:
    """A squashed commit of run r1 on ``main`` (``files``: its tree, ``a.txt`` changed by
    default), its checkout not brought along."""
    old = git(repo, "rev-parse", "main")
    entries = ""
    for name, text in (files or {"a.txt": "landed\n"}).items():
        blob = subprocess.run(
            ["git", "-C", str(repo), "hash-object", "-w", "--stdin"],
            input=text, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        entries += f"100644 blob {blob}\t{name}\n"
    tree = subprocess.run(
        ["git", "-C", str(repo), "mktree"],
        input=entries, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    commit = git(repo, "commit-tree", tree, "-p", old, "-m", f"t\n\n{RUN_TRAILER}: r1")
    git(repo, "update-ref", "refs/heads/main", commit, old)
    return commit


def recover(repo: Path, ledger: Ledger, warn: Callable[[str], None] | None = None) -> RunStatus:
    return close_unfinished(
        repo=repo,
        home=repo / ".assay",
        ledger=ledger,
        record=ledger.get_run("r1"),
        contract=Contract(task="i"),
        reason="interrupted: the process running it died before the run closed",
        clock=lambda: START,
        warn=warn,
    )


def test_a_died_landing_is_finished_and_the_run_closes_merged(repo: Path, ledger: Ledger) -> None:
    commit = died_landing(repo)
    assert recover(repo, ledger) is RunStatus.MERGED
    assert git(repo, "rev-parse", "main") == commit
    assert (repo / "a.txt").read_text() == "landed\n"
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_a_died_landing_that_cannot_be_finished_is_undone_and_the_run_refunded(
    repo: Path, ledger: Ledger
) -> None:
    base = git(repo, "rev-parse", "main")
    died_landing(repo)
    (repo / "a.txt").write_text("the user's edit since the crash\n")
    assert recover(repo, ledger) is RunStatus.FAILED
    assert git(repo, "rev-parse", "main") == base  # the branch agrees with its files again
    assert (repo / "a.txt").read_text() == "the user's edit since the crash\n"
    task = ledger.get_task("t1")
    assert task.status is TaskStatus.FAILED and task.attempts == 0  # refunded, not merged
    assert ledger.get_run("r1").status is RunStatus.FAILED


def test_a_died_landing_with_an_ignored_file_in_the_way_is_undone(
    repo: Path, ledger: Ledger
) -> None:
    """The landing adds ``b.txt``; the user made an ignored ``b.txt`` since (one git itself
    would overwrite): bringing the checkout would lose it, so the ref goes back and the run is
    not counted merged."""
    base = git(repo, "rev-parse", "main")
    died_landing(repo, {"a.txt": "a\n", "b.txt": "landed\n"})
    (repo / ".git" / "info" / "exclude").write_text("b.txt\n")
    (repo / "b.txt").write_text("the user's own\n")
    assert recover(repo, ledger) is RunStatus.FAILED
    assert git(repo, "rev-parse", "main") == base
    assert (repo / "b.txt").read_text() == "the user's own\n"
    assert ledger.get_run("r1").status is RunStatus.FAILED


def landed_on_origin(tmp_path: Path) -> tuple[Path, str]:
    """A worker's clone whose origin's main holds run r1's landing, pushed, the clone's own
    remote-tracking ref not updated (the process died right after the push); the clone and
    the run's base."""
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    worker = tmp_path / "worker"
    git(tmp_path, "init", "-q", "-b", "main", str(worker))
    (worker / "a.txt").write_text("a\n")
    git(worker, "add", "a.txt")
    git(worker, "commit", "-qm", "base")
    git(worker, "remote", "add", "origin", str(bare))
    git(worker, "push", "-q", "origin", "main")
    base = git(worker, "rev-parse", "main")
    landed = git(
        worker, "commit-tree", f"{base}^{{tree}}", "-p", base, "-m", f"t\n\n{RUN_TRAILER}: r1"
    )
    git(worker, "push", "-q", "origin", f"{landed}:refs/heads/main")
    return worker, base


def test_a_run_that_pushed_to_its_origin_before_dying_closes_merged(tmp_path: Path) -> None:
    """Its landing is on the origin (pushed, then the process died before the run closed):
    recovery fetches the origin's branch and finds it there; the clone's main is untouched."""
    worker, base = landed_on_origin(tmp_path)  # the refs/remotes are stale
    started = {"base_commit": base, "base_branch": "main", "origin": "origin"}
    ledger = running_ledger(tmp_path, [("run.started", started)])
    assert recover(worker, ledger) is RunStatus.MERGED
    assert "on origin" in (ledger.get_run("r1").reason or "")
    assert git(worker, "rev-parse", "main") == base


def test_an_unreachable_origin_is_a_warning_and_what_was_last_fetched_decides(
    tmp_path: Path,
) -> None:
    """The origin cannot be fetched at recovery: the run's landing, already seen by an
    earlier fetch, still closes it merged, and the failed fetch is said."""
    worker, base = landed_on_origin(tmp_path)
    git(worker, "fetch", "-q", "origin")  # seen here before the origin went away
    git(worker, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    started = {"base_commit": base, "base_branch": "main", "origin": "origin"}
    ledger = running_ledger(tmp_path, [("run.started", started)])
    said: list[str] = []
    assert recover(worker, ledger, said.append) is RunStatus.MERGED
    assert any("what was last fetched decides" in line for line in said), said
