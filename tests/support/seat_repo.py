"""A user repository, a seat of it and the collector run in-process: the capture tests' ground."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from assay.adapters import collector, git, seats
from assay.adapters.candidates import CandidateStore
from assay.adapters.capture import Capture, CaptureLimits, collector_args, read_manifest
from assay.core.changes import ChangeSet

FileSpec = str | bytes


def sh(cwd: Path, *args: str, feed: bytes | None = None) -> bytes:
    """``git *args`` in ``cwd`` as a test user (the test's own git, not assay's)."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        input=feed,
        capture_output=True,
        check=True,
    ).stdout


def write(root: Path, files: Mapping[str, FileSpec]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


def make_repo(root: Path, files: Mapping[str, FileSpec]) -> Path:
    """A repository at ``root`` with ``files`` in one commit on ``main`` (those its own
    ``.gitignore`` matches too)."""
    root.mkdir(parents=True)
    sh(root, "init", "-q", "-b", "main")
    write(root, files)
    sh(root, "add", "-A", "-f")
    sh(root, "commit", "-q", "-m", "base")
    git.ensure_excluded(root)
    return root


def make_seat(repo: Path, n: int = 1) -> seats.Seat:
    path = seats.seat_path(repo / ".assay", "r1", f"seat-{n}")
    return seats.create_seat(repo, path, git.head_commit(repo), git.seat_branch("r1", f"seat-{n}"))


def collect(
    worktree: Path,
    base: str,
    stores: list[Path],
    out_dir: Path,
    limits: CaptureLimits | None = None,
) -> Capture:
    """The collector run in this process (unconfined), its manifest read as the host reads it."""
    limits = limits or CaptureLimits()
    out_dir.mkdir(parents=True)
    args = collector_args(worktree, base, stores, out_dir, limits)
    assert collector.main(["collector", args]) == 0
    return read_manifest(out_dir, base)


def tree_entries(git_dir: Path, tree: str) -> dict[str, tuple[str, bytes]]:
    """Every entry of ``tree`` in the repository ``git_dir`` (its alternates too): path ->
    (mode, the blob's bytes; a gitlink's commit id)."""
    env = {**os.environ, "GIT_DIR": str(git_dir)}
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "-z", "--full-tree", tree],
        env=env,
        capture_output=True,
        check=True,
    ).stdout
    entries: dict[str, tuple[str, bytes]] = {}
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, oid = meta.decode().split()
        if kind == "blob":
            data = subprocess.run(
                ["git", "cat-file", "blob", oid], env=env, capture_output=True, check=True
            ).stdout
        else:
            data = oid.encode()
        entries[os.fsdecode(path)] = (mode, data)
    return entries


def candidate_change(root: Path, base: str) -> tuple[ChangeSet, str]:
    """What the work tree at ``root`` holds, as a candidate commit on ``base`` (staged by the
    test's own git), and its change as the engine reads it: from the two trees, in a candidate
    store borrowing ``root``'s objects."""
    sh(root, "add", "-A")
    tree = sh(root, "write-tree").decode().strip()
    commit = sh(root, "commit-tree", tree, "-p", base, "-m", "candidate").decode().strip()
    store = CandidateStore(root.parent / f"{root.name}.candidates.git", seats.object_stores(root))
    return store.changes(base, commit), commit
