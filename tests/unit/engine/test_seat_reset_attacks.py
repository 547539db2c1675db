"""A seat reset in place for a check, attacked: whatever the coder or an earlier check left
(a change git's stat check cannot see, a folder's bits or ACL, a tree deeper than Python's
recursion limit, a ``.git`` pointing elsewhere, nested repositories), the seat holds exactly
what a fresh checkout of the candidate holds."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from support.repo import git, make_repo
from support.seat_trees import forge, listing

from assay.adapters.seats import remove_tree
from assay.core.contract import Contract
from assay.engine.effects import RunPlan
from assay.engine.local.seating import Seating


def plan_for(root: Path, **contract: Any) -> RunPlan:
    task = Contract(task="Make slugify keep digits.", sandbox="none", **contract)
    return RunPlan("t1", "r1", "r1", task, root, git(root, "rev-parse", "HEAD"), "main")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path).root


def captured(seating: Seating, plan: RunPlan) -> str:
    capture = seating.capture(plan, 1)
    assert capture.ok, capture
    return seating.import_capture(plan, 1, 1, capture)


def commit_path(root: Path, path: str, mode: str = "100644", oid: str | None = None) -> None:
    """Commit ``path`` (a blob, or ``oid`` as is: a gitlink) in ``root`` without writing it."""
    if oid is None:
        blob = root.parent / "blob"
        blob.write_text("x\n")
        oid = git(root, "hash-object", "-w", str(blob))
    git(root, "update-index", "--add", "--cacheinfo", f"{mode},{oid},{path}")
    git(root, "commit", "-qm", path)


def test_a_change_made_the_second_the_seat_was_made_is_undone_though_git_cannot_see_it(
    root: Path, tmp_path: Path
) -> None:
    # Git compares whole seconds of ctime, and bytes only: within the second the seat was made,
    # a hard link, a chmod that keeps the exec bit or an attribute leaves its stat data as the
    # kept index has it. (A link out of the seat is a handle to write the checked tree with.)
    seating = Seating(root / ".assay", {})
    plan = plan_for(root)
    time.sleep(1 - time.time() % 1)  # the start of a second: all below happens within it
    seat = seating.prepare(plan, 1)
    handle = tmp_path / "handle"
    os.link(seat.path / "src" / "slug.py", handle)
    (seat.path / "tests" / "test_slug.py").chmod(0o666)
    os.setxattr(seat.path / "tests" / "check_digits.py", "user.planted", b"1")
    forge(seat.path / ".gitignore", bytes(reversed((seat.path / ".gitignore").read_bytes())))
    assert time.time() % 1 < 0.9, "the second ended before the seat was changed"
    commit = captured(seating, plan)
    reference = listing(seating.checkout(plan, 1, commit, in_place=False).path)
    checkout = seating.checkout(plan, 1, commit)
    assert checkout.path == seat.path and listing(seat.path) == reference
    assert os.listxattr(seat.path / "tests" / "check_digits.py") == []
    handle.write_text("written through a link kept\n")
    assert listing(seat.path) == reference


def test_the_folders_kept_are_as_a_fresh_checkout_makes_them(root: Path) -> None:
    # Git writes no folder it finds, so their bits and ACLs are the coder's: a default ACL
    # gives every file git writes in the folder other bits (umask ignored).
    seating = Seating(root / ".assay", {})
    plan = plan_for(root)
    seat = seating.prepare(plan, 1)
    (seat.path / "src" / "slug.py").write_text("def slugify(text):\n    return text\n")
    commit = captured(seating, plan)
    reference = listing(seating.checkout(plan, 1, commit, in_place=False).path)
    all_granted = struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, 7, 0xFFFFFFFF) for tag in (0x01, 0x04, 0x20)
    )  # user, group, others: rwx
    os.setxattr(seat.path / "src", "system.posix_acl_default", all_granted)
    os.setxattr(seat.path / "src", "user.planted", b"1")
    (seat.path / "src").chmod(0o7777)
    (seat.path / "tests").chmod(0o700)
    seat.path.chmod(0o777)
    checkout = seating.checkout(plan, 1, commit)
    assert checkout.path == seat.path and listing(seat.path) == reference
    assert os.listxattr(seat.path / "src") == []


def test_a_tree_deeper_than_pythons_recursion_limit_is_reset_too(root: Path) -> None:
    commit_path(root, "/".join(["d"] * 1000) + "/f")
    seating = Seating(root / ".assay", {})
    plan = plan_for(root, budgets={"max_depth": 1024})
    seat = seating.prepare(plan, 1)
    try:
        commit = captured(seating, plan)
        reference = listing(seating.checkout(plan, 1, commit, in_place=False).path)
        (seat.path / "d" / "d" / "planted.py").write_text("x")
        checkout = seating.checkout(plan, 1, commit)
        assert checkout.path == seat.path and listing(seat.path) == reference
    finally:  # pytest's own clean-up recurses
        assert remove_tree(root / ".assay").complete


def test_a_git_that_is_a_link_or_a_pointer_elsewhere_is_removed_never_followed(
    root: Path, tmp_path: Path
) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root)
    seat = seating.prepare(plan, 1)
    commit = captured(seating, plan)
    reference = listing(seating.checkout(plan, 1, commit, in_place=False).path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "HEAD").write_text("ref: refs/heads/main\n")
    for planted in ("link", f"gitdir: {elsewhere}\n"):
        assert remove_tree(seat.path / ".git").complete
        if planted == "link":
            (seat.path / ".git").symlink_to(elsewhere)
        else:
            (seat.path / ".git").write_text(planted)
        checkout = seating.checkout(plan, 1, commit)
        assert checkout.path == seat.path and listing(seat.path) == reference
        assert (seat.path / ".git").is_dir() and not (seat.path / ".git").is_symlink()
        assert [p.name for p in elsewhere.iterdir()] == ["HEAD"]


def test_nested_repositories_a_gitlinks_folder_and_odd_names_go(root: Path) -> None:
    commit_path(root, "vendor/lib", "160000", "1" * 40)  # a submodule: an empty folder
    seating = Seating(root / ".assay", {})
    plan = plan_for(root)
    seat = seating.prepare(plan, 1)
    commit = captured(seating, plan)
    reference = listing(seating.checkout(plan, 1, commit, in_place=False).path)
    assert reference["vendor/lib"] == ("folder", reference["vendor"][1])  # type: ignore[index]
    git(seat.path / "vendor" / "lib", "init", "-q")
    (seat.path / "vendor" / "lib" / "planted.py").write_text("x")
    git(seat.path / "src", "init", "-q")
    slug = seat.path / "src" / "slug.py"
    slug.unlink()
    slug.mkdir()  # a module replaced by a package
    (slug / "__init__.py").write_text("X = 1\n")
    (seat.path / "src" / "namespace").mkdir()
    (seat.path / "src" / "SLUG.py").write_text("x")
    (seat.path / os.fsdecode(b"caf\xe9\nname")).write_text("x")
    checkout = seating.checkout(plan, 1, commit)
    assert checkout.path == seat.path and listing(seat.path) == reference


def test_a_kept_index_cut_short_or_gone_still_gives_the_candidates_tree(root: Path) -> None:
    seating = Seating(root / ".assay", {})
    plan = plan_for(root)
    seat = seating.prepare(plan, 1)
    commit = captured(seating, plan)
    reference = listing(seating.checkout(plan, 1, commit, in_place=False).path)
    slug = seat.path / "src" / "slug.py"
    kept = root / ".assay" / "seats" / "r1" / "seat-1.index"
    forge(slug, b"#" * slug.stat().st_size)
    kept.write_bytes(kept.read_bytes()[:40])  # git reads it as no index: every file written
    assert listing(seating.checkout(plan, 1, commit).path) == reference
    forge(slug, b"#" * slug.stat().st_size)
    kept.unlink()
    checkout = seating.checkout(plan, 1, commit)
    assert checkout.path != seat.path and listing(checkout.path) == reference
