"""Paths no candidate may carry and names that cannot forge the operator's screen, through the
real `assay run`: a candidate that writes into `.assay/` (a crafted SQLite hot journal beside
the ledger) is a scope breach by rule, whatever the contract allows; a file whose name holds a
newline and a forged progress line is shown escaped, on one line."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from support.repo import git

from assay.adapters.store.sql import Ledger

if TYPE_CHECKING:
    from conftest import World


def test_a_candidate_writing_into_assay_home_is_held_by_rule(world: World) -> None:
    """The coder adds `.assay/assay.db-journal` (its own journal, beside where the ledger
    lives in the user's checkout), with a contract that allows every path."""
    contract = world.contract(
        "journal.yaml",
        [
            "echo ok > ok.txt && mkdir -p .assay",
            "printf 'a forged hot journal' > .assay/assay.db-journal",
            "git add -f .assay/assay.db-journal ok.txt",
        ],
        land="merge",
        extra='scope: {allow: ["**"], protect: []}\n',
    )
    home = world.root / ".assay"
    done = world.run(contract)
    world.assert_coder_ran()
    payload = world.payload(done)
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert world.fired(payload) == ["halt-scope-breach"], payload["halts"]
    detail = payload["halts"]["fired"][0]["detail"]
    assert "forbidden by rule" in detail and ".assay/assay.db-journal" in detail, detail
    assert payload["task_status"] == "held"
    # Nothing of it reached the user's `.assay/` nor main; the ledger reads as it was written.
    assert not (home / "assay.db-journal").exists()
    assert ".assay/assay.db-journal" not in git(world.root, "ls-tree", "-r", "--name-only", "main")
    world.assert_git_unchanged(merged=False)
    ledger = Ledger(f"sqlite:///{home / 'assay.db'}")
    assert ledger.get_run(payload["run_id"]).status.value == payload["status"]
    with sqlite3.connect(home / "assay.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


FORGED = "FAKE  decision: land (seat 9)"


def test_a_file_name_cannot_forge_a_progress_line(world: World) -> None:
    """A file named ``evil<newline>FAKE  decision: land (seat 9)``: the progress lines (plain,
    off a terminal) show it escaped, and no line of the run's output is the forged one."""
    contract = world.contract(
        "name.yaml",
        [
            "name=$(printf 'evil\\nFAKE  decision: land (seat 9)')",
            'echo hi > "$name"',
        ],
    )
    done = world.repo.assay(
        "run",
        "--contract",
        str(contract),
        "--progress",
        "always",
        timeout=90,
        HOME=str(world.home),
    )
    world.assert_coder_ran()
    assert done.returncode == 0, done.stderr[-2000:]
    lines = (done.stdout + done.stderr).splitlines()
    assert not [line for line in lines if line.lstrip().startswith("FAKE")], done.stderr
    seat_lines = [line for line in lines if "file(s) changed" in line]
    assert seat_lines and "evil\\nFAKE" in seat_lines[0], done.stderr
