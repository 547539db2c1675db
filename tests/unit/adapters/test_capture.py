"""The host's side of a capture: the collector run in a real bwrap sandbox, its manifest read
with limits and every field checked; a timeout, a crash or a forged manifest is an error."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from support.seat_repo import make_repo, make_seat, sh, tree_entries, write

from assay.adapters import capture as capture_module
from assay.adapters import seats
from assay.adapters.capture import Capture, CaptureLimits, capture_seat, read_manifest
from assay.adapters.sandbox import bwrap_problem
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.vocab import NetworkMode, SandboxMode

PATH = os.environ.get("PATH", "/usr/bin:/bin")


pytestmark = pytest.mark.usefixtures("isolated_git")


@pytest.fixture(autouse=True)
def _bwrap_works() -> None:
    assert bwrap_problem() is None, "these tests need a working bubblewrap"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {".gitattributes": "* text=auto\n", "a.txt": "a\n"})


def spec(worktree: Path, out_dir: Path, stores: tuple[Path, ...], home: Path) -> SandboxSpec:
    """The collector's confinement: the seat and the stores readable, only ``out_dir``
    writable, no network, an empty home."""
    return SandboxSpec(
        mode=SandboxMode.BWRAP,
        network=NetworkMode.NONE,
        writable=(out_dir,),
        readable=(worktree, *stores),
        home=home,
    )


def run(repo: Path, worktree: Path, out: Path, **kw: object) -> Capture:
    stores = seats.object_stores(repo)
    base = sh(repo, "rev-parse", "HEAD").decode().strip()
    options: dict[str, object] = {
        "sandbox": spec(worktree, out, stores, out.with_name(out.name + ".home")),
        "env": {"PATH": PATH},
        "timeout": 60.0,
        "limits": CaptureLimits(),
    }
    options.update(kw)
    return capture_seat(
        worktree=worktree,
        base_commit=base,
        stores=stores,
        out_dir=out,
        **options,  # type: ignore[arg-type]
    )


def test_the_collector_captures_the_seat_inside_bwrap(repo: Path, tmp_path: Path) -> None:
    seat = make_seat(repo)
    write(seat.path, {"win.txt": b"x\r\ny\r\n", "data/.gitignore": "*.tmp\n", "data/t.tmp": "t"})
    (seat.path / "link").symlink_to("a.txt")
    hour_ago = time.time() - 3600  # not "racily clean": git trusts its stat data
    os.utime(seat.path / "a.txt", (hour_ago, hour_ago))
    out = tmp_path / "capture"
    out.mkdir()
    (out / "stale").write_text("left by a run that died")
    got = run(repo, seat.path, out)
    assert got.ok, got
    assert got.pack == out / "candidate.pack" and got.pack.is_file()
    assert got.ignored == ("data/t.tmp",) and got.ignored_count == 1
    assert not (out / "stale").exists()  # the folder was made afresh
    entries = tree_entries(out / "git", got.tree or "")
    assert entries["win.txt"] == ("100644", b"x\r\ny\r\n")
    assert entries["link"] == ("120000", b"a.txt")
    assert (tmp_path / "capture.log").is_file()  # the log is beside it, not in it
    # Only new objects are written: an unchanged file's blob stays in the (read-only) store.
    unchanged = sh(repo, "rev-parse", "HEAD:a.txt").decode().strip()
    assert not (out / "git" / "objects" / unchanged[:2] / unchanged[2:]).exists()


def test_the_collector_cannot_write_the_seat(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook the collector would run (it runs none) could not alter the work tree either:
    it is read-only inside the sandbox. Proven with the collector swapped for a writer."""
    seat = make_seat(repo)
    out = tmp_path / "capture"
    writer = seat.path / "writer.py"  # readable inside: the seat is bound
    writer.write_text(
        "import json, sys, pathlib\n"
        "args = json.loads(sys.argv[1])\n"
        "try:\n"
        "    (pathlib.Path(args['worktree']) / 'planted').write_text('x')\n"
        "except OSError:\n"
        "    pass\n"
        "raise SystemExit(3)\n"
    )

    class Swapped:
        __file__ = str(writer)
        MANIFEST = "manifest.json"

    monkeypatch.setattr(capture_module, "collector", Swapped)
    got = run(repo, seat.path, out)
    assert got.error is not None and got.error.startswith("the collector failed (exit 3)")
    assert not (seat.path / "planted").exists()


