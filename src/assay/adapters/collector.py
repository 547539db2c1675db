"""The collector: turns a seat's work tree into a tree object, inside the seat's sandbox.

Run as ``python -m assay.adapters.collector '<json>'`` once every process of the coder has
ended, with the seat readable and only ``out_dir`` writable. The JSON names ``worktree``,
``base`` (the commit the seat started from), ``stores`` (object folders holding the base and
earlier candidates), ``out_dir`` and ``limits`` (``max_files``, ``max_bytes``,
``max_file_bytes``, ``max_depth``).

Nothing of the seat's ``.git`` is used: git runs on a git directory of its own in ``out_dir``
with a fresh index, no system or global config, no replace objects, hooks, fsmonitor or
untracked cache, and an ``info/attributes`` that turns every conversion off, so the tree holds
exactly the bytes the coder left. Only the repository's own ``.gitignore`` files apply.
Anything named ``.git`` below the top (a nested repository, a ``gitdir:`` file) is reported
as forbidden and its folder kept out; FIFOs, sockets and devices are reported as skipped.
The budgets are checked before anything is hashed: over one, no object is written.

The result is ``out_dir/manifest.json`` (and ``out_dir/candidate.pack``, the objects of the
capture commit that the base does not have). Standard library only, imports kept light: this
starts on every dispatch. Exit 0 when the manifest was written.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

MANIFEST = "manifest.json"
PACK = "candidate.pack"
LISTED = 200  # entries kept in each list of the manifest (ignored, forbidden, specials)
SHOWN_CHARS = 200  # a listed path longer than this is cut (the manifest stays small)
MESSAGE_CHARS = 2000
GIT_TIMEOUT = 600.0
ATTRIBUTES = "* -text !eol -ident -filter !working-tree-encoding -diff\n"
_BLOB_MODES = ("100644", "100755", "120000")
_GITLINK = "160000"
_CONFIG = (
    *("-c", "core.excludesFile=/dev/null"),
    *("-c", "core.attributesFile=/dev/null"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.autocrlf=false"),
    *("-c", "core.safecrlf=false"),
    *("-c", "core.untrackedCache=false"),
    *("-c", "core.symlinks=true"),
    *("-c", "core.fileMode=true"),
    *("-c", "core.ignoreCase=false"),
    *("-c", "core.precomposeUnicode=false"),
    *("-c", "core.sparseCheckout=false"),
    *("-c", "submodule.recurse=false"),
    *("-c", "status.submoduleSummary=false"),
    *("-c", "diff.ignoreSubmodules=all"),
    *("-c", "gc.auto=0"),
    *("-c", "maintenance.auto=false"),
)


class Stop(Exception):
    """The capture ends here; ``field`` (``over_budget`` or ``error``) says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def shown(path: str) -> str:
    """A path as the manifest names it: bytes that are no UTF-8 as ``\\xNN`` (the host writes
    these names to JSON and terminals), cut at :data:`SHOWN_CHARS`."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _listed(paths: list[str]) -> list[str]:
    return [shown(p) for p in paths[:LISTED]]


class Git:
    """git on the collector's own git directory, the seat as its work tree."""

    def __init__(self, worktree: str, out_dir: str) -> None:
        self.worktree = worktree
        home = os.path.join(out_dir, "home")
        os.mkdir(home, 0o700)
        self.env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": home,
            "LC_ALL": "C",
            "GIT_DIR": os.path.join(out_dir, "git"),
            "GIT_WORK_TREE": worktree,
            "GIT_INDEX_FILE": os.path.join(out_dir, "index"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_AUTHOR_NAME": "assay",
            "GIT_AUTHOR_EMAIL": "assay@localhost",
            "GIT_AUTHOR_DATE": "@0 +0000",
            "GIT_COMMITTER_NAME": "assay",
            "GIT_COMMITTER_EMAIL": "assay@localhost",
            "GIT_COMMITTER_DATE": "@0 +0000",
        }

    def run(
        self,
        *args: str,
        feed: bytes | None = None,
        stdout: Any = subprocess.PIPE,
        ok: tuple[int, ...] = (0,),
    ) -> bytes:
        try:
            done = subprocess.run(
                ["git", *_CONFIG, *args],
                cwd=self.worktree,
                env=self.env,
                input=feed,
                stdin=None if feed is not None else subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.PIPE,
                timeout=GIT_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise Stop("error", f"git {args[0]} timed out after {GIT_TIMEOUT:.0f} s") from None
        except OSError as exc:
            raise Stop("error", f"git could not be started: {exc.strerror}") from None
        if done.returncode not in ok:
            tail = done.stderr.decode("utf-8", "replace").strip()[-MESSAGE_CHARS // 2 :]
            if "too long" in tail.lower():  # a path git cannot open: a budget, not a crash
                raise Stop("over_budget", f"a path too long for git: {tail}")
            raise Stop("error", f"git {args[0]} failed (exit {done.returncode}): {tail}")
        return done.stdout or b""

    def paths(self, *args: str) -> list[str]:
        """The NUL-separated paths a command prints, as file-system names."""
        return [os.fsdecode(p) for p in self.run(*args).split(b"\0") if p]


def make_git_dir(out_dir: str, stores: list[str], object_format: str) -> None:
    """A git directory of the collector's own, written by hand (no template, no hook)."""
    git_dir = os.path.join(out_dir, "git")
    for folder in ("", "objects", "objects/info", "objects/pack", "refs", "refs/heads", "info"):
        os.mkdir(os.path.join(git_dir, folder), 0o700)
    version = 1 if object_format != "sha1" else 0
    config = f"[core]\n\trepositoryformatversion = {version}\n\tbare = false\n"
    if version:
        config += f"[extensions]\n\tobjectformat = {object_format}\n"
    _write(os.path.join(git_dir, "config"), config)
    _write(os.path.join(git_dir, "HEAD"), "ref: refs/heads/capture\n")
    _write(
        os.path.join(git_dir, "objects", "info", "alternates"), "".join(f"{s}\n" for s in stores)
    )
    _write(os.path.join(git_dir, "info", "attributes"), ATTRIBUTES)
    _write(os.path.join(git_dir, "info", "exclude"), "")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(text)


class Walk:
    """What the work tree holds that git must not see or cannot store, found by one iterative
    walk that never follows a link nor enters a folder holding a ``.git``."""

    def __init__(self) -> None:
        self.forbidden: list[str] = []  # every entry named .git below the top
        self.excluded: list[str] = []  # the folders (or top-level names) kept out for them
        self.specials: list[str] = []  # FIFOs, sockets, devices


def walk(worktree: str, max_depth: int) -> Walk:
    found = Walk()
    stack: list[tuple[str, int]] = [("", 0)]
    while stack:
        rel, depth = stack.pop()
        try:
            with os.scandir(os.path.join(worktree, rel) if rel else worktree) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            raise _unreadable(rel, exc) from None
        dot_git = [e for e in entries if e.name.lower() == ".git" and (rel or e.name != ".git")]
        if rel and dot_git:  # a repository of its own (or pretending): never entered
            found.forbidden += [f"{rel}/{e.name}" for e in dot_git]
            found.excluded.append(rel + "/")
            continue
        for entry in entries:
            if not rel and entry.name == ".git":
                continue  # the seat's own repository: not the coder's work
            path = f"{rel}/{entry.name}" if rel else entry.name
            if entry in dot_git:  # ``.GIT`` at the top: git refuses such a name
                found.forbidden.append(path)
                found.excluded.append(path)
                continue
            if depth + 1 > max_depth:
                raise Stop(
                    "over_budget",
                    f"a path of more than {max_depth:,} components over max_depth "
                    f"{max_depth:,}: {shown(path)}",
                )
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((path, depth + 1))
                elif not (entry.is_file(follow_symlinks=False) or entry.is_symlink()):
                    found.specials.append(path)
            except OSError as exc:
                raise _unreadable(path, exc) from None
    return found


def _unreadable(rel: str, exc: OSError) -> Stop:
    where = shown(rel) or "the work tree"
    if exc.errno == errno.ENAMETOOLONG:
        return Stop("over_budget", f"a path too long for the system: {where}")
    return Stop("error", f"{where} cannot be read ({exc.strerror})")


def exclude_pattern(path: str) -> str:
    """An anchored ignore pattern matching ``path`` literally (a trailing ``/``: a folder).
    A line break cannot be written in a pattern: ``?`` stands for it."""
    body = path.rstrip("/")
    escaped = "".join(
        "?" if ch in "\n\r" else f"\\{ch}" if ch in "\\*?[]! #" else ch for ch in body
    )
    return "/" + escaped + ("/" if path.endswith("/") else "")


def _under(path: str, folders: set[str]) -> bool:
    """Whether ``path`` is one of ``folders`` or lies inside one."""
    parts = path.rstrip("/").split("/")
    return any("/".join(parts[:n]) in folders for n in range(1, len(parts) + 1))


def base_entries(git: Git, base: str) -> dict[str, tuple[str, int]]:
    """Every entry of the base's tree: path -> (mode, size; -1 for no blob)."""
    entries: dict[str, tuple[str, int]] = {}
    for record in git.run("ls-tree", "-r", "-l", "-z", "--full-tree", base).split(b"\0"):
        meta, _, raw_path = record.partition(b"\t")
        fields = meta.split()
        if len(fields) == 4:
            size = int(fields[3]) if fields[3] != b"-" else -1
            entries[os.fsdecode(raw_path)] = (fields[0].decode(), size)
    return entries


def _size(worktree: str, path: str) -> int | None:
    """The size git would store for ``path`` (a link: its target's length); None when it is
    gone or no file."""
    try:
        info = os.lstat(os.path.join(worktree, path))
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise Stop("over_budget", f"a path too long for the system: {shown(path)}") from None
        return None
    mode = info.st_mode & 0o170000
    return info.st_size if mode in (0o100000, 0o120000) else None


def check_budgets(
    worktree: str, new: list[str], base: dict[str, tuple[str, int]], limits: dict[str, int]
) -> None:
    """Over a budget: :class:`Stop` with the figure and the path. Nothing is hashed here."""
    max_files, max_bytes = limits["max_files"], limits["max_bytes"]
    max_file = limits["max_file_bytes"]
    if len(new) > max_files:
        raise Stop("over_budget", f"{len(new):,} new files over max_files {max_files:,}")
    sizes: list[tuple[str, int]] = []
    for path in new:
        size = _size(worktree, path)
        if size is not None:
            sizes.append((path, size))
    for path, (mode, base_size) in base.items():
        if mode in _BLOB_MODES:
            size = _size(worktree, path)
            if size is not None and size != base_size:
                sizes.append((path, size))
    sizes.sort()
    for path, size in sizes:
        if size > max_file:
            raise Stop(
                "over_budget",
                f"a file of {size:,} bytes over max_file_bytes {max_file:,}: {shown(path)}",
            )
    total = sum(size for _, size in sizes)
    if total > max_bytes:
        largest = max(sizes, key=lambda item: item[1])
        raise Stop(
            "over_budget",
            f"{total:,} bytes of new and changed files over max_bytes {max_bytes:,} "
            f"(the largest {shown(largest[0])}, {largest[1]:,} bytes)",
        )


def ignored_folders(git: Git, dot_gits: list[str]) -> set[str]:
    """Which of ``dot_gits`` (paths of entries named ``.git``) lie in a folder the repository's
    own .gitignore files ignore."""
    parents = {p: p.rsplit("/", 1)[0] for p in dot_gits if "/" in p}
    if not parents:
        return set()
    feed = b"".join(os.fsencode(folder + "/") + b"\0" for folder in set(parents.values()))
    out = git.run("check-ignore", "-z", "--stdin", feed=feed, ok=(0, 1))
    ignored = {os.fsdecode(p).rstrip("/") for p in out.split(b"\0") if p}
    return {path for path, folder in parents.items() if folder in ignored}


def collect(args: dict[str, Any], manifest: dict[str, Any]) -> None:
    worktree, base, out_dir = args["worktree"], args["base"], args["out_dir"]
    limits = {k: int(args["limits"][k]) for k in ("max_files", "max_bytes", "max_file_bytes")}
    limits["max_depth"] = int(args["limits"]["max_depth"])
    make_git_dir(out_dir, list(args["stores"]), "sha256" if len(base) == 64 else "sha1")
    git = Git(worktree, out_dir)
    found = walk(worktree, limits["max_depth"])
    # A repository inside a folder the repository ignores (a dependency git installed into
    # .venv/ or node_modules/) is no part of the candidate: it stays out, unreported.
    inside_ignored = ignored_folders(git, found.forbidden)
    manifest["specials"] = _listed(sorted(found.specials))
    with open(os.path.join(out_dir, "git", "info", "exclude"), "wb") as exclude:
        exclude.write(b"".join(os.fsencode(exclude_pattern(p)) + b"\n" for p in found.excluded))
    git.run("read-tree", base)
    base_tree = base_entries(git, base)
    # A submodule's folder is left as the base has it: git would run ``status`` inside it.
    gitlinks = [p for p, (mode, _) in base_tree.items() if mode == _GITLINK]
    # So is the repository in a submodule's folder: the gitlink is the base's, kept as it is.
    harmless = inside_ignored | {f"{p}/.git" for p in gitlinks}
    manifest["forbidden"] = _listed(sorted(p for p in found.forbidden if p not in harmless))
    if gitlinks:
        feed = b"".join(os.fsencode(p) + b"\0" for p in gitlinks)
        git.run("update-index", "--skip-worktree", "-z", "--stdin", feed=feed)
    # A FIFO or device where the base has a file: no file any more (git would refuse it).
    gone = [p for p in found.specials if p in base_tree]
    if gone:
        feed = b"".join(os.fsencode(p) + b"\0" for p in gone)
        git.run("update-index", "--force-remove", "-z", "--stdin", feed=feed)
    new = git.paths("ls-files", "--others", "--exclude-standard", "-z")
    # What was kept out for a forbidden name is reported as forbidden, not as ignored.
    kept_out = {p.rstrip("/") for p in found.excluded}
    listing = ("ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z")
    ignored = [p for p in git.paths(*listing) if not _under(p, kept_out)]
    manifest["ignored"] = _listed(ignored)
    manifest["ignored_count"] = len(ignored)
    check_budgets(worktree, new, base_tree, limits)
    # The fresh index has no file's stat data: without a refresh, ``add`` would write every
    # file as a new object (the stores are read-only here, so git cannot mark them as used).
    git.run("update-index", "-q", "--refresh", "--ignore-missing", "--unmerged", ok=(0, 1))
    git.run("add", "-A")
    tree = git.run("write-tree").decode().strip()
    commit = git.run("commit-tree", tree, "-p", base, "-m", "assay: capture").decode().strip()
    fd = os.open(os.path.join(out_dir, PACK), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as pack:
        feed = f"{commit}\n^{base}\n".encode()
        git.run("pack-objects", "--revs", "--stdout", "-q", feed=feed, stdout=pack)
    manifest["tree"], manifest["commit"] = tree, commit


def main(argv: list[str]) -> int:
    manifest: dict[str, Any] = {
        "tree": None,
        "commit": None,
        "ignored": [],
        "ignored_count": 0,
        "forbidden": [],
        "specials": [],
        "over_budget": None,
        "error": None,
    }
    try:
        args = json.loads(argv[1])
        out_dir = args["out_dir"]
    except (IndexError, ValueError, KeyError, TypeError) as exc:
        print(f"collector: bad arguments ({exc})", file=sys.stderr)
        return 2
    try:
        collect(args, manifest)
    except Stop as stop:
        manifest[stop.field] = stop.message[:MESSAGE_CHARS]
    except Exception as exc:  # a clear result, never a traceback the host would have to read
        manifest["error"] = f"the collector failed: {type(exc).__name__}: {exc}"[:MESSAGE_CHARS]
    if manifest["over_budget"] or manifest["error"]:
        manifest["tree"] = manifest["commit"] = None
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(out_dir, PACK))
    try:
        _write(os.path.join(out_dir, MANIFEST), json.dumps(manifest))
    except OSError as exc:
        print(f"collector: the manifest could not be written ({exc})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
