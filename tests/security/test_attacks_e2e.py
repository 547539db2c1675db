"""Attacks on the seat boundary that issue 22 does not list, through the real `assay run` with a
`command` coder and the default `sandbox: bwrap`. Each test asserts outcomes only (what the
host process used, what main and assay's home hold), never how the engine gets there; each
fails today for the reason its docstring gives."""

from __future__ import annotations

import resource
from typing import TYPE_CHECKING

from support.repo import git

if TYPE_CHECKING:
    from conftest import World

MiB = 1024 * 1024
CODER_RAN = "CODER-RAN-42"  # what every World coder prints first (conftest.CODER_RAN)
# What the coder prints: far more than any log, tail or finding the host needs to keep.
FLOOD_BYTES = 200 * MiB
# The most the host's `assay` may grow to (its own baseline is ~60 MiB): well under the flood.
HOST_RSS_BOUND = 160 * MiB


def test_a_coder_printing_hundreds_of_megabytes_does_not_grow_the_host(world: World) -> None:
    """The coder writes 200 MiB to its stdout (one line, in seconds; a real attacker prints
    gigabytes within its timeout). Everything the coder wrote is hostile input the host must
    read with a limit (principle 9): its output is kept as a bounded tail, never read whole.
    Today the host reads the whole `.out` log back (`process._read_back`), builds the combined
    log text in memory, and `seat_results.captured_output` reads it all again: the `assay`
    process peaks above 600 MiB for 200 MiB of output (so gigabytes for gigabytes), and the
    run folder keeps ~400 MiB. A command validator running the candidate's code goes through
    the same `run_process`."""
    world.commit({"a.txt": "good\n"})
    flood = f"head -c {FLOOD_BYTES} /dev/zero | tr '\\0' 'a'"
    contract = world.contract("flood.yaml", [flood, "echo changed > a.txt"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    done = world.run(contract)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    world.assert_coder_ran()
    assert done.returncode == 0, done.stderr[-2000:]
    # ru_maxrss of the children is the largest any of them reached; a peak below the bound
    # (or the pytest process's earlier children's) is the host staying small.
    assert peak <= max(before, HOST_RSS_BOUND), (
        f"the host grew to {peak // MiB} MiB reading {FLOOD_BYTES // MiB} MiB of coder output"
    )


def test_a_candidate_cannot_land_a_journal_beside_a_ledger_moved_by_assay_home(
    world: World,
) -> None:
    """The operator keeps assay's home inside the repository under another name
    (`ASSAY_HOME=<repo>/state`, which `assay` documents as moving the home). The coder adds
    `state/assay.db-journal`, a file beside the ledger that SQLite reads as a hot journal the
    next time the ledger is opened (issue 22's forged-ledger attack), with a contract that
    allows every path. assay's home, wherever it is, is a path no candidate may carry: held by
    rule, nothing lands there. Today the rule knows only the name `.assay`
    (`core/forbidden.py`, `landing._refuse_assay_home`): the run merges and the journal sits
    beside the ledger."""
    world.commit({"a.txt": "good\n"})
    contract = world.contract(
        "home.yaml",
        [
            "mkdir -p state && printf 'a forged hot journal' > state/assay.db-journal",
            "echo changed > a.txt",
        ],
        land="merge",
        extra='scope: {allow: ["**"], protect: []}\n',
    )
    home = world.root / "state"
    done = world.run(contract, {"ASSAY_HOME": str(home)})
    ran = [
        f
        for f in (home / "runs").rglob("*")
        if f.is_file() and CODER_RAN in f.read_text(errors="replace")
    ]
    assert ran, "the hostile coder never ran: the test proves nothing"
    payload = world.payload(done)
    landed = git(world.root, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert "state/assay.db-journal" not in landed, (done.returncode, payload["status"])
    assert not (home / "assay.db-journal").exists(), "a coder's journal sits beside the ledger"
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert payload["task_status"] == "held"
