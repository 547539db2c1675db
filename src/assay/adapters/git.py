"""Git through its command line: the change read back from disk, checkpoints, publishing.

Every call is ``git -C <dir> …`` with the user's hooks, signing and colour switched off, so a
pre-commit hook or a gpg prompt in the user's config cannot stall or alter a run. Seats are
repositories of their own (:mod:`assay.adapters.seats`) on the branch ``assay/<run>/<seat>``;
the worktree helpers below remain for the seats of runs made by older versions (their
``.assay/worktrees/<run>/<seat>`` is still cleaned up). Landing on the base branch is
:mod:`assay.adapters.landing`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from assay.adapters.git_env import LOCATION_VARS
from assay.core.changes import ChangeSet, FileDelta
from assay.core.vocab import FileChangeKind

ASSAY_NAME = "assay"
ASSAY_EMAIL = "assay@localhost"
GIT_TIMEOUT_SECONDS = 300.0
_STDERR_TAIL = 1500
_NO_MODE = "000000"
_CONFIG = (
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.quotePath=false"),
    *("-c", "commit.gpgSign=false"),
    *("-c", "color.ui=false"),
    *("-c", f"user.name={ASSAY_NAME}"),
    *("-c", f"user.email={ASSAY_EMAIL}"),
)


class GitError(RuntimeError):
    """A git command failed; the message has the command and the end of its stderr."""

    def __init__(self, args: Sequence[str], cwd: Path, returncode: int | None, stderr: str):
        self.args_used = tuple(args)
        self.cwd = cwd
        self.returncode = returncode
        self.stderr = stderr
        tail = stderr.strip()[-_STDERR_TAIL:] or "(no output)"
        status = "timed out" if returncode is None else f"exit {returncode}"
        super().__init__(f"`git {' '.join(args)}` in {cwd} failed ({status}): {tail}")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARS}
    env.update(
        LC_ALL="C",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_AUTHOR_NAME=ASSAY_NAME,
        GIT_AUTHOR_EMAIL=ASSAY_EMAIL,
        GIT_COMMITTER_NAME=ASSAY_NAME,
        GIT_COMMITTER_EMAIL=ASSAY_EMAIL,
    )
    return env


def _run(
    cwd: Path, *args: str, ok: Sequence[int] = (0,), feed: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    argv = ["git", "-C", str(cwd), *_CONFIG, *args]
    stdin: dict[str, Any] = {"stdin": subprocess.DEVNULL} if feed is None else {"input": feed}
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            **stdin,
            env=_env(),
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
            # Its own session: a terminal's Ctrl-C (sent to the whole foreground group)
            # reaches assay, which stops at a boundary; never a git half-way.
            start_new_session=True,
        )
    except FileNotFoundError:
        raise GitError(args, cwd, 127, "git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired as exc:
        raise GitError(args, cwd, None, _text(exc.stderr or b"")) from None
    if done.returncode not in ok:
        raise GitError(args, cwd, done.returncode, _text(done.stderr))
    return done


def _out(cwd: Path, *args: str) -> str:
    return _text(_run(cwd, *args).stdout).strip()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _git_path(cwd: Path, name: str) -> Path:
    """A file in the git directory (``info/`` resolves to the common one of all worktrees)."""
    path = Path(_out(cwd, "rev-parse", "--git-path", name))
    return path if path.is_absolute() else cwd / path


def _stage_all(worktree: Path) -> None:
    """``git add -A``. A coder killed mid-command can leave ``index.lock`` behind; by the time
    the seat is read back its processes are gone, so such a lock is stale and is removed."""
    try:
        _run(worktree, "add", "-A")
    except GitError as exc:
        if "index.lock" not in exc.stderr:
            raise
        _git_path(worktree, "index.lock").unlink(missing_ok=True)
        _run(worktree, "add", "-A")


# --- the repository --------------------------------------------------------------------------


def repo_root(path: Path) -> Path:
    """The top of the working tree that contains ``path``."""
    return Path(_out(path, "rev-parse", "--show-toplevel"))


def head_commit(repo: Path) -> str:
    try:
        return _out(repo, "rev-parse", "--verify", "--end-of-options", "HEAD^{commit}")
    except GitError as exc:
        if _run(repo, "rev-parse", "--git-dir", ok=(0, 128)).returncode != 0:
            raise
        raise GitError(
            exc.args_used, repo, exc.returncode, "the repository has no commits yet"
        ) from None


def read_file_at(repo: Path, commit: str, path: str) -> str | None:
    """A file's text at ``commit``, or None when it does not exist there (anchor checks)."""
    done = _run(repo, "cat-file", "-p", f"{commit}:{path}", ok=(0, 128))
    return _text(done.stdout) if done.returncode == 0 else None


