"""The engine's candidate store: captures imported through a quarantine (hostile packs refused),
the change read from two trees as the seat read it before, checkouts byte for byte."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.seat_repo import candidate_change, collect, make_repo, make_seat, sh, write

from assay.adapters import git_links, seats
from assay.adapters.candidates import DIFF_CUT, CandidateStore, CaptureRejected
from assay.adapters.capture import Capture

pytestmark = pytest.mark.usefixtures("isolated_git")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo",
        {
            ".gitattributes": "* text=auto\n*.crlf text eol=crlf\n*.id ident\n",
            "a.txt": "one\ntwo\nthree\n",
            "old_name.py": "".join(f"line {n}\n" for n in range(40)),
            "gone.txt": "bye\n",
            "run.sh": "#!/bin/sh\n",
            "logo.bin": bytes(range(256)),
        },
    )


@pytest.fixture
def store(repo: Path, tmp_path: Path) -> CandidateStore:
    return CandidateStore(tmp_path / "candidates.git", seats.object_stores(repo))


def base_of(repo: Path) -> str:
    return sh(repo, "rev-parse", "HEAD").decode().strip()


def captured(repo: Path, store: CandidateStore, worktree: Path, out: Path) -> Capture:
    stores = [*seats.object_stores(repo), store.objects]
    got = collect(worktree, base_of(repo), stores, out)
    assert got.ok, got
    return got


def edit(seat: Path) -> None:
    """A bit of everything: an edit, a rename with an edit, a deletion, a new file, a mode
    change, a binary change, a symlink and a CRLF file."""
    write(seat, {"a.txt": "one\nTWO\nthree\nfour\n", "new.txt": "fresh\n", "win.crlf": "x\ny\n"})
    os.rename(seat / "old_name.py", seat / "new_name.py")
    with (seat / "new_name.py").open("a") as handle:
        handle.write("extra\n")
    (seat / "gone.txt").unlink()
    (seat / "run.sh").chmod(0o755)
    (seat / "logo.bin").write_bytes(bytes(range(255, -1, -1)))
    (seat / "link").symlink_to("a.txt")


def test_the_captured_change_is_the_one_git_itself_stages(
    repo: Path, store: CandidateStore, tmp_path: Path
) -> None:
    old_seat, new_seat = make_seat(repo, 1), make_seat(repo, 2)
    edit(old_seat.path)
    edit(new_seat.path)
    before, _ = candidate_change(old_seat.path, base_of(repo))
    tree = store.import_pack(
        captured(repo, store, new_seat.path, tmp_path / "out"), max_objects=100, max_bytes=10**6
    )
    after = store.changes(base_of(repo), tree)
    assert after.files == before.files
    assert after.diff == before.diff
    kinds = {f.path: (f.kind.value, f.old_mode, f.new_mode) for f in after.files}
    assert kinds["new_name.py"] == ("created", "100644", "100644")
    assert kinds["old_name.py"][0] == "deleted"
    assert kinds["run.sh"] == ("modified", "100644", "100755")
    assert kinds["link"] == ("created", None, "120000")
    assert git_links.symlinks_at(store.path, tree) == {"link": "a.txt"}


def test_import_quarantines_then_moves_the_pack_in(
    repo: Path, store: CandidateStore, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    write(seat.path, {"a.txt": "changed\n"})
    capture = captured(repo, store, seat.path, tmp_path / "out")
    tree = store.import_pack(capture, max_objects=100, max_bytes=10**6)
    assert tree == capture.tree
    packs = list((store.objects / "pack").iterdir())
    assert sorted(p.suffix for p in packs) == [".idx", ".pack"]
    assert not [p for p in store.path.iterdir() if p.name.startswith("quarantine-")]
    commit = store.commit(tree, base_of(repo), "assay: attempt 1, seat 1")
    head = sh(store.path, "cat-file", "commit", commit).decode()
    assert f"tree {tree}\nparent {base_of(repo)}\n" in head and "assay: attempt 1" in head
    # A later capture borrows the store: its earlier objects need not cross again.
    write(seat.path, {"b.txt": "more\n"})
    again = captured(repo, store, seat.path, tmp_path / "out2")
    assert store.import_pack(again, max_objects=100, max_bytes=10**6) == again.tree


def hostile(
    repo: Path, tmp_path: Path, entries: list[tuple[str, str, str]], parent: str | None = None
) -> Capture:
    """A capture whose pack holds a tree of ``entries`` (mode, name, content), made by hand
    (git's own commands refuse such names), on ``parent`` (the base by default)."""
    scratch = tmp_path / "scratch.git"
    if not scratch.exists():
        sh(tmp_path, "init", "-q", "--bare", str(scratch))
        (scratch / "objects" / "info" / "alternates").write_text(
            f"{seats.object_stores(repo)[0]}\n"
        )
    body = b""
    for mode, name, content in sorted(entries, key=lambda e: e[1]):
        blob = sh(scratch, "hash-object", "-w", "--stdin", feed=content.encode()).decode().strip()
        body += f"{mode} {name}\0".encode() + bytes.fromhex(blob)
    tree = (
        sh(scratch, "hash-object", "-w", "--literally", "-t", "tree", "--stdin", feed=body)
        .decode()
        .strip()
    )
    base = base_of(repo)
    commit = sh(scratch, "commit-tree", tree, "-p", parent or base, "-m", "x").decode().strip()
    pack = tmp_path / f"hostile-{tree[:8]}.pack"
    with pack.open("wb") as out:
        subprocess.run(
            ["git", "pack-objects", "--revs", "--stdout", "-q"],
            cwd=scratch,
            input=f"{commit}\n^{base}\n".encode(),
            stdout=out,
            check=True,
        )
    return Capture(base_commit=base, tree=tree, commit=commit, pack=pack)


@pytest.mark.parametrize(
    ("entries", "limits", "why"),
    [
        ([("100644", ".git", "[core]\n")], {}, "hasDotgit"),
        ([("100644", ".GIT", "[core]\n")], {}, "hasDotgit"),
        ([("100644", "..", "x")], {}, "hasDotdot"),
        (
            [("100644", f"f{n}", str(n)) for n in range(20)],
            {"max_objects": 10},
            "22 objects, over 10",
        ),
        ([("100644", "big", "x" * 5000)], {"max_bytes": 200}, "bytes, over 200"),
    ],
)
def test_a_hostile_pack_is_rejected_and_leaves_nothing(
    repo: Path,
    store: CandidateStore,
    tmp_path: Path,
    entries: list[tuple[str, str, str]],
    limits: dict[str, int],
    why: str,
) -> None:
    capture = hostile(repo, tmp_path, entries)
    with pytest.raises(CaptureRejected) as rejected:
        store.import_pack(capture, **{"max_objects": 100, "max_bytes": 10**6, **limits})
    assert why in rejected.value.reason
    assert list((store.objects / "pack").iterdir()) == []
    assert not [p for p in store.path.iterdir() if p.name.startswith("quarantine-")]


def test_a_commit_that_is_not_on_the_base_or_a_bomb_is_rejected(
    repo: Path, store: CandidateStore, tmp_path: Path
) -> None:
    other = hostile(repo, tmp_path, [("100644", "x", "x")])
    elsewhere = hostile(repo, tmp_path, [("100644", "y", "y")], parent=other.commit)
    with pytest.raises(CaptureRejected, match="not the captured tree on the base"):
        store.import_pack(elsewhere, max_objects=100, max_bytes=10**6)
    blob = sh(tmp_path, "hash-object", "--stdin", feed=b"x").decode().strip()
    named = Capture(base_commit=other.base_commit, tree=blob, commit=other.commit, pack=other.pack)
    with pytest.raises(CaptureRejected, match=f"the captured tree {blob} is not a tree"):
        store.import_pack(named, max_objects=100, max_bytes=10**6)
    # Small as a pack, big unpacked.
    bomb = hostile(repo, tmp_path, [("100644", "zeros", "\0" * 2_000_000)])
    assert bomb.pack is not None and bomb.pack.stat().st_size < 100_000
    with pytest.raises(CaptureRejected, match="unpack to 2,000"):
        store.import_pack(bomb, max_objects=100, max_bytes=100_000)
    failed = Capture(base_commit=base_of(repo), over_budget="a file of 9 bytes over 1")
    with pytest.raises(CaptureRejected, match="a file of 9 bytes over 1"):
        store.import_pack(failed, max_objects=100, max_bytes=10**6)
    link = tmp_path / "link.pack"
    link.symlink_to(bomb.pack)
    with pytest.raises(CaptureRejected, match="cannot be opened"):
        store.import_pack(
            Capture(base_commit=bomb.base_commit, tree=bomb.tree, commit=bomb.commit, pack=link),
            max_objects=100,
            max_bytes=10**7,
        )


def test_a_checkout_of_a_candidate_is_byte_exact_whatever_the_attributes_say(
    repo: Path, store: CandidateStore, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    write(seat.path, {"lf.crlf": "a\nb\n", "win.txt": b"c\r\nd\r\n", "x.id": "$Id$\n"})
    (seat.path / "run.sh").chmod(0o755)
    (seat.path / "link").symlink_to("../../outside")
    tree = store.import_pack(
        captured(repo, store, seat.path, tmp_path / "out"), max_objects=100, max_bytes=10**6
    )
    commit = store.commit(tree, base_of(repo), "candidate")
    dest = tmp_path / "checkouts" / "v1"
    stores = seats.object_stores(repo)
    seats.create_seat(repo, dest, commit, "check", store=stores[0], borrows=(store.objects,))
    assert (dest / "lf.crlf").read_bytes() == b"a\nb\n"  # eol=crlf converted nothing
    assert (dest / "win.txt").read_bytes() == b"c\r\nd\r\n"
    assert (dest / "x.id").read_bytes() == b"$Id$\n"  # ident expanded nothing
    assert os.readlink(dest / "link") == "../../outside"
    assert os.stat(dest / "run.sh").st_mode & 0o111
    assert (dest / "logo.bin").read_bytes() == bytes(range(256))


def test_a_big_diff_is_cut_and_iter_diff_streams_it(
    repo: Path, store: CandidateStore, tmp_path: Path
) -> None:
    seat = make_seat(repo)
    write(seat.path, {"huge.txt": "".join(f"row {n}\n" for n in range(300_000))})
    write(seat.path, {"one-line.txt": "z" * 3_000_000})
    capture = captured(repo, store, seat.path, tmp_path / "out")
    tree = store.import_pack(capture, max_objects=100, max_bytes=10**8)
    change = store.changes(base_of(repo), tree, max_diff_chars=100_000)
    assert len(change.diff) < 100_000 + 200
    assert change.diff.endswith(DIFF_CUT.format(limit=100_000) + "\n")
    assert {f.path for f in change.files} == {"huge.txt", "one-line.txt"}
    assert next(f for f in change.files if f.path == "huge.txt").added_lines == 300_000
    pieces = store.iter_diff(base_of(repo), tree)
    first = next(pieces)
    assert first.startswith("diff --git a/huge.txt")
    pieces.close()  # git is stopped, not drained
    longest = max(len(piece) for piece in store.iter_diff(base_of(repo), tree))
    assert longest == 1024 * 1024  # the 3 MB line comes in pieces
    total = sum(len(p) for p in store.iter_diff(base_of(repo), tree))
    assert total > 5_000_000


def test_the_patch_a_change_was_made_of_is_streamed_again_without_git(
    repo: Path, store: CandidateStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The secret scan streams the patch the change was just read from: the same pieces as
    git's, and no second git; a name (which could move) is always asked of git."""
    seat = make_seat(repo)
    edit(seat.path)
    tree = store.import_pack(
        captured(repo, store, seat.path, tmp_path / "out"), max_objects=100, max_bytes=10**6
    )
    base = base_of(repo)
    from_git = list(CandidateStore(store.path, store.borrows).iter_diff(base, tree))
    change = store.changes(base, tree)
    assert change.diff == "".join(from_git)

    def no_git(*args: object, **kwargs: object) -> None:
        raise AssertionError("git was started again")

    with monkeypatch.context() as patched:
        patched.setattr(subprocess, "Popen", no_git)
        assert list(store.iter_diff(base, tree)) == from_git
    store.changes(base[:12], tree)  # an abbreviated id is a name
    with monkeypatch.context() as patched:
        patched.setattr(subprocess, "Popen", no_git)
        with pytest.raises(AssertionError, match="started again"):
            list(store.iter_diff(base[:12], tree))


def test_publish_fetches_the_commit_into_the_user_s_repository(
    repo: Path, store: CandidateStore, tmp_path: Path
) -> None:
    hook = repo / ".git" / "hooks" / "reference-transaction"
    marker = tmp_path / "hook-ran"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    seat = make_seat(repo)
    write(seat.path, {"a.txt": "published\n"})
    tree = store.import_pack(
        captured(repo, store, seat.path, tmp_path / "out"), max_objects=100, max_bytes=10**6
    )
    commit = store.commit(tree, base_of(repo), "assay: candidate")
    assert store.publish(repo, commit, "assay/r1/seat-1") == "assay/r1/seat-1"
    assert sh(repo, "rev-parse", "assay/r1/seat-1").decode().strip() == commit
    assert sh(repo, "show", "assay/r1/seat-1:a.txt") == b"published\n"
    assert not marker.exists() and not (repo / ".git" / "FETCH_HEAD").exists()


def test_the_store_ignores_the_operator_s_global_attributes(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A global ``* -diff`` would hide every line from the secret scan."""
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "attributes").write_text("* -diff\n")
    monkeypatch.setenv("HOME", str(home))
    store = CandidateStore(tmp_path / "candidates.git", seats.object_stores(repo))
    seat = make_seat(repo)
    write(seat.path, {"a.txt": "AKIA-LIKE-LINE\n"})
    tree = store.import_pack(
        captured(repo, store, seat.path, tmp_path / "out"), max_objects=100, max_bytes=10**6
    )
    assert "+AKIA-LIKE-LINE" in store.changes(base_of(repo), tree).diff
