"""Shared helpers of the hostile-coder tests: a user's repository and an operator's home in a
temporary folder, the real ``assay run`` started with a planted environment, and the three
checks the issue asks for (no secret anywhere, nothing written outside the seat, the user's
``.git`` unchanged).

Every attack is a ``command`` coder whose whole script is inline in the contract: inside the
sandbox the test's own folders (under ``/tmp``) are not visible, so the coder cannot be a
script file beside the repository. Values a test looks for are never written literally in a
command (the contract is copied into ``.assay/runs/<run>/contract.json`` and the ledger), so
finding one proves the coder read or wrote it, not that assay recorded the contract.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.repo import Repo, git, make_repo

BWRAP_MISSING = shutil.which("bwrap") is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test here runs `assay run` with the contract's default `sandbox: bwrap`: without
    bubblewrap it cannot run (CI installs it, so there they all run)."""
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="bubblewrap (bwrap) is not installed: the sandbox is needed")
    for item in items:
        if BWRAP_MISSING and here in Path(str(item.path)).parents:
            item.add_marker(skip)


CODER_RAN = "CODER-RAN-42"
# Run timeouts: every coder here is a few shell commands; a hung run is a failure, not a wait.
RUN_TIMEOUT = 90.0
CODER_TIMEOUT = 30


