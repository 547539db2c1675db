"""The shared repository's git side: which remote, a leased push that loses to another
machine, a landing idempotent by its run's trailer. Real clones of a real bare repository."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.origins import bare_and_clones, commit_file, squash_message
from support.repo import git

from assay.adapters import origin
from assay.adapters.landing import LandBlocked


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    return bare_and_clones(tmp_path)


def test_resolve_names_the_remote_or_refuses_one_the_clone_lacks(
    clones: tuple[Path, Path, Path],
) -> None:
    _, here, _ = clones
    assert origin.resolve(here, "auto") == "origin"
    assert origin.resolve(here, "none") is None and origin.resolve(here, None) is None
    with pytest.raises(origin.OriginError, match="no remote named 'upstream'"):
        origin.resolve(here, "upstream")
    git(here, "remote", "remove", "origin")
    assert origin.resolve(here, "auto") is None


def test_a_stale_lease_moves_nothing_and_says_so(clones: tuple[Path, Path, Path]) -> None:
    bare, here, there = clones
    base = origin.fetch_branch(here, "origin", "main")
    theirs = commit_file(there, "t.txt", "t\n", push=True)
    mine = commit_file(here, "m.txt", "m\n")
    assert origin.push_commit(here, "origin", mine, "main", expected=base) is False
    assert git(bare, "rev-parse", "main") == theirs
    assert origin.push_commit(here, "origin", mine, "main", expected=theirs) is True
    assert git(bare, "rev-parse", "main") == mine  # the lease is the compare, not ancestry
    assert git(here, "rev-parse", "refs/remotes/origin/main") == mine


def test_push_squash_lands_once_on_the_moved_tip_after_revalidating(
    clones: tuple[Path, Path, Path],
) -> None:
    bare, here, there = clones
    base = origin.fetch_branch(here, "origin", "main")
    git(here, "checkout", "-q", "-b", "cand")
    commit_file(here, "b.txt", "b\n")
    theirs = commit_file(there, "t.txt", "t\n", push=True)
    checked: list[str] = []

    def revalidate(combined: str, tip: str) -> str | None:
        checked.append(tip)
        return None

    landed = origin.push_squash(
        here, remote="origin", branch="cand", into_branch="main", base_commit=base,
        message=squash_message(), revalidate=revalidate,
    )  # fmt: skip
    assert checked == [theirs] and git(bare, "rev-parse", "main") == landed
    assert git(here, "rev-parse", f"{landed}^") == theirs
    # Idempotent: the same run lands nothing twice (a recovered run asks again).
    again = origin.push_squash(
        here, remote="origin", branch="cand", into_branch="main", base_commit=base,
        message=squash_message(), revalidate=revalidate,
    )  # fmt: skip
    assert again == landed and git(bare, "rev-list", "--count", "main") == "3"


def test_push_squash_blocks_on_a_conflict_with_what_another_machine_landed(
    clones: tuple[Path, Path, Path],
) -> None:
    bare, here, there = clones
    base = origin.fetch_branch(here, "origin", "main")
    git(here, "checkout", "-q", "-b", "cand")
    tree = commit_file(here, "a.txt", "mine\n")
    theirs = commit_file(there, "a.txt", "theirs\n", push=True)
    with pytest.raises(LandBlocked, match=r"conflicts in a\.txt"):
        origin.push_squash(
            here, remote="origin", branch="cand", into_branch="main", base_commit=base,
            message=squash_message(), validated={git(here, "rev-parse", f"{tree}^{{tree}}")},
        )  # fmt: skip
    assert git(bare, "rev-parse", "main") == theirs


def test_a_failure_that_is_not_a_race_is_an_error_naming_no_credential(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    commit_file(repo, "a.txt", "a\n")
    git(repo, "remote", "add", "origin", "https://bob:hunter2@127.0.0.1:9/x.git")
    with pytest.raises(origin.OriginError) as raised:
        origin.fetch_branch(repo, "origin", "main")
    with pytest.raises(origin.OriginError) as pushed:
        origin.push_branch(repo, "origin", "main")
    for failure in (raised.value, pushed.value):
        assert "hunter2" not in str(failure) and "bob" not in str(failure)


def test_a_remote_that_never_answers_is_given_up_and_its_helper_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timeout kills git's whole group: the ssh program it started does not live on."""
    import os
    import time

    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    pidfile, ssh = tmp_path / "ssh.pid", tmp_path / "ssh"
    ssh.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 40\n")
    ssh.chmod(0o755)
    git(repo, "config", "core.sshCommand", str(ssh))
    git(repo, "remote", "add", "origin", "ssh://git@example.invalid/x.git")
    monkeypatch.setattr(origin, "NETWORK_TIMEOUT_SECONDS", 1.0)
    began = time.monotonic()
    with pytest.raises(origin.OriginError, match="gave no answer in 1 s"):
        origin.fetch_branch(repo, "origin", "main")
    assert time.monotonic() - began < 20  # not held open by the helper's pipe until it ends
    pid = int(pidfile.read_text())
    for _ in range(50):  # gone, or a zombie no one reaped yet: not running either way
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        pytest.fail(f"the ssh helper {pid} outlived the timeout")