def size_at(repo: Path, commit: str, path: str) -> int | None:
    """The size in bytes of ``path`` at ``commit``, or None when it does not exist there."""
    done = _run(repo, "cat-file", "-s", f"{commit}:{path}", ok=(0, 128))
    return int(_text(done.stdout).strip()) if done.returncode == 0 else None


def strings_at(repo: Path, commit: str, values: Iterable[str]) -> set[str]:
    """Which of ``values`` occur, as exact text, anywhere in ``commit``'s files (binary ones
    too): one ``git grep`` for all of them."""
    wanted = sorted({v for v in values if v and "\n" not in v})
    if not wanted:
        return set()
    grep = ("grep", "-a", "-F", "-o", "-h", "--no-textconv", "--no-color", "-f", "-")
    feed = ("\n".join(wanted) + "\n").encode("utf-8", "surrogateescape")
    done = _run(repo, *grep, commit, "--", ok=(0, 1), feed=feed)
    matched = set(_text(done.stdout).splitlines())
    # -o prints the longest match at a place: a value inside a longer one is there as well.
    return {v for v in wanted if v in matched or any(v in m for m in matched)}


def commit_diff(repo: Path, commit: str) -> str:
    """The patch ``commit`` made over its first parent (renames found; no external diff or
    textconv: the repository's config never runs a program here)."""
    options = ["--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/"]
    return _text(_run(repo, "diff-tree", "-p", "-M", "--no-commit-id", *options, commit).stdout)


