"""Git through its command line, on repositories the host owns: queries, diffs parsed, publishing.

Every call is ``git -C <dir> …`` with the user's hooks, signing and colour switched off, so a
pre-commit hook or a gpg prompt in the user's config cannot stall or alter a run. It reads no
system or global config (only the repository's own), no replace objects, and runs no
fsmonitor: what the host's git does never depends on a file outside the repository it names
(:func:`config_env` is the exception, for reading the operator's identity). Seats are
repositories of their own (:mod:`assay.adapters.seats`) on the branch ``assay/<run>/<seat>``;
the worktree helpers below remain for the seats of runs made by older versions (their
``.assay/worktrees/<run>/<seat>`` is still cleaned up). Landing on the base branch is
:mod:`assay.adapters.landing`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from assay.adapters import folders
from assay.adapters.git_env import LOCATION_VARS

# The highest-precedence attributes (``info/attributes``) of every repository assay makes:
# each file is stored and checked out with exactly its bytes, whatever the tree's own
# .gitattributes say (no line-ending conversion, no ident, no filter).
ATTRIBUTES = "* -text !eol -ident -filter !working-tree-encoding\n"
ASSAY_NAME = "assay"
ASSAY_EMAIL = "assay@localhost"
GIT_TIMEOUT_SECONDS = 300.0
_STDERR_TAIL = 1500
_NO_MODE = "000000"
_CONFIG = (
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "core.untrackedCache=false"),
    # Every stat field is compared, whatever the repository says: with trustctime off or a
    # minimal checkStat, an edit that keeps the size and the mtime looks clean, and a landing
    # would overwrite it. A field that differs only costs git a look at the content.
    *("-c", "core.trustctime=true"),
    *("-c", "core.checkStat=default"),
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


# No system or global config (an operator's ``core.fsmonitor``, ``core.excludesFile`` or
# ``diff.external`` never applies) and no ``refs/replace`` (an object always is itself).
HARDENING = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_NO_REPLACE_OBJECTS": "1",
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARS}
    env.update(HARDENING)
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


def config_env() -> dict[str, str]:
    """:func:`_env` with the operator's system and global config readable again: only for
    reading settings that are the operator's to give (their name and email)."""
    env = _env()
    for name in HARDENING:
        if name in os.environ:
            env[name] = os.environ[name]
        else:
            env.pop(name, None)
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


def file_mode(repo: Path, commit: str, path: str) -> str | None:
    """The git mode of ``path`` at ``commit`` (``100644``, ``100755``, ``120000``...), or
    None when the commit has no such entry."""
    listed = _run(repo, "ls-tree", "-z", "--full-tree", commit, "--", path, ok=(0, 128))
    meta = _text(listed.stdout).split("\t", 1)[0].split(" ")
    return meta[0] if listed.returncode == 0 and len(meta) == 3 else None


def read_blob(repo: Path, commit: str, path: str, limit: int) -> bytes | None:
    """The bytes of the regular file ``path`` at ``commit``; None when it is not one there or
    is over ``limit`` bytes (its size is asked first: a huge blob is never read)."""
    listed = _run(repo, "ls-tree", "-z", "--full-tree", commit, "--", path, ok=(0, 128))
    meta = _text(listed.stdout).split("\t", 1)[0].split(" ")
    if listed.returncode != 0 or len(meta) != 3 or meta[1] != "blob" or meta[0] == "120000":
        return None
    size = _run(repo, "cat-file", "-s", meta[2], ok=(0, 128))
    if size.returncode != 0 or int(_text(size.stdout).strip() or 0) > limit:
        return None
    return _run(repo, "cat-file", "blob", meta[2]).stdout


def stream_blob(repo: Path, commit: str, path: str, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of the file ``path`` at ``commit``, ``chunk`` bytes at a time, never held
    whole (nothing when it is not a file there). Stopping early ends git."""
    argv = ["git", "-C", str(repo), *_CONFIG, "cat-file", "blob", f"{commit}:{path}"]
    child = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
        start_new_session=True,
    )
    assert child.stdout is not None
    try:
        while data := child.stdout.read(chunk):
            yield data
    finally:
        child.stdout.close()
        child.kill()
        child.wait()


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


def listed_files(repo: Path) -> list[str]:
    """The paths git lists in ``repo``'s work tree: tracked, and untracked but not ignored."""
    raw = _run(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
    return [name for name in _text(raw).split("\0") if name]


def current_branch(repo: Path) -> str | None:
    """The checked-out branch's short name, or None on a detached HEAD."""
    done = _run(repo, "symbolic-ref", "--quiet", "--short", "HEAD", ok=(0, 1))
    return _text(done.stdout).strip() or None


def uncommitted(repo: Path) -> list[str]:
    """The tracked paths of a working tree with changes not committed (staged or not)."""
    return _status(repo)[0]


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


def ensure_excluded(repo: Path, pattern: str = ".assay/") -> bool:
    """Add ``pattern`` to the repository's ``info/exclude`` once; True when it was added.

    ``--git-path`` resolves to the common directory, so this works from a linked worktree too.
    Its path is asked of git once per repository and process (a run asks twice otherwise).
    """
    exclude = _EXCLUDE_FILES.get(repo) or _EXCLUDE_FILES.setdefault(
        repo, _git_path(repo, "info/exclude")
    )
    existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if pattern in (line.strip() for line in existing.splitlines()):
        return False
    exclude.parent.mkdir(parents=True, exist_ok=True)
    separator = "" if not existing or existing.endswith("\n") else "\n"
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write(f"{separator}{pattern}\n")
    return True


_EXCLUDE_FILES: dict[Path, Path] = {}  # repository -> its info/exclude (where it never moves)


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
        if path.exists() or path.is_symlink():
            folders.remove_tree(path)  # what stays is for the caller to see
        _run(repo, "worktree", "prune")
        if branch is not None:
            _run(repo, "branch", "-D", "--", branch, ok=(0, 1))


# --- diff output, parsed --------------------------------------------------------------------


def _parse_raw_numstat(
    out: str,
) -> tuple[list[tuple[str, str, str, tuple[str, ...]]], dict[str, tuple[int, int, bool]]]:
    """The entries (``:old new osha nsha STATUS\\0path\\0[path\\0]``) and the counts of one
    ``diff --raw --numstat -z``: git writes every raw entry (each opens with ``:``), then the
    numstat ones (each opens with a count or ``-``)."""
    entries: list[tuple[str, str, str, tuple[str, ...]]] = []
    fields = out.split("\0")
    index = 0
    while index < len(fields) and fields[index].startswith(":"):
        old_mode, new_mode, _old, _new, status = fields[index][1:].split(" ")
        letter = status[:1]
        count = 2 if letter in ("R", "C") else 1
        paths = tuple(fields[index + 1 : index + 1 + count])
        entries.append((old_mode, new_mode, letter, paths))
        index += 1 + count
    return entries, _parse_numstat("\0".join(fields[index:]))


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


def config_value(repo: Path, key: str) -> str | None:
    """The repository's own setting ``key`` (its config file only), or None when unset."""
    done = _run(repo, "config", "--get", "--", key, ok=(0, 1))
    return _text(done.stdout).strip() or None


def root_commits(repo: Path) -> list[str]:
    """The root commits HEAD descends from (none in a repository with no commit)."""
    done = _run(repo, "rev-list", "--max-parents=0", "HEAD", "--", ok=(0, 128))
    return _text(done.stdout).split() if done.returncode == 0 else []