def test_the_operator_s_global_ignore_is_not_applied(repo: Path, tmp_path: Path) -> None:
    ignore = tmp_path / "global-ignore"
    ignore.write_text("*.py\n")
    config = tmp_path / "operator.gitconfig"
    config.write_text(f"[core]\n\texcludesFile = {ignore}\n")
    seat = make_seat(repo)
    write(seat.path, {"kept.py": "x = 1\n"})
    env = {"PATH": PATH, "GIT_CONFIG_GLOBAL": str(config), "HOME": str(tmp_path)}
    got = run(repo, seat.path, tmp_path / "capture", env=env, sandbox=None)
    assert got.ok, got
    assert "kept.py" in tree_entries(tmp_path / "capture" / "git", got.tree or "")
    assert got.ignored == ()


def test_a_timeout_or_a_crash_is_an_error_never_an_exception(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seat = make_seat(repo)
    got = run(repo, seat.path, tmp_path / "slow", timeout=0.001)
    assert got.error == "the collector timed out after 0.001 s" and not got.ok
    monkeypatch.setattr(sys, "executable", "/bin/false")
    got = run(repo, seat.path, tmp_path / "crash", sandbox=None)
    assert got.error is not None and got.error.startswith("the collector failed (exit 1)")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    got = run(repo, seat.path, tmp_path / "gone", sandbox=None)
    assert got.error is not None and got.error.startswith("the collector could not start")


def test_over_budget_comes_back_as_over_budget(repo: Path, tmp_path: Path) -> None:
    seat = make_seat(repo)
    write(seat.path, {"big/data.txt": "x" * 5000})
    got = run(repo, seat.path, tmp_path / "capture", limits=CaptureLimits(max_file_bytes=4096))
    assert got.over_budget == "a file of 5,000 bytes over max_file_bytes 4,096: big/data.txt"
    assert got.tree is None and got.pack is None and got.error is None


BASE = "a" * 40
GOOD = {
    "tree": "b" * 40,
    "commit": "c" * 40,
    "ignored": ["x.log"],
    "ignored_count": 1,
    "forbidden": [],
    "specials": [],
    "over_budget": None,
    "error": None,
}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"tree": "B" * 40}, "tree is not an object id"),
        ({"tree": "b" * 64}, "tree is not an object id"),
        ({"commit": None}, "it names no tree and no reason"),
        ({"ignored": ["x"] * 201}, "ignored is not a list of at most 200 paths"),
        ({"ignored_count": 0}, "ignored_count is 0"),
        ({"ignored_count": True}, "ignored_count is True"),
        ({"forbidden": [7]}, "forbidden holds something that is no path"),
        ({"specials": ["p" * 201]}, "specials holds something that is no path"),
        ({"error": "x" * 2001}, "error is not a short text"),
        ({"over_budget": "too big"}, "it names a tree although the capture stopped"),
    ],
)
def test_a_manifest_with_a_bad_field_is_an_error(
    tmp_path: Path, change: dict[str, object], why: str
) -> None:
    (tmp_path / "candidate.pack").write_bytes(b"PACK")
    (tmp_path / "manifest.json").write_text(json.dumps({**GOOD, **change}))
    got = read_manifest(tmp_path, BASE)
    assert got.error == f"the collector's manifest is invalid: {why}"
    assert got.tree is None and got.pack is None


def test_a_good_manifest_is_read_and_its_pack_must_be_a_file(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(GOOD))
    (tmp_path / "candidate.pack").symlink_to("/etc/passwd")
    assert read_manifest(tmp_path, BASE).error == (
        "the collector's manifest is invalid: its pack is not a regular file"
    )
    (tmp_path / "candidate.pack").unlink()
    (tmp_path / "candidate.pack").write_bytes(b"PACK")
    got = read_manifest(tmp_path, BASE)
    assert got.ok and got.tree == "b" * 40 and got.ignored == ("x.log",)


def test_a_manifest_that_is_a_link_a_fifo_or_too_big_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(GOOD))
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "manifest.json").symlink_to(secret)
    assert read_manifest(folder, BASE).error == (
        "the collector's manifest is unusable: it is not a regular file (a symbolic link)"
    )
    (folder / "manifest.json").unlink()
    os.mkfifo(folder / "manifest.json")
    assert read_manifest(folder, BASE).error == (
        "the collector's manifest is unusable: it is not a regular file (a FIFO)"
    )
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").write_text(" " * (2 * 1024 * 1024))
    error = read_manifest(folder, BASE).error or ""
    assert error.startswith("the collector's manifest is unusable: it is 2097152 bytes")
    (folder / "manifest.json").unlink()
    assert read_manifest(folder, BASE).error == (
        "the collector's manifest is unusable: it is missing"
    )
