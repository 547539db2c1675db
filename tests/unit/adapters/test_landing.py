"""Landing on the base branch against real repositories: one squashed commit, moved by
compare-and-swap, revalidated on a moved base, found again by its trailer."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.repo import dirty
from support.repo import git as sh

from assay.adapters import git, landing
from assay.adapters.landing import LandBlocked, LandRefused, SquashMessage

pytestmark = pytest.mark.usefixtures("isolated_git")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    write(root / "keep.txt", "keep\n")
    write(root / "edit.txt", "one\ntwo\n")
    sh(root, "add", "-A")
    sh(root, "commit", "-q", "-m", "base")
    git.ensure_excluded(root)
    return root


def candidate(repo: Path, *attempts: dict[str, str], run: str = "r1") -> str:
    """A seat branch with one checkpoint commit per attempt, as the engine leaves it."""
    path = git.seat_worktree(repo / ".assay", run, "seat-1")
    branch = git.seat_branch(run, "seat-1")
    git.add_worktree(repo, path, sh(repo, "rev-parse", "main"), branch)
    for number, files in enumerate(attempts, start=1):
        for name, text in files.items():
            write(path / name, text)
        sh(path, "add", "-A")
        sh(path, "commit", "-q", "-m", f"assay: attempt {number}, seat 1")
    return branch


def message(
    run: str = "r1", task: str = "Add the feature\n\nin detail", **kw: int
) -> SquashMessage:
    return SquashMessage(
        task=task,
        task_id="t1",
        run_id=run,
        attempts=kw.get("attempts", 2),
        blocked=kw.get("blocked", 1),
        coder="replay",
        seat=1,
        validators=["tests: pass"],
    )


def land(repo: Path, branch: str, run: str = "r1", base: str | None = None, **kw: object) -> str:
    return landing.land_squash(
        repo,
        branch=branch,
        into_branch="main",
        base_commit=base or sh(repo, "rev-parse", "main"),
        message=message(run),
        **kw,  # type: ignore[arg-type]
    )


def snapshot(root: Path) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".assay")]
        for name in filenames:
            full = Path(dirpath) / name
            found[str(full.relative_to(root))] = full.read_bytes()
    return found


def test_one_squashed_commit_with_the_candidates_tree_and_trailers(repo: Path) -> None:
    branch = candidate(repo, {"feature.txt": "wrong\n"}, {"feature.txt": "right\n"})
    old = sh(repo, "rev-parse", "main")
    commit = land(repo, branch)
    assert sh(repo, "rev-parse", "main") == commit
    assert sh(repo, "rev-list", "--count", f"{old}..main") == "1"
    assert sh(repo, "rev-parse", f"{commit}^@") == old  # one parent: the old tip
    assert sh(repo, "rev-parse", f"{commit}^{{tree}}") == sh(
        repo, "rev-parse", f"{branch}^{{tree}}"
    )
    for checkpoint in sh(repo, "rev-list", f"{old}..{branch}").split():
        done = subprocess.run(
            ["git", "-C", str(repo), "merge-base", "--is-ancestor", checkpoint, "main"],
            check=False,
        )
        assert done.returncode == 1  # the attempts' commits stay on the seat branch
    assert sh(repo, "log", "-1", "--format=%s", commit) == "Add the feature"
    trailers = sh(repo, "log", "-1", "--format=%(trailers:only,unfold)", commit)
    assert trailers.splitlines() == [
        "Assay-Task: t1",
        "Assay-Run: r1",
        "Assay-Attempts: 2 (1 blocked)",
        "Assay-Coder: replay (seat 1)",
    ]
    assert (repo / "feature.txt").read_text() == "right\n"  # the checkout was brought along
    assert not dirty(repo)


def test_the_author_is_the_repositorys_identity(repo: Path) -> None:
    sh(repo, "config", "user.name", "Ada Lovelace")
    sh(repo, "config", "user.email", "ada@example.org")
    commit = land(repo, candidate(repo, {"feature.txt": "f\n"}))
    assert sh(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", commit) == (
        "Ada Lovelace <ada@example.org>|Ada Lovelace <ada@example.org>"
    )


def test_the_author_may_come_from_the_operator_s_global_config(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """assay's own git reads no global config, but the operator's identity is theirs."""
    config = tmp_path / "operator.gitconfig"
    config.write_text("[user]\n\tname = Grace Hopper\n\temail = grace@example.org\n")
    branch = candidate(repo, {"feature.txt": "f\n"})
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    commit = land(repo, branch)
    assert sh(repo, "log", "-1", "--format=%an <%ae>", commit) == "Grace Hopper <grace@example.org>"


def test_each_part_of_the_identity_comes_from_where_git_finds_it(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repository's name over the operator's, the operator's email where the repository
    sets none; a key set twice gives its last value, as ``git config --get`` does."""
    config = tmp_path / "operator.gitconfig"
    config.write_text("[user]\n\tname = Grace Hopper\n\temail = grace@example.org\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    sh(repo, "config", "--add", "user.name", "First Name")
    sh(repo, "config", "--add", "user.name", "Ada Lovelace")
    assert landing.identity(repo) == ("Ada Lovelace", "grace@example.org")


def test_assay_is_the_author_only_where_none_is_configured(repo: Path) -> None:
    commit = land(repo, candidate(repo, {"feature.txt": "f\n"}))
    assert sh(repo, "log", "-1", "--format=%an <%ae>", commit) == "assay <assay@localhost>"


def test_landing_twice_finds_the_first_commit_by_its_trailer(repo: Path) -> None:
    branch = candidate(repo, {"feature.txt": "f\n"})
    base = sh(repo, "rev-parse", "main")
    first = land(repo, branch, base=base)
    assert land(repo, branch, base=base) == first
    assert sh(repo, "rev-list", "--count", f"{base}..main") == "1"
    assert landing.landed_commit(repo, "main", "r1", since=base) == first
    assert landing.landed_commit(repo, "main", "r2", since=base) is None


class Died(BaseException):
    """The lander's process ended here (kill -9): nothing after it ran."""


def _dies(*args: object) -> None:
    raise Died


def test_a_landing_that_died_after_its_ref_moved_brings_the_checkout_when_run_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    branch = candidate(repo, {"feature.txt": "feature\n", "edit.txt": "one\nthree\n"})
    base = sh(repo, "rev-parse", "main")
    with monkeypatch.context() as patched:
        patched.setattr(landing, "_bring_checkout", _dies)
        with pytest.raises(Died):
            land(repo, branch, base=base)
    landed = sh(repo, "rev-parse", "main")
    assert landed != base and dirty(repo)  # the ref moved; the files show the change undone
    assert land(repo, branch, base=base) == landed  # resumed: the same commit, found
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert (repo / "edit.txt").read_text() == "one\nthree\n"
    assert not dirty(repo) and sh(repo, "rev-parse", "main") == landed
    assert land(repo, branch, base=base) == landed and not dirty(repo)  # and again: a no-op


def test_a_died_landing_whose_checkout_was_edited_since_is_swapped_back_not_forced(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    branch = candidate(repo, {"edit.txt": "one\nthree\n"})
    base = sh(repo, "rev-parse", "main")
    with monkeypatch.context() as patched:
        patched.setattr(landing, "_bring_checkout", _dies)
        with pytest.raises(Died):
            land(repo, branch, base=base)
    write(repo / "edit.txt", "the user's edit made after the crash\n")
    with pytest.raises(LandRefused):
        land(repo, branch, base=base)
    assert sh(repo, "rev-parse", "main") == base  # the branch agrees with its files again
    assert (repo / "edit.txt").read_text() == "the user's edit made after the crash\n"


def _died_landing(
    repo: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]
) -> tuple[str, str]:
    """(its branch, its base): a landing that died after its ref moved."""
    branch = candidate(repo, files)
    base = sh(repo, "rev-parse", "main")
    with monkeypatch.context() as patched:
        patched.setattr(landing, "_bring_checkout", _dies)
        with pytest.raises(Died):
            land(repo, branch, base=base)
    return branch, base


def test_a_died_landing_is_brought_though_the_user_staged_other_work_since(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user ``git add``-ed an unrelated file after the crash: the index is no longer the
    commit before, yet the landing's paths still are; the checkout is brought, their staged
    work kept, and no next ``commit`` undoes the landing."""
    branch, base = _died_landing(repo, monkeypatch, {"feature.txt": "feature\n"})
    landed = sh(repo, "rev-parse", "main")
    write(repo / "keep.txt", "the user's staged work\n")
    sh(repo, "add", "keep.txt")
    assert land(repo, branch, base=base) == landed
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert sh(repo, "status", "--porcelain") == "M  keep.txt"  # staged, and nothing else


def test_a_died_landing_whose_path_the_user_staged_since_is_swapped_back(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    branch, base = _died_landing(repo, monkeypatch, {"edit.txt": "one\nthree\n"})
    write(repo / "edit.txt", "the user's staged edit\n")
    sh(repo, "add", "edit.txt")
    with pytest.raises(LandRefused):
        land(repo, branch, base=base)
    assert sh(repo, "rev-parse", "main") == base
    assert sh(repo, "show", ":edit.txt") == "the user's staged edit"


@pytest.mark.parametrize(
    ("adds", "users", "named"),
    [
        ("local.env", "local.env", "local.env"),  # an ignored file where a file comes
        ("build", "build/out.bin", "build"),  # an ignored folder where a file comes
        ("feature.txt", "feature.txt", None),  # an untracked file where a file comes
    ],
)
def test_a_died_landing_with_a_file_now_in_the_way_is_swapped_back_and_the_file_kept(
    repo: Path, monkeypatch: pytest.MonkeyPatch, adds: str, users: str, named: str | None
) -> None:
    """``read-tree -u`` overwrites or deletes ignored files: finishing a landing checks what
    is in the way as the landing itself does."""
    branch, base = _died_landing(repo, monkeypatch, {adds: "change\n"})
    if named is not None:
        with (repo / ".git" / "info" / "exclude").open("a") as exclude:
            exclude.write(f"/{named}\n")
    write(repo / users, "the user's own file\n")
    with pytest.raises(LandRefused):
        land(repo, branch, base=base)
    assert (repo / users).read_text() == "the user's own file\n"
    assert sh(repo, "rev-parse", "main") == base


def test_a_died_landing_is_brought_in_a_linked_worktree(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sh(repo, "checkout", "-q", "-b", "elsewhere")
    linked = tmp_path / "linked"
    sh(repo, "worktree", "add", "-q", str(linked), "main")
    branch, base = _died_landing(repo, monkeypatch, {"feature.txt": "feature\n"})
    landed = sh(repo, "rev-parse", "main")
    assert land(repo, branch, base=base) == landed
    assert (linked / "feature.txt").read_text() == "feature\n" and not dirty(linked)


def test_a_branch_that_is_not_checked_out_only_moves_its_ref(repo: Path) -> None:
    branch = candidate(repo, {"feature.txt": "feature\n"})
    sh(repo, "checkout", "-q", "-b", "elsewhere")
    write(repo / "keep.txt", "the user's dirty edit\n")
    before = snapshot(repo)
    commit = land(repo, branch)
    assert sh(repo, "rev-parse", "main") == commit
    assert sh(repo, "show", "main:feature.txt") == "feature"
    assert snapshot(repo) == before
    assert git.current_branch(repo) == "elsewhere"


def test_a_dirty_checkout_is_never_touched(repo: Path) -> None:
    branch = candidate(repo, {"feature.txt": "feature\n"})
    write(repo / "edit.txt", "the user's unsaved work\n")
    before, old = snapshot(repo), sh(repo, "rev-parse", "main")
    index = (repo / ".git" / "index").read_bytes()
    with pytest.raises(LandRefused) as info:
        land(repo, branch)
    assert not isinstance(info.value, LandBlocked)
    assert info.value.paths == ("edit.txt",)
    # The dirty file is named as the checkout's, never as if it were the change.
    assert str(info.value) == f"main is checked out at {repo} with uncommitted changes to edit.txt"
    assert snapshot(repo) == before and (repo / ".git" / "index").read_bytes() == index
    assert sh(repo, "rev-parse", "main") == old


@pytest.mark.parametrize("how", ["touched", "copied"])
def test_a_checkout_whose_index_is_only_stale_is_landed_on(
    repo: Path, tmp_path: Path, how: str
) -> None:
    """Files unchanged but with new stat data (touched by a build, copied with ``cp -r`` or
    restored from a backup) are clean, as ``git status`` says: the landing goes ahead."""
    if how == "copied":
        copy = tmp_path / "copy"
        subprocess.run(["cp", "-r", str(repo), str(copy)], check=True)
        repo = copy
    else:
        os.utime(repo / "edit.txt", (1_000_000_000, 1_000_000_000))
    branch = candidate(repo, {"edit.txt": "one\ntwo\nthree\n"})
    commit = land(repo, branch)
    assert sh(repo, "rev-parse", "main") == commit
    assert (repo / "edit.txt").read_text() == "one\ntwo\nthree\n"
    assert not dirty(repo)


@pytest.mark.parametrize("setting", ["core.trustctime=false", "core.checkStat=minimal"])
def test_an_edit_that_keeps_the_size_and_mtime_is_never_overwritten(
    repo: Path, setting: str
) -> None:
    """The repository's own config may tell git to trust less of the stat data; an in-place
    edit that keeps the size and the mtime (restored by a tool) is then seen only by its
    ctime, which assay's git always compares."""
    key, value = setting.split("=")
    sh(repo, "config", key, value)
    branch = candidate(repo, {"edit.txt": "one\ntwo\nthree\n"})
    kept = os.stat(repo / "edit.txt")
    os.utime(repo / ".git" / "index", (kept.st_atime + 5, kept.st_mtime + 5))  # not racy
    # A git built without nanoseconds sees whole seconds only: the edit comes a second after
    # the commit, by the file system's clock, which may lag the wall clock by a tick or two.
    while time.time() < int(kept.st_ctime) + 1.05:
        time.sleep(0.05)
    with (repo / "edit.txt").open("r+") as file:  # in place: same inode, same size
        file.write("ONE\nTWO\n")
    os.utime(repo / "edit.txt", ns=(kept.st_atime_ns, kept.st_mtime_ns))
    with pytest.raises(LandRefused):
        land(repo, branch)
    assert (repo / "edit.txt").read_text() == "ONE\nTWO\n"


@pytest.mark.parametrize("how", ["rebase", "bisect"])
def test_a_branch_the_user_is_rebasing_or_bisecting_is_not_moved(repo: Path, how: str) -> None:
    """Mid-rebase (or bisect) the checkout's HEAD is detached, yet the branch is the user's
    work in progress, as git's own ``branch -f`` knows: a landing then would make the rebase
    fail at its end ("cannot lock ref") and leave its commits on a detached HEAD."""
    write(repo / "keep.txt", "a second commit\n")
    sh(repo, "commit", "-q", "-am", "second")
    branch = candidate(repo, {"feature.txt": "feature\n"})
    old = sh(repo, "rev-parse", "main")
    if how == "rebase":
        with pytest.raises(subprocess.CalledProcessError):  # stops after its first commit
            sh(repo, "rebase", "--exec", "false", "HEAD~1")
    else:
        sh(repo, "bisect", "start", "main", "main~1")
    with pytest.raises(LandRefused) as info:
        land(repo, branch)
    doing = {"rebase": "rebased", "bisect": "bisected"}[how]
    assert str(info.value) == f"main is being {doing} in {repo}"
    assert sh(repo, "rev-parse", "main") == old
    if how == "rebase":
        sh(repo, "rebase", "--continue")  # the user's rebase still ends as they meant
        assert sh(repo, "symbolic-ref", "--short", "HEAD") == "main"


def test_a_checkout_whose_index_git_is_writing_is_not_touched(repo: Path) -> None:
    """The user's own git holds the index (a ``git commit`` in progress): the landing is
    refused before the branch moves, so that commit never finds its branch moved under it."""
    branch = candidate(repo, {"feature.txt": "feature\n"})
    (repo / ".git" / "index.lock").write_bytes(b"")
    moves, old = sh(repo, "reflog", "show", "main"), sh(repo, "rev-parse", "main")
    with pytest.raises(LandRefused) as info:
        land(repo, branch)
    assert str(info.value) == f"git is at work in {repo} (its index is locked)"
    assert sh(repo, "reflog", "show", "main") == moves and sh(repo, "rev-parse", "main") == old
    assert not (repo / "feature.txt").exists()


def test_an_untracked_file_in_the_way_refuses_and_an_unrelated_one_does_not(repo: Path) -> None:
    branch = candidate(repo, {"feature.txt": "feature\n"})
    write(repo / "feature.txt", "the user's own untracked file\n")
    old = sh(repo, "rev-parse", "main")
    with pytest.raises(LandRefused) as info:
        land(repo, branch)
    assert info.value.paths == ("feature.txt",)
    assert str(info.value) == f"untracked files in {repo} would be overwritten: feature.txt"
    assert sh(repo, "rev-parse", "main") == old
    (repo / "feature.txt").rename(repo / "scratch.txt")
    land(repo, branch)
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert (repo / "scratch.txt").read_text() == "the user's own untracked file\n"


@pytest.mark.parametrize(
    ("adds", "users", "named"),
    [
        ("local.env", "local.env", "local.env"),  # an ignored file where a file comes
        ("build", "build/out.bin", "build"),  # an ignored folder where a file comes
        ("cache/index", "cache", "cache"),  # an ignored file where a folder comes
    ],
)
def test_an_ignored_file_in_the_way_refuses_and_is_kept(
    repo: Path, adds: str, users: str, named: str
) -> None:
    """git counts ignored files as expendable and would overwrite or delete them; they are
    the user's (a local config, a build), so a landing that would is refused."""
    branch = candidate(repo, {adds: "from the change\n"})
    with (repo / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write(f"/{named}\n")
    write(repo / users, "the user's ignored file\n")
    before, old = snapshot(repo), sh(repo, "rev-parse", "main")
    with pytest.raises(LandRefused) as info:
        land(repo, branch)
    assert info.value.paths == (named,)
    assert snapshot(repo) == before and sh(repo, "rev-parse", "main") == old


@pytest.mark.parametrize("checked_out", [True, False])
@pytest.mark.parametrize("name", [".assay/assay.db-journal", ".ASSAY/assay.db"])
def test_nothing_lands_in_assays_own_folder(repo: Path, checked_out: bool, name: str) -> None:
    """A candidate that carries a file under ``.assay/`` (forced past the exclude) is refused
    before the base branch moves, whether or not it is checked out: the checkout's ``.assay/``
    never receives it, now or at the user's next checkout of main."""
    branch = candidate(repo, {"feature.txt": "feature\n"})
    seat = git.seat_worktree(repo / ".assay", "r1", "seat-1")
    write(seat / name, "a forged journal\n")
    sh(seat, "add", "-f", name)
    sh(seat, "commit", "-q", "-m", "assay: attempt 2, seat 1")
    if not checked_out:
        sh(repo, "checkout", "-q", "-b", "elsewhere")
    old = sh(repo, "rev-parse", "main")
    with pytest.raises(LandRefused) as info:
        land(repo, branch)
    assert not isinstance(info.value, LandBlocked)
    assert info.value.paths == (name,) and "assay's own folder" in info.value.reason
    assert sh(repo, "rev-parse", "main") == old
    assert not (repo / name).exists()


def test_a_moved_base_is_combined_and_revalidated_before_the_ref_moves(repo: Path) -> None:
    base = sh(repo, "rev-parse", "main")
    branch = candidate(repo, {"feature.txt": "feature\n"})
    write(repo / "keep.txt", "main moved\n")
    sh(repo, "commit", "-q", "-am", "main moved on")
    tip = sh(repo, "rev-parse", "main")
    seen: list[tuple[str, str]] = []

    def revalidate(combined: str, parent: str) -> str | None:
        seen.append((combined, parent))
        assert sh(repo, "rev-parse", "main") == tip  # nothing moved before the verdict
        return None

    commit = land(repo, branch, base=base, revalidate=revalidate)
    assert seen == [(commit, tip)]
    assert sh(repo, "rev-parse", f"{commit}^@") == tip
    assert (repo / "keep.txt").read_text() == "main moved\n"
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert not dirty(repo)


def test_validators_that_block_the_combined_tree_block_the_landing(repo: Path) -> None:
    base = sh(repo, "rev-parse", "main")
    branch = candidate(repo, {"feature.txt": "feature\n"})
    write(repo / "keep.txt", "main moved\n")
    sh(repo, "commit", "-q", "-am", "main moved on")
    tip = sh(repo, "rev-parse", "main")
    with pytest.raises(LandBlocked) as info:
        land(
            repo, branch, base=base, revalidate=lambda c, p: "the validators block: tests: 1 failed"
        )
    assert str(info.value) == (
        f"the base branch moved to {tip[:12]}; "
        "combined with it the validators block: tests: 1 failed"
    )
    assert sh(repo, "rev-parse", "main") == tip and not dirty(repo)


def test_a_checkout_edited_while_the_combined_tree_is_validated_is_not_touched(
    repo: Path,
) -> None:
    base = sh(repo, "rev-parse", "main")
    branch = candidate(repo, {"feature.txt": "feature\n"})
    write(repo / "keep.txt", "main moved\n")
    sh(repo, "commit", "-q", "-am", "main moved on")
    tip = sh(repo, "rev-parse", "main")

    def user_edits(combined: str, parent: str) -> None:
        write(repo / "edit.txt", "typed meanwhile\n")

    with pytest.raises(LandRefused, match="uncommitted changes"):
        land(repo, branch, base=base, revalidate=user_edits)
    assert sh(repo, "rev-parse", "main") == tip
    assert (repo / "edit.txt").read_text() == "typed meanwhile\n"
    assert not (repo / "feature.txt").exists()


@pytest.mark.parametrize("checked_out", [True, False])
def test_a_conflict_on_the_moved_base_blocks_and_nothing_changes(
    repo: Path, checked_out: bool
) -> None:
    base = sh(repo, "rev-parse", "main")
    branch = candidate(repo, {"edit.txt": "seat version\n", "feature.txt": "f\n"})
    write(repo / "edit.txt", "main version\n")
    sh(repo, "commit", "-q", "-am", "main moved on")
    if not checked_out:
        sh(repo, "checkout", "-q", "-b", "elsewhere")
    before, tip = snapshot(repo), sh(repo, "rev-parse", "main")
    with pytest.raises(LandBlocked) as info:
        land(repo, branch, base=base, revalidate=lambda c, p: pytest.fail("no revalidation"))
    assert str(info.value) == (
        f"the base branch moved to {tip[:12]}; combined with it the change conflicts in edit.txt"
    )
    assert sh(repo, "rev-parse", "main") == tip
    assert snapshot(repo) == before and not dirty(repo)


def test_a_lost_compare_and_swap_recomputes_on_the_new_tip(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = sh(repo, "rev-parse", "main")
    branch = candidate(repo, {"feature.txt": "feature\n"})
    sh(repo, "checkout", "-q", "-b", "elsewhere")
    real_run = landing._run
    raced: list[str] = []

    def racing_run(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> object:
        if args[:1] == ("update-ref",) and not raced:  # someone lands just before we do
            write(repo / "other.txt", "theirs\n")
            sh(repo, "add", "other.txt")
            sh(repo, "commit", "-q", "-m", "theirs")
            sh(repo, "branch", "-f", "main", "elsewhere")
            raced.append(sh(repo, "rev-parse", "main"))
        return real_run(cwd, *args, ok=ok)

    monkeypatch.setattr(landing, "_run", racing_run)
    revalidated: list[str] = []
    commit = land(repo, branch, base=base, revalidate=lambda c, p: revalidated.append(p))
    assert sh(repo, "rev-parse", f"{commit}^@") == raced[0]  # theirs is kept, not overwritten
    assert revalidated == raced  # the new combination was validated before it landed
    assert sh(repo, "show", "main:other.txt") == "theirs"
    assert sh(repo, "show", "main:feature.txt") == "feature"


def test_a_branch_that_never_stops_moving_is_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    branch = candidate(repo, {"feature.txt": "feature\n"})
    real_run = landing._run

    def losing_run(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> object:
        if args[:1] == ("update-ref",):
            return subprocess.CompletedProcess(args, 1, b"", b"")
        return real_run(cwd, *args, ok=ok)

    monkeypatch.setattr(landing, "_run", losing_run)
    old = sh(repo, "rev-parse", "main")
    with pytest.raises(LandRefused, match="kept moving"):
        land(repo, branch)
    assert sh(repo, "rev-parse", "main") == old and not dirty(repo)


@pytest.mark.parametrize("checked_out", [True, False])
def test_concurrent_landers_never_lose_a_commit(repo: Path, checked_out: bool) -> None:
    base = sh(repo, "rev-parse", "main")
    runs = [f"r{n}" for n in range(4)]
    branches = {run: candidate(repo, {f"{run}.txt": f"{run}\n"}, run=run) for run in runs}
    if not checked_out:
        sh(repo, "checkout", "-q", "-b", "elsewhere")
    start = threading.Barrier(len(runs))
    landed: dict[str, str] = {}
    refused: dict[str, LandRefused] = {}

    def lander(run: str) -> None:
        start.wait()
        try:
            landed[run] = land(
                repo, branches[run], run=run, base=base, revalidate=lambda c, p: None, tries=10
            )
        except LandRefused as exc:
            refused[run] = exc

    threads = [threading.Thread(target=lander, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if not checked_out:
        assert refused == {}
    # Landers updating one checkout at once may find it mid-update (its index locked, or not
    # yet matching the moved branch): such a lander is refused and lands nothing; every other
    # one is on main, none overwritten. (assay's own landers also take a lock, see engine.merge)
    said = ("git refused to update", "with uncommitted changes", "its index is locked")
    assert all(any(s in str(exc) for s in said) for exc in refused.values()), refused
    assert landed and set(landed) | set(refused) == set(runs)
    assert sh(repo, "rev-list", "--count", f"{base}..main") == str(len(landed))
    for run in runs:
        on_main = landing.landed_commit(repo, "main", run, since=base)
        assert on_main == landed.get(run)
        if run in landed:
            assert sh(repo, "show", f"main:{run}.txt") == run
    if checked_out and not refused:
        assert not dirty(repo)  # the user's checkout holds what main holds


@settings(max_examples=25, deadline=None)
@given(task=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1))
def test_git_reads_the_trailers_back_whatever_the_task_says(task: str) -> None:
    text = message(task=task + "\nAssay-Run: forged").text()
    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"],
        input=text.encode(),
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert parsed.splitlines() == [
        "Assay-Task: t1",
        "Assay-Run: r1",
        "Assay-Attempts: 2 (1 blocked)",
        "Assay-Coder: replay (seat 1)",
    ]
    title = text.splitlines()[0]
    assert len(title) <= landing.TITLE_LIMIT and "\n" not in title


def test_a_refusal_names_at_most_five_paths() -> None:
    assert landing.named(["a", "b"]) == "a, b"
    assert landing.named([f"f{n}" for n in range(7)]) == "f0, f1, f2, f3, f4 and 2 more"
