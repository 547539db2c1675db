"""The run's candidate store: a bare repository the engine owns, holding every captured tree.

A seat's capture (:mod:`assay.adapters.capture`) crosses into the store once: its pack is
indexed in a quarantine with git's strict checks (no ``.git`` or ``..`` entry, no broken link,
no thin pack), its object count and sizes bounded, and only then moved in. From then on the
host works on objects it owns: the change and its diff come from the base and candidate trees,
every command validator gets a fresh seat repository of exactly that tree (borrowing this
store's objects: :func:`assay.adapters.seats.create_seat`), and the landing fetches the commit
from here. The store borrows the user's objects (``objects/info/alternates``) and is
never bound writable into a sandbox; a seat of a later attempt may borrow it read-only.

Every git call here names the store (``--git-dir``), with no system or global config or
attributes, no replace objects, no hooks and no fsmonitor; its ``info/attributes`` turns
every conversion off.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import threading
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path

from assay.adapters import folders
from assay.adapters.capture import Capture
from assay.adapters.git import (
    ATTRIBUTES,
    GIT_TIMEOUT_SECONDS,
    GitError,
    _env,
    _parse_raw_numstat,
    _run,
    _text,
)
from assay.core.changes import ChangeSet, FileDelta
from assay.core.vocab import FileChangeKind

DIFF_CUT = "[assay] the diff is cut here: it is longer than {limit:,} characters"
_PIECE = 1024 * 1024  # the longest piece of one diff line held in memory
_NO_MODE = "000000"
_LINK_MODE = "120000"
_WHY_CHARS = 1000
_PACK_HEADER = 12
_PACK_TRAILER = 20
_DIFF_OPTIONS = (
    *("-r", "-M", "--no-commit-id", "--no-ext-diff", "--no-textconv"),
    *("--src-prefix=a/", "--dst-prefix=b/"),
)
_CONFIG = (
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.fsmonitor=false"),
    *("-c", "core.attributesFile=/dev/null"),
    *("-c", "core.autocrlf=false"),
    *("-c", "core.symlinks=true"),
    *("-c", "core.fileMode=true"),
    *("-c", "core.quotePath=false"),
    *("-c", "core.sparseCheckout=false"),
    *("-c", "color.ui=false"),
    *("-c", "commit.gpgSign=false"),
    *("-c", "gc.auto=0"),
    *("-c", "maintenance.auto=false"),
)


class CaptureRejected(Exception):
    """A capture the store does not take in; ``reason`` says why, for the operator."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CandidateStore:
    """A bare repository at ``path`` borrowing ``borrows`` (object folders); made when
    missing. ``object_format`` defaults to that of the first borrowed store's repository."""

    def __init__(
        self, path: Path, borrows: Sequence[Path], *, object_format: str | None = None
    ) -> None:
        self.path = path
        self.borrows = tuple(borrows)
        # The last whole patch read (by its base and tree, both immutable ids), as git's
        # pieces: the secret scan reads the patch the change was just made of, without a
        # second git.
        self._last_patch: tuple[tuple[str, str], tuple[str, ...]] | None = None
        if not (path / "objects").is_dir():
            self._create(object_format or self._format_of_borrowed())

    @property
    def objects(self) -> Path:
        """The store's object folder (what the seats of later attempts borrow, read-only)."""
        return self.path / "objects"

    # --- git in the store ---------------------------------------------------------------------

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = _env()
        env.update(GIT_ATTR_NOSYSTEM="1", GIT_DIR=str(self.path))
        env.update(extra or {})
        return env

    def _git(
        self,
        *args: str,
        feed: bytes | None = None,
        stdin: int | None = None,
        ok: Sequence[int] = (0,),
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            done = subprocess.run(
                ["git", *_CONFIG, *args],
                cwd=self.path,
                input=feed,
                stdin=None if feed is not None else subprocess.DEVNULL if stdin is None else stdin,
                capture_output=True,
                env=self._env(env),
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
                start_new_session=True,  # a terminal's Ctrl-C reaches assay, never its git
            )
        except subprocess.TimeoutExpired as exc:
            raise GitError(args, self.path, None, _text(exc.stderr or b"")) from None
        if done.returncode not in ok:
            raise GitError(args, self.path, done.returncode, _text(done.stderr))
        return done

    def _out(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        return _text(self._git(*args, env=env).stdout).strip()

    def _format_of_borrowed(self) -> str:
        for store in self.borrows:
            found = subprocess.run(
                ["git", "rev-parse", "--show-object-format"],
                capture_output=True,
                stdin=subprocess.DEVNULL,
                env={**_env(), "GIT_DIR": str(store.parent)},
                timeout=GIT_TIMEOUT_SECONDS,
                check=False,
            )
            if found.returncode == 0 and _text(found.stdout).strip():
                return _text(found.stdout).strip()
        return "sha1"

    def _create(self, object_format: str) -> None:
        """Made beside ``path`` and renamed into place: two threads making the same store
        both end with one whole repository."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        made = Path(tempfile.mkdtemp(prefix=f".{self.path.name}-", dir=self.path.parent))
        try:
            init = ("init", "--quiet", "--bare", "--template=", f"--object-format={object_format}")
            subprocess.run(
                ["git", *_CONFIG, *init, str(made)],
                capture_output=True,
                stdin=subprocess.DEVNULL,
                env=_env(),
                timeout=GIT_TIMEOUT_SECONDS,
                check=True,
            )
            (made / "objects" / "info").mkdir(parents=True, exist_ok=True)
            alternates = "".join(f"{Path(b).resolve()}\n" for b in self.borrows)
            (made / "objects" / "info" / "alternates").write_text(alternates)
            (made / "info").mkdir(exist_ok=True)
            (made / "info" / "attributes").write_text(ATTRIBUTES)
            try:
                os.rename(made, self.path)
            except OSError:
                if not (self.path / "objects").is_dir():
                    raise
        except subprocess.CalledProcessError as exc:
            raise GitError(exc.cmd[-2:], self.path, exc.returncode, _text(exc.stderr)) from None
        finally:
            folders.remove_tree(made)

    # --- taking a capture in ------------------------------------------------------------------

    def import_pack(self, capture: Capture, *, max_objects: int, max_bytes: int) -> str:
        """Take the capture's objects in; the tree id. :class:`CaptureRejected` for a capture
        that failed, a pack over ``max_objects`` or ``max_bytes`` (its file, or its objects
        unpacked), an object git's strict checks refuse, or a commit that is not the tree on
        the base. Nothing of a rejected pack stays in the store."""
        if not capture.ok or capture.pack is None or capture.tree is None:
            raise CaptureRejected(capture.over_budget or capture.error or "no tree was captured")
        if capture.commit is None:
            raise CaptureRejected("the capture names no commit")
        quarantine = Path(tempfile.mkdtemp(prefix="quarantine-", dir=self.path))
        try:
            (quarantine / "pack").mkdir()
            self._index(capture.pack, quarantine, max_objects, max_bytes)
            both = {
                "GIT_OBJECT_DIRECTORY": str(quarantine),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.objects),
            }
            self._verify(capture, both, max_bytes)
            packs = sorted(quarantine.joinpath("pack").iterdir(), key=lambda p: p.suffix != ".pack")
            for made in packs:  # the pack before its index: git finds a pack by its index
                os.replace(made, self.objects / "pack" / made.name)
        finally:
            folders.remove_tree(quarantine)
        return capture.tree

    def _index(self, pack: Path, quarantine: Path, max_objects: int, max_bytes: int) -> None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(pack, flags)
        except OSError as exc:
            raise CaptureRejected(f"the capture's pack cannot be opened ({exc.strerror})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                raise CaptureRejected("the capture's pack is not a file of its own")
            if info.st_size > max_bytes:
                raise CaptureRejected(
                    f"the capture's pack is {info.st_size:,} bytes, over {max_bytes:,}"
                )
            header = os.pread(fd, _PACK_HEADER, 0)
            if len(header) < _PACK_HEADER or info.st_size < _PACK_HEADER + _PACK_TRAILER:
                raise CaptureRejected("the capture's pack is cut short")
            version, count = int.from_bytes(header[4:8], "big"), int.from_bytes(header[8:], "big")
            if header[:4] != b"PACK" or version not in (2, 3):
                raise CaptureRejected("the capture's pack is not a git pack")
            if count > max_objects:
                raise CaptureRejected(
                    f"the capture's pack holds {count:,} objects, over {max_objects:,}"
                )
            index = ("index-pack", "--strict", "--stdin", f"--max-input-size={max_bytes}")
            try:
                self._git(
                    *index,
                    stdin=fd,
                    env={
                        "GIT_OBJECT_DIRECTORY": str(quarantine),
                        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.objects),
                    },
                )
            except GitError as exc:
                why = exc.stderr.strip()[-_WHY_CHARS:]
                raise CaptureRejected(f"git refused the capture's objects: {why}") from None
        finally:
            os.close(fd)

    def _verify(self, capture: Capture, both: dict[str, str], max_bytes: int) -> None:
        """The pack's own objects within the bounds unpacked, and its commit exactly the
        captured tree on the base."""
        listing = ("cat-file", "--batch-all-objects", "--batch-check=%(objecttype) %(objectsize)")
        # The quarantine alone (no alternates): its own objects, sizes as unpacked.
        own = self._out(*listing, env={"GIT_OBJECT_DIRECTORY": both["GIT_OBJECT_DIRECTORY"]})
        total = sum(int(line.split()[1]) for line in own.splitlines() if line)
        if total > max_bytes:
            raise CaptureRejected(
                f"the capture's objects unpack to {total:,} bytes, over {max_bytes:,}"
            )
        feed = f"info {capture.tree}\ncontents {capture.commit}\n".encode()
        out = self._git("cat-file", "--batch-command", feed=feed, env=both).stdout
        tree_info, _, rest = out.partition(b"\n")
        if tree_info.split()[1:2] != [b"tree"]:
            raise CaptureRejected(f"the captured tree {capture.tree} is not a tree")
        commit_info, _, body = rest.partition(b"\n")
        if commit_info.split()[1:2] != [b"commit"]:
            raise CaptureRejected(f"the capture's commit {capture.commit} is not a commit")
        header = _text(body).split("\n\n", 1)[0].splitlines()
        trees = [line[5:] for line in header if line.startswith("tree ")]
        parents = [line[7:] for line in header if line.startswith("parent ")]
        if trees != [capture.tree] or parents != [capture.base_commit]:
            raise CaptureRejected("the capture's commit is not the captured tree on the base")

    # --- the store's own work -----------------------------------------------------------------

    def tree_of(self, commit: str) -> str:
        """The tree id of ``commit`` (one of the store's, or of the user's it borrows)."""
        return self._out("rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}")

    def commit(self, tree: str, parent: str, message: str) -> str:
        """A commit of ``tree`` on ``parent`` as assay; its id."""
        return _text(
            self._git("commit-tree", tree, "-p", parent, "-F", "-", feed=message.encode()).stdout
        ).strip()

    def changes(self, base: str, tree: str, *, max_diff_chars: int = 2_000_000) -> ChangeSet:
        """What ``tree`` changes over ``base`` (a commit or tree), as ``git.read_changes``
        reports it: renames found, modes and line counts per path. The diff text is read as
        it streams and cut at ``max_diff_chars`` with a line saying so (:data:`DIFF_CUT`)."""
        both = self._git("diff-tree", *_DIFF_OPTIONS, "--raw", "--numstat", "-z", base, tree)
        entries, counts = _parse_raw_numstat(_text(both.stdout))  # one git, not two
        files: list[FileDelta] = []
        for old_mode, new_mode, status, paths in entries:
            added, removed, binary = counts.get(paths[-1], (0, 0, False))
            before = None if old_mode == _NO_MODE else old_mode
            after = None if new_mode == _NO_MODE else new_mode
            source = paths[0] if status == "R" else None
            if source is not None:
                files.append(
                    FileDelta(
                        path=source, kind=FileChangeKind.DELETED, binary=binary, old_mode=before
                    )
                )
            kind = {"A": FileChangeKind.CREATED, "D": FileChangeKind.DELETED}.get(
                status, FileChangeKind.CREATED if source else FileChangeKind.MODIFIED
            )
            files.append(
                FileDelta(
                    path=paths[-1],
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
        return ChangeSet(
            base_commit=base, files=files, diff=self._bounded_diff(base, tree, max_diff_chars)
        )

    def _bounded_diff(self, base: str, tree: str, limit: int) -> str:
        kept: list[str] = []
        size = 0
        for piece in self.iter_diff(base, tree):
            if size + len(piece) > limit:
                kept.append(piece[: max(limit - size, 0)])
                if not kept[-1].endswith("\n"):
                    kept.append("\n")
                kept.append(DIFF_CUT.format(limit=limit) + "\n")
                break
            kept.append(piece)
            size += len(piece)
        else:
            if _object_id(base) and _object_id(tree):  # a name could move; an id never
                self._last_patch = ((base, tree), tuple(kept))
        return "".join(kept)

    def iter_diff(self, base: str, tree: str) -> Generator[str, None, None]:
        """The whole patch of ``tree`` over ``base``, line by line as git writes it (a line
        longer than a mebibyte comes in pieces of that size); never held whole in memory.
        Stopping early ends git."""
        last = self._last_patch
        if last is not None and last[0] == (base, tree):
            yield from last[1]
            return
        argv = ["git", *_CONFIG, "diff-tree", "-p", *_DIFF_OPTIONS, base, tree]
        with tempfile.TemporaryFile() as errors:
            child = subprocess.Popen(
                argv,
                cwd=self.path,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                start_new_session=True,
            )
            timer = threading.Timer(GIT_TIMEOUT_SECONDS, child.kill)
            timer.start()
            finished = False
            try:
                assert child.stdout is not None
                while piece := child.stdout.readline(_PIECE):
                    yield _text(piece)
                finished = True
            finally:
                timer.cancel()
                if not finished:
                    child.kill()
                if child.stdout is not None:
                    child.stdout.close()
                code = child.wait()
            if code != 0:
                errors.seek(0)
                raise GitError(("diff-tree", "-p"), self.path, code, _text(errors.read(4000)))

    def publish(self, repo: Path, commit: str, branch: str) -> str:
        """Fetch ``commit`` from the store into ``repo`` as ``refs/heads/<branch>``; the
        branch. The user's hooks are off; no tag or FETCH_HEAD is written."""
        _run(
            repo,
            *("-c", "protocol.version=2", "-c", "protocol.file.allow=always"),
            *("fetch", "--quiet", "--no-tags", "--no-write-fetch-head"),
            *("--recurse-submodules=no", "--no-auto-maintenance", "--end-of-options"),
            str(self.path),
            f"+{commit}:refs/heads/{branch}",
        )
        landed = _text(
            _run(repo, "rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}").stdout
        ).strip()
        if landed != commit:
            raise GitError(("fetch", branch), repo, 1, f"{branch} is at {landed}, not {commit}")
        return branch


def _object_id(name: str) -> bool:
    """A full object id (sha1 or sha256), not a name that could point elsewhere later."""
    return len(name) in (40, 64) and all(c in "0123456789abcdef" for c in name)