@dataclass
class World:
    """The user's repository, the operator's home, and what they held before the run."""

    repo: Repo
    home: Path
    tmp: Path
    base: str
    git_before: dict[str, str] = field(default_factory=dict)
    home_before: dict[str, str] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.repo.root

    def contract(
        self,
        name: str,
        script: list[str],
        *,
        validators: str = '[{id: ok, kind: command, run: "true"}]',
        land: str = "branch",
        extra: str = "",
    ) -> Path:
        """A contract whose coder is the shell script of ``script``'s lines (run by ``sh -c`` in
        the seat), one attempt, no recovery. The script starts by printing ``CODER_RAN``
        (computed, so only a coder that ran prints it)."""
        lines = ['echo "CODER-RAN-$((40+2))"', *script]
        body = "".join(f"    {line}\n" for line in lines)
        text = (
            "task: Add a note.\n"
            "coder:\n"
            "  kind: command\n"
            f"  timeout_seconds: {CODER_TIMEOUT}\n"
            "  command: |\n"
            f"{body}"
            f"validators: {validators}\n"
            "budgets: {max_attempts: 1, max_recovery: 0}\n"
            f"land: {land}\n"
            f"{extra}"
        )
        return self.repo.contract(name, text)

    def commit(self, files: Mapping[str, str | bytes], message: str = "the base") -> None:
        """Commit ``files`` (path -> content) on main before the run: the base the coder starts
        from. What the run must leave unchanged (main, the user's ``.git``, the operator's
        home) is taken again from here."""
        for rel, content in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        git(self.root, "add", "--", *files)
        git(self.root, "commit", "-q", "-m", message)
        self.base = git(self.root, "rev-parse", "main")
        self.git_before = git_dir_snapshot(self.root)
        self.home_before = tree_snapshot(self.home)

    def run(
        self,
        contract: Path,
        env: Mapping[str, str] | None = None,
        *,
        args: Iterable[str] = (),
    ) -> subprocess.CompletedProcess[str]:
        """The real ``assay run --contract … --json`` as the operator: HOME is the operator's
        fake home, plus ``env`` (the planted secrets); ``args``: more options of ``run``
        (e.g. ``--progress always``)."""
        return self.repo.assay(
            "run",
            "--contract",
            str(contract),
            "--json",
            *args,
            timeout=RUN_TIMEOUT,
            HOME=str(self.home),
            **dict(env or {}),
        )

    def tree(self, rev: str = "main") -> dict[str, str]:
        """``path -> mode and blob id`` of every file of ``rev`` in the user's repository."""
        listing = git(self.root, "ls-tree", "-r", "-z", rev, strip=False)
        entries = {}
        for entry in filter(None, listing.split("\0")):
            meta, path = entry.split("\t", 1)
            mode, _, blob = meta.split()
            entries[path] = f"{mode} {blob}"
        return entries

    def blob(self, rev: str, path: str) -> bytes:
        """The bytes of ``path`` in ``rev`` of the user's repository, exactly as stored."""
        done = subprocess.run(
            ["git", "cat-file", "blob", f"{rev}:{path}"],
            cwd=self.root,
            capture_output=True,
            check=True,
        )
        return done.stdout

    @staticmethod
    def payload(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
        """The run's JSON payload; a run killed or crashed before printing it fails here."""
        assert done.returncode >= 0, f"assay was killed by signal {-done.returncode}"
        try:
            payload = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise AssertionError(
                f"assay printed no payload (exit {done.returncode}): {done.stderr[-2000:]}"
            ) from None
        assert isinstance(payload, dict)
        return payload

    def stored_payload(self, run_id: str) -> dict[str, Any]:
        """The run's payload as assay keeps it: ``assay payload show RUN --json``."""
        shown = self.repo.main("payload", "show", run_id, "--json", HOME=str(self.home))
        assert shown.returncode == 0, shown.stderr
        return self.payload(shown)

    @staticmethod
    def token() -> str:
        """A value no other test (nor any other process on the machine) holds."""
        return secrets.token_hex(8)

    @staticmethod
    def fired(payload: Mapping[str, Any]) -> list[str]:
        """The names of the halts the run fired."""
        return [h["name"] for h in payload["halts"]["fired"]]

    def logs(self) -> list[Path]:
        """Every file assay kept for the run's seats (coder and validator logs, prompts)."""
        return sorted(p for p in (self.root / ".assay" / "runs").rglob("*") if p.is_file())

    def logged(self, text: str) -> bool:
        """``text`` is in one of the run's logs."""
        return any(text in p.read_text(errors="replace") for p in self.logs())

    def assert_coder_ran(self) -> None:
        """The attack was carried out: the coder started and printed its first line (a test
        whose coder never ran would pass for the wrong reason)."""
        assert self.logged(CODER_RAN), "the hostile coder never ran: the test proves nothing"

    def find(
        self,
        values: Iterable[str],
        tops: Iterable[Path] | None = None,
        *,
        skip: Iterable[Path] = (),
        done: subprocess.CompletedProcess[str] | None = None,
    ) -> list[str]:
        """Where ``values`` occur under ``tops`` (default: the whole test folder: the user's
        repository, ``.assay/``, the operator's home) and in the run's stdout/stderr."""
        named = {} if done is None else {"stdout": done.stdout, "stderr": done.stderr}
        return find_values(values, tops or [self.tmp], skip=skip, outputs=named)

    def home_changes(self) -> list[str]:
        """What changed in the operator's home since the run began (empty: nothing)."""
        return snapshot_diff(self.home_before, tree_snapshot(self.home))

    def assert_git_unchanged(self, *, merged: bool) -> None:
        """The user's ``.git`` is as it was, and main moved only if the run merged."""
        changed = snapshot_diff(self.git_before, git_dir_snapshot(self.root))
        assert not changed, "the user's .git changed:\n" + "\n".join(changed)
        if merged:
            assert git(self.root, "rev-parse", "main^") == self.base
        else:
            assert git(self.root, "rev-parse", "main") == self.base, "main moved, not merged"
        assert git(self.root, "symbolic-ref", "HEAD") == "refs/heads/main"


@pytest.fixture
def world(tmp_path: Path) -> World:
    repo = make_repo(tmp_path)
    # The operator's identity lives in the repository's config (HOME is a fake, empty home):
    # a landing commit takes its author from there, and an attacker's `git config user.name`
    # would change it.
    git(repo.root, "config", "user.name", "Ada Operator")
    git(repo.root, "config", "user.email", "ada@example.org")
    # assay adds `.assay/` to info/exclude on its first run; written beforehand, so that file
    # too must stay byte-for-byte the same.
    exclude = repo.root / ".git" / "info" / "exclude"
    exclude.write_text(exclude.read_text() + ".assay/\n")
    home = tmp_path / "operator-home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".bashrc").write_text("# the operator's shell start-up\n")
    (home / ".gitconfig").write_text("[user]\n\tname = Ada Operator\n")
    world = World(repo=repo, home=home, tmp=tmp_path, base=git(repo.root, "rev-parse", "main"))
    world.git_before = git_dir_snapshot(repo.root)
    world.home_before = tree_snapshot(home)
    return world


# -- where a value may have gone ----------------------------------------------------------------


def git_dirs(top: Path) -> list[Path]:
    """Every git directory under ``top``: the user's ``.git``, a seat's own repository, a bare
    clone. Their objects are zlib-compressed, so they are read through git, not grepped."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        if "HEAD" in filenames and "objects" in dirnames:
            found.append(Path(dirpath))
    return found


def all_objects(git_dir: Path) -> bytes:
    """The content of every object of a repository, reachable or not (a blocked candidate's
    commit stays in the object store after its branch is deleted)."""
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def find_values(
    values: Iterable[str],
    tops: Iterable[Path],
    *,
    skip: Iterable[Path] = (),
    outputs: Mapping[str, str] | None = None,
) -> list[str]:
    """Where each of ``values`` occurs: every regular file under ``tops`` (symlinks are not
    followed: a coder's link to /etc would otherwise be read as ours), every object of every
    repository under them, and the named ``outputs`` (the run's stdout, stderr). ``skip``:
    paths (files or folders) where a value is expected, e.g. the planted key itself."""
    wanted = [v for v in values if v]
    skipped = [p.resolve() for p in skip]
    hits: list[str] = []

    def check(blob: bytes, where: str) -> None:
        hits.extend(f"{v!r} in {where}" for v in wanted if v.encode() in blob)

    for top in tops:
        for dirpath, _, filenames in os.walk(top, followlinks=False):
            for name in filenames:
                path = Path(dirpath) / name
                if any(path.resolve() == s or s in path.resolve().parents for s in skipped):
                    continue
                if path.is_symlink() or not path.is_file():
                    continue
                try:
                    check(path.read_bytes(), str(path))
                except OSError:
                    continue
        for git_dir in git_dirs(top):
            if not any(s == git_dir.resolve() or s in git_dir.resolve().parents for s in skipped):
                check(all_objects(git_dir), f"an object of {git_dir}")
    for name, text in (outputs or {}).items():
        check(text.encode(), name)
    return hits


# -- the user's .git, byte for byte ------------------------------------------------------------

# What assay itself may change in the user's git directory during a run; everything else (the
# config, every hook, info/, HEAD, description, packed-refs, other refs) must end byte-for-byte
# and mode-for-mode as it began:
#   objects/            the candidate assay brought in and the landing commit (content-addressed;
#                       what they hold is checked separately, e.g. for a secret)
#   refs/heads/assay/   the run's candidate branches (created, then kept or deleted)
#   refs/heads/main     the base branch: moved by a merge landing only (checked by each test:
#                       unchanged unless the run merged)
#   logs/               the reflogs of those two ref moves
#   index               the checkout of main, updated by a merge landing (and git's stat cache)
#   ORIG_HEAD FETCH_HEAD COMMIT_EDITMSG AUTO_MERGE   written by git's own fetch/merge/commit
#   worktrees/          git's bookkeeping of linked worktrees (today's seats; none once seats
#                       are repositories of their own)
#   assay-*.lock        assay's own lock files (serialising its worktree bookkeeping)
#   packed-refs         git (2.39) writes it, empty, when assay deletes a seat branch: only its
#                       lines for the refs above may change, every other packed ref must not
_ASSAY_MAY_CHANGE_DIRS = ("objects", "refs/heads/assay", "logs", "worktrees")
_ASSAY_MAY_CHANGE_FILES = frozenset(
    {"refs/heads/main", "index", "ORIG_HEAD", "FETCH_HEAD", "COMMIT_EDITMSG", "AUTO_MERGE"}
)
_ASSAY_REFS = ("refs/heads/main", "refs/heads/assay/")


def _assay_may_change(rel: str) -> bool:
    if rel in _ASSAY_MAY_CHANGE_FILES or rel == "packed-refs":
        return True
    if "/" not in rel and rel.startswith("assay-") and rel.endswith(".lock"):
        return True
    return any(rel == d or rel.startswith(d + "/") for d in _ASSAY_MAY_CHANGE_DIRS)


def tree_snapshot(top: Path, keep: Any = None) -> dict[str, str]:
    """``relative path -> mode and sha256`` (a symlink: its target) of everything under ``top``,
    folders included (an empty ``hooks/evil/`` is a change too)."""
    snap: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = path.relative_to(top).as_posix()
            if keep is not None and not keep(rel):
                continue
            info = path.lstat()
            mode = f"{stat.S_IMODE(info.st_mode):o}"
            if stat.S_ISLNK(info.st_mode):
                snap[rel] = f"link -> {os.readlink(path)}"
            elif stat.S_ISDIR(info.st_mode):
                snap[rel] = f"dir {mode}"
            else:
                snap[rel] = f"file {mode} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return snap


def git_dir_snapshot(root: Path) -> dict[str, str]:
    """Every file and folder of the user's ``.git`` except what assay itself may change, and
    the packed refs other than assay's."""
    snap = tree_snapshot(root / ".git", keep=lambda rel: not _assay_may_change(rel))
    packed = root / ".git" / "packed-refs"
    lines = packed.read_text().splitlines() if packed.exists() else []
    others = [
        line
        for line in lines
        if not line.startswith("#") and not any(ref in line for ref in _ASSAY_REFS)
    ]
    snap["packed-refs (other than assay's)"] = "\n".join(others)
    return snap


def snapshot_diff(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """What changed between two snapshots, one line per path (empty: byte-for-byte equal)."""
    lines = []
    for rel in sorted(set(before) | set(after)):
        if before.get(rel) != after.get(rel):
            lines.append(f"{rel}: {before.get(rel, 'absent')} -> {after.get(rel, 'absent')}")
    return lines
