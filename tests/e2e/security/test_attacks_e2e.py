"""Attacks on the seat boundary that issue 22 does not list, through the real `assay run` with a
`command` coder and the default `sandbox: bwrap`. Each test asserts outcomes only (what the
host process used, what main and assay's home hold), never how the engine gets there; each
fails today for the reason its docstring gives."""

from __future__ import annotations

import random
import resource
import string
import subprocess
from typing import TYPE_CHECKING

import pytest
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
    log text in memory, and `to_values.captured_output` reads it all again: the `assay`
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


def _key_pieces() -> tuple[str, str]:
    """An AWS access key id the secret check knows, as the two words `printf '%s%s'` joins (the
    contract, kept in the run folder and the ledger, holds only the pieces), and joined."""
    body = "".join(random.choices(string.ascii_uppercase + "234567", k=16))
    return f"AKIA {body}", f"AKIA{body}"


def _assert_key_held(world: World, done: subprocess.CompletedProcess[str], key: str) -> None:
    payload = world.payload(done)
    grep = ["git", "grep", "-a", "-F", "-l", key, "main"]
    found = subprocess.run(grep, cwd=world.root, capture_output=True, text=True, check=False)
    assert found.returncode == 1, f"the key reached main ({payload['status']}): {found.stdout}"
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert "halt-secret-exposure" in world.fired(payload), payload["halts"]
    assert payload["task_status"] == "held"


@pytest.mark.parametrize("padding_lines", [0, 60_000], ids=["control", "padded"])
def test_a_key_after_two_megabytes_of_diff_is_still_caught(
    world: World, padding_lines: int
) -> None:
    """The coder first writes `aaa.txt`, 60,000 harmless lines (2.7 MB, far inside the default
    budgets), then `zzz.py` with an AWS key: in the diff the key comes after the padding. The
    secret check must look at the whole candidate that lands, not at the diff as far as it is
    kept for display. Today `CandidateStore.changes` cuts the diff at 2,000,000 characters
    (`DIFF_CUT`) and `validators/secrets.py` scans only that cut text (`diff_sources`): the key
    is never seen and is merged onto main. Without the padding (control) it is held."""
    world.commit({"a.txt": "good\n"})
    pieces, key = _key_pieces()
    padding = f"yes 'a harmless line of the notes file' | head -n {padding_lines} > aaa.txt"
    contract = world.contract(
        "cut.yaml",
        [
            *([padding] if padding_lines else []),
            f"printf 'AWS_ACCESS_KEY_ID = \"%s%s\"\\n' {pieces} > zzz.py",
        ],
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    _assert_key_held(world, done, key)


@pytest.mark.parametrize("zeros", [5_000, 5_000_000], ids=["control", "large"])
def test_a_key_in_a_binary_file_over_four_megabytes_is_still_caught(
    world: World, zeros: int
) -> None:
    """The coder writes `blob.bin`: NUL bytes (so git calls it binary), then a line with an AWS
    key. At 5 MB it is inside the default budgets (`max_file_bytes` 10 MiB), so it is captured,
    validated and landed whole; the secret check must look at all of it. Today
    `validators/secrets.py` reads a binary file's text only up to `MAX_BINARY_BYTES` (4 MiB)
    and skips a larger one entirely (`git.read_blob` returns None): the key is merged onto
    main. At 5 kB (control) it is held."""
    world.commit({"a.txt": "good\n"})
    pieces, key = _key_pieces()
    contract = world.contract(
        "binary.yaml",
        [
            f"head -c {zeros} /dev/zero > blob.bin",
            f"printf '\\nAWS_ACCESS_KEY_ID = \"%s%s\"\\n' {pieces} >> blob.bin",
        ],
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    _assert_key_held(world, done, key)
