"""Runs that share an origin: each starts from the origin's tip of its branch (never the
worker's own, possibly stale or diverged, branch) and lands there, by a leased push.

Real runs of the replay coder in real clones of a real bare repository; "another machine" is
another clone of the same origin that pushes meanwhile.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.fixed_run import run_fixed
from support.origins import commit_file, user_and_clones
from support.repo import Repo, git

from assay.core.vocab import RunStatus
from assay.engine.local.runner import RunReport


@pytest.fixture
def machines(tmp_path: Path) -> tuple[Repo, Path, Path]:
    return user_and_clones(tmp_path)


def push_unrelated(clone: Path, name: str = "NOTES.md") -> str:
    """Another machine lands a change of its own on the origin's main; its commit."""
    return commit_file(clone, name, f"{name} from another machine\n", push=True)


def run_on(worker: Path, made: Repo, *, land: str, check: str = "true") -> RunReport:
    return run_fixed(made, check, land=land, root=worker, origin="origin")


def race_check(other: Path, marker: Path, name: str, then: str) -> str:
    """A validator that, the first time it runs, has the other machine push ``name`` to the
    origin (the landing's first lease is then stale), and runs ``then`` every time after."""
    return (
        f"if [ ! -e {marker} ]; then touch {marker}; "
        f"cd {other} && echo x > {name} && git add {name} && git commit -qm {name} "
        f"&& git push -q origin main; exit 0; fi; {then}"
    )


def test_a_merge_starts_from_the_origins_tip_and_lands_there(
    machines: tuple[Repo, Path, Path],
) -> None:
    made, worker, other = machines
    theirs = push_unrelated(other)  # the origin moved after the worker cloned it
    # The worker's own main holds a commit no one validated or pushed: never the base.
    (worker / "LOCAL.md").write_text("local only\n")
    git(worker, "add", "LOCAL.md")
    git(worker, "commit", "-qm", "local only")
    local = git(worker, "rev-parse", "main")

    report = run_on(worker, made, land="merge")

    assert report.payload.status is RunStatus.MERGED, report.payload.reason
    landed = git(other, "ls-remote", "origin", "refs/heads/main").split()[0]
    assert git(worker, "rev-parse", f"{landed}^") == theirs  # on the origin's tip
    files = git(worker, "ls-tree", "-r", "--name-only", landed).split()
    assert "NOTES.md" in files and "LOCAL.md" not in files
    assert git(worker, "diff", "--name-only", theirs, landed).split() == ["src/slug.py"]
    assert git(worker, "rev-parse", "main") == local  # the worker's own branch is untouched


def test_a_push_that_lost_the_race_lands_on_the_new_tip_after_revalidating(
    machines: tuple[Repo, Path, Path],
) -> None:
    made, worker, other = machines
    # The validator itself is the race: its first run (on the candidate) lets the other
    # machine push, so the landing's first lease is stale; the combined tree is validated.
    race = race_check(other, worker.parent / "raced", "RACE.md", then="true")
    report = run_on(worker, made, land="merge", check=race)

    assert report.payload.status is RunStatus.MERGED, report.payload.reason
    landed = git(other, "ls-remote", "origin", "refs/heads/main").split()[0]
    raced = git(other, "rev-parse", "HEAD")
    assert git(worker, "rev-parse", f"{landed}^") == raced
    files = git(worker, "ls-tree", "-r", "--name-only", landed).split()
    assert "RACE.md" in files and "src/slug.py" in files


def test_a_merge_whose_combined_tree_fails_is_blocked_and_nothing_reaches_the_origin(
    machines: tuple[Repo, Path, Path],
) -> None:
    made, worker, other = machines
    # Passes on the candidate; once the other machine pushed BREAK.md, fails.
    race = race_check(other, worker.parent / "raced", "BREAK.md", then="test ! -e BREAK.md")
    report = run_on(worker, made, land="merge", check=race)

    assert report.payload.status is RunStatus.BLOCKED, report.payload.reason
    tip = git(other, "ls-remote", "origin", "refs/heads/main").split()[0]
    assert tip == git(other, "rev-parse", "HEAD")  # only the other machine's commit
    assert "pushed to origin" in report.payload.reason  # the branch is there to look at


def test_land_branch_pushes_the_branch_to_the_origin(machines: tuple[Repo, Path, Path]) -> None:
    made, worker, other = machines
    report = run_on(worker, made, land="branch")

    assert report.payload.status is RunStatus.READY, report.payload.reason
    heads = git(other, "ls-remote", "--heads", "origin")
    branch = report.payload.land.branch if report.payload.land else None
    assert branch and f"refs/heads/{branch}" in heads


def test_an_unreachable_origin_is_a_clear_error_without_credentials(
    machines: tuple[Repo, Path, Path],
) -> None:
    from assay.adapters.origin import OriginError

    made, worker, _ = machines
    git(worker, "remote", "set-url", "origin", "https://alice:s3cret@127.0.0.1:9/nope.git")
    with pytest.raises(OriginError) as raised:
        run_on(worker, made, land="merge")
    assert "s3cret" not in str(raised.value) and "fetching main from origin" in str(raised.value)
    shutil.rmtree(worker / ".assay", ignore_errors=True)


def refuse_pushes(machines_root: Path) -> None:
    """The origin's hook refuses every push (fetches still work): a failure, not a race."""
    hook = machines_root / "origin.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no pushes today' >&2\nexit 1\n")
    hook.chmod(0o755)


def test_a_push_the_origin_refuses_goes_to_a_human_naming_its_words(
    machines: tuple[Repo, Path, Path],
) -> None:
    made, worker, other = machines
    before = git(other, "ls-remote", "origin", "refs/heads/main").split()[0]
    refuse_pushes(worker.parent)
    report = run_on(worker, made, land="merge")

    # The remote's word (a hook, a protected branch): trying again would meet it again.
    assert report.payload.status is RunStatus.BLOCKED, report.payload.reason
    assert "the validators passed; the push to origin was refused" in report.payload.reason
    assert "not merged: pushing to main on origin failed" in report.payload.reason
    assert "no pushes today" in report.payload.reason
    assert git(other, "ls-remote", "origin", "refs/heads/main").split()[0] == before


def test_a_push_that_fails_on_the_network_is_a_machine_fault_and_refunds_the_attempt(
    machines: tuple[Repo, Path, Path],
) -> None:
    made, worker, other = machines
    before = git(other, "ls-remote", "origin", "refs/heads/main").split()[0]
    # Fetches reach the origin; the push, by its own URL, finds nothing listening.
    git(worker, "config", "remote.origin.pushurl", "http://127.0.0.1:9/origin.git")
    report = run_on(worker, made, land="merge")

    assert report.payload.status is RunStatus.FAILED, report.payload.reason
    assert "the landing failed on a machine fault" in report.payload.reason
    assert "not merged: pushing to main on origin failed" in report.payload.reason
    assert report.task.attempts == 0, report.task
    assert git(other, "ls-remote", "origin", "refs/heads/main").split()[0] == before


def test_a_branch_left_where_it_cannot_be_pushed_says_it_is_here_only(
    machines: tuple[Repo, Path, Path],
) -> None:
    made, worker, _ = machines
    refuse_pushes(worker.parent)
    report = run_on(worker, made, land="branch")

    assert report.payload.status is RunStatus.READY, report.payload.reason
    assert "(here only: pushing" in report.payload.reason
    assert any("no pushes today" in line for line in report.warnings), report.warnings
