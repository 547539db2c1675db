"""The git adapter against real temporary repositories (no global or system git config)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.repo import git as sh
from support.seat_repo import candidate_change

from assay.adapters import git
from assay.core.changes import FileDelta
from assay.core.vocab import FileChangeKind

pytestmark = pytest.mark.usefixtures("isolated_git")


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    write(root / "keep.txt", "keep\n")
    write(root / "edit.txt", "one\ntwo\n")
    write(root / "gone.txt", "bye\n")
    write(root / "old_name.txt", "a stable body\nthat is long enough\nto rename\n")
    write(root / "run.sh", "#!/bin/sh\necho hi\n")
    write(root / "image.bin", b"\x00\x01\x02binary")
    write(root / ".gitignore", "*.log\nbuild/\n")
    sh(root, "add", "-A")
    sh(root, "commit", "-q", "-m", "base")
    git.ensure_excluded(root)
    return root


def seat(repo: Path, run: str = "r1", number: int = 1) -> tuple[Path, str]:
    path = git.seat_worktree(repo / ".assay", run, number)
    branch = git.seat_branch(run, number)
    git.add_worktree(repo, path, git.head_commit(repo), branch)
    return path, branch


def by_path(files: list[FileDelta]) -> dict[tuple[str, FileChangeKind], FileDelta]:
    return {(f.path, f.kind): f for f in files}


# --- the repository --------------------------------------------------------------------------


def test_repository_queries(repo: Path) -> None:
    (repo / "sub").mkdir()
    assert git.repo_root(repo / "sub").resolve() == repo.resolve()
    head = git.head_commit(repo)
    assert len(head) == 40 and head == sh(repo, "rev-parse", "HEAD")
    assert git.current_branch(repo) == "main"
    sh(repo, "checkout", "-q", "--detach")
    assert git.current_branch(repo) is None


def test_errors_name_the_command_and_the_reason(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(git.GitError) as info:
        git.repo_root(plain)
    assert "git rev-parse --show-toplevel" in str(info.value)
    assert "not a git repository" in str(info.value)
    sh(plain, "init", "-q")
    with pytest.raises(git.GitError, match="no commits yet"):
        git.head_commit(plain)


def test_ensure_excluded_is_idempotent_and_shared_with_worktrees(repo: Path) -> None:
    exclude = repo / ".git" / "info" / "exclude"
    assert not git.ensure_excluded(repo)  # the fixture added it already
    assert exclude.read_text().splitlines().count(".assay/") == 1
    path, _ = seat(repo)
    assert not git.ensure_excluded(path)
    assert git.ensure_excluded(path, "scratch/")
    assert not git.ensure_excluded(repo, "scratch/")
    lines = exclude.read_text().splitlines()
    assert lines.count(".assay/") == 1 and lines.count("scratch/") == 1
    assert not (path / ".git").is_dir()  # a linked worktree has a .git file, not a directory


def test_ensure_excluded_appends_after_a_missing_newline(repo: Path) -> None:
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_text("*.tmp")
    assert git.ensure_excluded(repo)
    assert exclude.read_text() == "*.tmp\n.assay/\n"


# --- worktrees -------------------------------------------------------------------------------


def test_worktree_add_and_remove(repo: Path) -> None:
    path, branch = seat(repo, "run-7", 2)
    assert path == repo / ".assay" / "worktrees" / "run-7" / "2"
    assert branch == "assay/run-7/2"
    assert (path / "keep.txt").read_text() == "keep\n"
    assert git.current_branch(path) == branch
    assert sh(repo, "status", "--porcelain") == ""  # the worktree under .assay/ is excluded
    write(path / "keep.txt", "uncommitted work\n")
    git.remove_worktree(repo, path, branch)
    assert not path.exists()
    assert branch not in sh(repo, "branch", "--list")
    assert str(path) not in sh(repo, "worktree", "list")
    git.remove_worktree(repo, path, branch)  # already gone: no error


def test_remove_worktree_keeps_the_branch_unless_asked(repo: Path) -> None:
    path, branch = seat(repo)
    git.remove_worktree(repo, path)
    assert branch in sh(repo, "branch", "--list")


# --- reading the change back -----------------------------------------------------------------


def test_the_change_sees_every_kind_of_change(repo: Path) -> None:
    path, _ = seat(repo)
    base = git.head_commit(repo)
    write(path / "edit.txt", "one\nTWO\nthree\n")
    write(path / "created.txt", "new file, never staged\n")
    write(path / "src" / "deep" / "mod.py", "x = 1\n")
    (path / "gone.txt").unlink()
    (path / "old_name.txt").rename(path / "new_name.txt")
    write(path / "image.bin", b"\x00\x01\x02changed binary")
    write(path / "photo.png", b"\x89PNG\x00\x00\xff")
    (path / "run.sh").chmod(0o755)
    write(path / "debug.log", "ignored\n")
    write(path / "build" / "out.o", "ignored\n")

    changes = candidate_change(path, base)[0]
    files = by_path(changes.files)
    assert changes.base_commit == base
    assert set(files) == {
        ("edit.txt", FileChangeKind.MODIFIED),
        ("created.txt", FileChangeKind.CREATED),
        ("src/deep/mod.py", FileChangeKind.CREATED),
        ("gone.txt", FileChangeKind.DELETED),
        ("new_name.txt", FileChangeKind.CREATED),
        ("old_name.txt", FileChangeKind.DELETED),
        ("image.bin", FileChangeKind.MODIFIED),
        ("photo.png", FileChangeKind.CREATED),
        ("run.sh", FileChangeKind.MODIFIED),
    }
    edit = files["edit.txt", FileChangeKind.MODIFIED]
    assert (edit.added_lines, edit.removed_lines, edit.binary) == (2, 1, False)
    renamed = files["new_name.txt", FileChangeKind.CREATED]
    assert renamed.renamed_from == "old_name.txt"
    assert files["created.txt", FileChangeKind.CREATED].renamed_from is None
    created = files["created.txt", FileChangeKind.CREATED]
    assert (created.old_mode, created.new_mode, created.added_lines) == (None, "100644", 1)
    assert files["gone.txt", FileChangeKind.DELETED].new_mode is None
    assert files["image.bin", FileChangeKind.MODIFIED].binary
    assert files["photo.png", FileChangeKind.CREATED].binary
    mode = files["run.sh", FileChangeKind.MODIFIED]
    assert (mode.old_mode, mode.new_mode, mode.mode_changed) == ("100644", "100755", True)
    assert not edit.mode_changed
    assert "debug.log" not in changes.paths and "build/out.o" not in changes.paths
    assert "Binary files a/image.bin and b/image.bin differ" in changes.diff
    assert "GIT binary patch" not in changes.diff
    assert "+TWO" in changes.diff and "new mode 100755" in changes.diff
    assert "rename from old_name.txt" in changes.diff
    assert "TWO" in changes.added_text() and "one" not in changes.added_text()


def test_the_change_records_the_modes_of_a_symlink_sed_replaced_by_a_copy(repo: Path) -> None:
    """``sed -i`` over a symlink writes a regular copy of its target in the link's place: git
    reports it as status T (120000 -> 100644), a modified path with both modes."""
    write(repo / "lib" / "real.py", "x = 1\n")
    (repo / "lib" / "alias.py").symlink_to("real.py")
    (repo / "pkg").mkdir()
    write(repo / "pkg" / "a.py", "a = 1\n")
    (repo / "pkglink").symlink_to("pkg")
    sh(repo, "add", "-A")
    sh(repo, "commit", "-q", "-m", "links")
    path, _ = seat(repo)
    base = git.head_commit(repo)
    subprocess.run(["sed", "-i", "s/1/2/", "lib/alias.py", "lib/real.py"], cwd=path, check=True)
    (path / "pkglink").unlink()
    shutil.copytree(path / "pkg", path / "pkglink")
    (path / "run.sh").chmod(0o755)

    changes = candidate_change(path, base)[0]
    alias = by_path(changes.files)["lib/alias.py", FileChangeKind.MODIFIED]
    assert (alias.old_mode, alias.new_mode, alias.mode_changed) == ("120000", "100644", True)
    assert [c.describe() for c in changes.type_changes()] == [
        "lib/alias.py symlink → file",
        "pkglink symlink → directory",
        "run.sh file → executable",
    ]
    assert "deleted file mode 120000" in changes.diff and "new file mode 100644" in changes.diff


def test_the_change_of_an_untouched_worktree_is_empty(repo: Path) -> None:
    path, _ = seat(repo)
    changes = candidate_change(path, git.head_commit(repo))[0]
    assert changes.empty and changes.diff == ""


def test_the_change_includes_commits_the_coder_made(repo: Path) -> None:
    path, _ = seat(repo)
    base = git.head_commit(repo)
    write(path / "committed.txt", "by the coder\n")
    sh(path, "add", "committed.txt")
    sh(path, "commit", "-q", "-m", "coder commit")
    write(path / "later.txt", "not committed\n")
    assert candidate_change(path, base)[0].paths == ["committed.txt", "later.txt"]


def test_paths_with_spaces_and_unicode(repo: Path) -> None:
    path, _ = seat(repo)
    write(path / "dir with space" / "naïve file.txt", "x\n")
    changes = candidate_change(path, git.head_commit(repo))[0]
    assert changes.paths == ["dir with space/naïve file.txt"]


# --- publishing ---------------------------------------------------------------------------------


def candidate(repo: Path, files: dict[str, str], run: str = "r1") -> str:
    path, branch = seat(repo, run)
    for name, text in files.items():
        write(path / name, text)
    sh(path, "add", "-A")
    sh(path, "commit", "-q", "-m", f"assay: {run}")
    return branch


def test_push_branch_to_a_remote(repo: Path, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    sh(tmp_path, "init", "-q", "--bare", str(remote))
    sh(repo, "remote", "add", "origin", str(remote))
    branch = candidate(repo, {"feature.txt": "feature\n"})
    git.push_branch(repo, branch)
    assert sh(remote, "rev-parse", branch) == sh(repo, "rev-parse", branch)


def test_worktrees_added_from_many_threads_at_once_all_succeed(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from assay.adapters.git import add_worktree, head_commit

    repo = tmp_path / "r"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"],
        check=True,
    )
    base = head_commit(repo)

    # Same basenames in different runs make git derive admin names while others are written:
    # without the lock this failed with "failed to read .git/worktrees/seat-1/commondir".
    def add(n: int) -> Path:
        return add_worktree(repo, tmp_path / f"run-{n // 4}" / f"seat-{n % 4}", base, f"b/{n}")

    with ThreadPoolExecutor(max_workers=16) as pool:
        paths = list(pool.map(add, range(32)))
    assert all((p / "a.txt").read_text() == "a\n" for p in paths)


def test_the_host_s_git_reads_no_global_config_replace_ref_or_fsmonitor(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = git.head_commit(repo)
    # A fake commit put in place of the base through refs/replace.
    write(repo / "keep.txt", "forged\n")
    sh(repo, "commit", "-q", "-am", "fake")
    fake = git.head_commit(repo)
    sh(repo, "reset", "-q", "--hard", base)
    sh(repo, "replace", base, fake)
    write(repo / "new.txt", "an untracked file the global ignore would hide\n")
    marker = tmp_path / "hook-ran"
    hook = f"touch {marker}; false"
    sh(repo, "config", "core.fsmonitor", hook)  # the repository's own
    global_config = tmp_path / "operator.gitconfig"
    global_config.write_text(f"[core]\n\tfsmonitor = {hook}\n\texcludesFile = {tmp_path / 'x'}\n")
    (tmp_path / "x").write_text("*.txt\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    assert git.read_file_at(repo, base, "keep.txt") == "keep\n"
    assert git._status(repo)[1] == ["new.txt"]
    assert not marker.exists()


def test_config_env_lets_the_operator_s_global_config_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    global_config = tmp_path / "operator.gitconfig"
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(global_config))
    monkeypatch.delenv("GIT_NO_REPLACE_OBJECTS", raising=False)
    assert git._env()["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert git._env()["GIT_NO_REPLACE_OBJECTS"] == "1"
    env = git.config_env()
    assert env["GIT_CONFIG_GLOBAL"] == str(global_config)
    assert "GIT_NO_REPLACE_OBJECTS" not in env