def current_branch(repo: Path) -> str | None:
    """The checked-out branch's short name, or None on a detached HEAD."""
    done = _run(repo, "symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1))
    return _text(done.stdout).strip() or None


def _status(repo: Path) -> tuple[list[str], list[str]]:
    """(tracked paths with changes, untracked paths) of a working tree."""
    raw = _run(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
    tracked: list[str] = []
    untracked: list[str] = []
    fields = iter(_text(raw).split("\0"))
    for entry in fields:
        if not entry:
            continue
        code, path = entry[:2], entry[3:]
        if code == "??":
            untracked.append(path)
        else:
            tracked.append(path)
            if code[0] in "RC":
                next(fields, None)  # the rename's source path
    return tracked, untracked


def is_dirty(repo: Path, *, untracked: bool = True) -> bool:
    """Whether the working tree has changes (staged, unstaged, and by default untracked files)."""
    tracked, new = _status(repo)
    return bool(tracked or (untracked and new))


def ensure_excluded(repo: Path, pattern: str = ".assay/") -> bool:
    """Add ``pattern`` to the repository's ``info/exclude`` once; True when it was added.

    ``--git-path`` resolves to the common directory, so this works from a linked worktree too.
    """
    exclude = _git_path(repo, "info/exclude")
    existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if pattern in (line.strip() for line in existing.splitlines()):
        return False
    exclude.parent.mkdir(parents=True, exist_ok=True)
    separator = "" if not existing or existing.endswith("\n") else "\n"
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write(f"{separator}{pattern}\n")
    return True


# --- seat branches, and the worktrees of older versions --------------------------------------


def seat_branch(run_id: str, seat: int | str) -> str:
    """The candidate branch of one seat, e.g. ``assay/<run>/seat-1``."""
    return f"assay/{run_id}/{seat}"


def seat_worktree(assay_dir: Path, run_id: str, seat: int | str) -> Path:
    """Where one seat works: ``<assay_dir>/worktrees/<run>/<seat>``."""
    return assay_dir / "worktrees" / run_id / str(seat)


@contextlib.contextmanager
def _worktree_lock(repo: Path) -> Iterator[None]:
    """Git's worktree bookkeeping (``.git/worktrees/``) is not safe against concurrent adds and
    prunes: a second add can read the first's half-written entry. Seats start in parallel
    threads and several assay processes may share a repository, so these are serialised."""
    fd = os.open(_git_path(repo, "assay-worktree.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def add_worktree(repo: Path, path: Path, base_commit: str, branch: str) -> Path:
    """Check ``base_commit`` out at ``path`` on the new branch ``branch``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _worktree_lock(repo):
        _run(repo, "worktree", "add", "--quiet", "-b", branch, str(path), base_commit)
    return path


def remove_worktree(repo: Path, path: Path, branch: str | None = None) -> None:
    """Remove the worktree even with uncommitted work in it; delete ``branch`` if given."""
    with _worktree_lock(repo):
        _run(repo, "worktree", "remove", "--force", "--force", str(path), ok=(0, 128))
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        _run(repo, "worktree", "prune")
        if branch is not None:
            _run(repo, "branch", "-D", "--", branch, ok=(0, 1))


# --- the change, read back from disk ---------------------------------------------------------


def read_changes(worktree: Path, base_commit: str) -> ChangeSet:
    """Everything the worktree holds that differs from ``base_commit``, whatever was claimed.

    Everything is staged first (untracked files too, ``.gitignore`` respected), then the index
    is compared with the base with rename detection. A rename is reported as the new path
    ``created`` with ``renamed_from`` plus the old path ``deleted``.
    """
    _stage_all(worktree)
    compare = ("diff", "--cached", "-M", "--no-ext-diff", "--no-textconv")
    raw = _text(_run(worktree, *compare, "--raw", "-z", base_commit, "--").stdout)
    numstat = _text(_run(worktree, *compare, "--numstat", "-z", base_commit, "--").stdout)
    prefixes = ("--src-prefix=a/", "--dst-prefix=b/")
    diff = _text(_run(worktree, *compare, *prefixes, base_commit, "--").stdout)
    counts = _parse_numstat(numstat)
    files: list[FileDelta] = []
    for old_mode, new_mode, status, paths in _parse_raw(raw):
        added, removed, binary = counts.get(paths[-1], (0, 0, False))
        before = None if old_mode == _NO_MODE else old_mode
        after = None if new_mode == _NO_MODE else new_mode
        if status == "R":
            source, target = paths
            files.append(
                FileDelta(path=source, kind=FileChangeKind.DELETED, binary=binary, old_mode=before)
            )
        else:
            target, source = paths[-1], None
        kind = {"A": FileChangeKind.CREATED, "D": FileChangeKind.DELETED}.get(
            status, FileChangeKind.CREATED if source else FileChangeKind.MODIFIED
        )
        files.append(
            FileDelta(
                path=target,
                kind=kind,
                renamed_from=source,
                binary=binary,
                old_mode=before,
                new_mode=after,
                added_lines=added,
                removed_lines=removed,
            )
        )
    files.sort(key=lambda f: (f.path, f.kind.value))
    return ChangeSet(base_commit=base_commit, files=files, diff=diff)


def _parse_raw(raw: str) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """``:old new osha nsha STATUS\\0path\\0[path\\0]`` entries of ``diff --raw -z``."""
    entries: list[tuple[str, str, str, tuple[str, ...]]] = []
    fields = raw.split("\0")
    index = 0
    while index < len(fields) and fields[index].startswith(":"):
        old_mode, new_mode, _old, _new, status = fields[index][1:].split(" ")
        letter = status[:1]
        count = 2 if letter in ("R", "C") else 1
        paths = tuple(fields[index + 1 : index + 1 + count])
        entries.append((old_mode, new_mode, letter, paths))
        index += 1 + count
    return entries


def _parse_numstat(numstat: str) -> dict[str, tuple[int, int, bool]]:
    """Lines added and removed per (new) path; ``-`` counts mean a binary file."""
    counts: dict[str, tuple[int, int, bool]] = {}
    fields = numstat.split("\0")
    index = 0
    while index < len(fields) and fields[index]:
        added, removed, path = fields[index].split("\t", 2)
        index += 1
        if not path:  # a rename: the old and the new path follow
            path = fields[index + 1]
            index += 2
        binary = added == "-"
        counts[path] = (0 if binary else int(added), 0 if binary else int(removed), binary)
    return counts


def commit_all(worktree: Path, message: str) -> str | None:
    """Commit everything in the worktree as assay; the new commit, or None if nothing changed."""
    _stage_all(worktree)
    if _run(worktree, "diff", "--cached", "--quiet", ok=(0, 1)).returncode == 0:
        return None
    _run(worktree, "commit", "--quiet", "--no-verify", "-m", message)
    return _out(worktree, "rev-parse", "HEAD")


def ignored_entries(worktree: Path) -> frozenset[str]:
    """Untracked, ignored files and folders (a folder is listed once, as ``dir/``)."""
    out = _run(
        worktree, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"
    ).stdout
    return frozenset(entry for entry in _text(out).split("\0") if entry)


def reset_to(worktree: Path, commit: str) -> None:
    """Put the worktree and its branch back on ``commit``: what a process left that is not
    ignored goes (ignored entries, the coder's own such as ``node_modules/``, stay)."""
    _run(worktree, "reset", "--quiet", "--hard", commit)
    _run(worktree, "clean", "--quiet", "-f", "-d")


def restore_checkpoint(worktree: Path, keep_ignored: frozenset[str] = frozenset()) -> None:
    """Put the worktree back to its last commit: what validators left behind (caches such as a
    stale ``__pycache__``, build output) must not leak into the candidate or the next attempt.
    Ignored entries in ``keep_ignored`` (the coder's own, e.g. ``node_modules/``) stay."""
    _run(worktree, "reset", "--quiet", "--hard", "HEAD")
    _run(worktree, "clean", "--quiet", "-f", "-d")
    for entry in ignored_entries(worktree) - keep_ignored:
        target = worktree / entry
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)


# --- publishing ------------------------------------------------------------------------------


def delete_branch(repo: Path, branch: str) -> None:
    """Delete the local ``branch`` if it exists (a seat's candidate branch)."""
    _run(repo, "branch", "-D", "--", branch, ok=(0, 1))


def branches(repo: Path, prefix: str) -> list[str]:
    """The short names of the local branches under ``prefix`` (``refs/heads/assay/…``)."""
    listed = _run(repo, "for-each-ref", "--format=%(refname:short)", prefix)
    return [line for line in _text(listed.stdout).splitlines() if line]


def delete_remote_branch(repo: Path, remote: str, branch: str) -> None:
    """Delete ``branch`` from ``remote``; raises :class:`GitError` when that fails."""
    _run(repo, "push", "--quiet", remote, "--delete", f"refs/heads/{branch}")


def push_branch(repo: Path, branch: str, remote: str = "origin") -> None:
    """Publish the candidate branch (for the ``pr`` land mode)."""
    _run(repo, "push", "--quiet", remote, f"refs/heads/{branch}:refs/heads/{branch}")


def remote_url(repo: Path, remote: str = "origin") -> str | None:
    """The fetch URL of ``remote``, or None when there is no such remote (for ``pr``)."""
    done = _run(repo, "remote", "get-url", "--", remote, ok=(0, 2, 128))
    if done.returncode != 0:
        return None
    return _text(done.stdout).strip() or None
