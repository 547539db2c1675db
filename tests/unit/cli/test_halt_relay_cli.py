"""``assay halt`` inside a coder's sandbox (``$ASSAY_HALT_RELAY`` set): every ``check`` goes to
the engine's relay and prints exactly what the command prints on the state file itself, for
the relay's dispatch only; ``--state-dir`` does not get around it, and arm, attest and rearm
write nothing."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from assay.adapters.store import halt_ops
from assay.adapters.store.halt_relay_client import RELAY_ENV
from assay.core.payload import HaltNotice
from assay.engine.local.halt_relay import HaltRelay

if TYPE_CHECKING:
    from support.cli_fixtures import Armed, Assay, Ran

BLOCK = "halt-irreversible-action"
WARN = "halt-budget-exhausted"
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


class Engine:
    """The engine's side: its state folder and one seat dispatch's relay on it."""

    def __init__(self, state_dir: Path, dispatch_id: str) -> None:
        self.state_dir = state_dir
        self.dispatch_id = dispatch_id
        self.notices: list[HaltNotice] = []
        self.fail = False
        self.relay = HaltRelay(
            dispatch_id=dispatch_id, state_dir=state_dir, armed={}, record=self.record
        )
        self.socket = str(self.relay.start())

    def record(self, notice: HaltNotice) -> None:
        if self.fail:
            raise RuntimeError("database is locked")
        self.notices.append(notice)

    @property
    def state_file(self) -> Path:
        return self.state_dir / f"{self.dispatch_id}.json"

    def files(self) -> dict[str, bytes]:
        """Every state file of the folder, byte for byte."""
        return {p.name: p.read_bytes() for p in sorted(self.state_dir.glob("*.json"))}


@pytest.fixture
def engine(tmp_path: Path, armed: Armed) -> Iterator[Engine]:
    """The engine's copy of the armed dispatch (the same file the ``armed`` fixture has)."""
    folder = tmp_path / "engine" / "halt-state"
    folder.mkdir(parents=True)
    shutil.copy(armed.state_file, folder / armed.state_file.name)
    started = Engine(folder, armed.dispatch_id)
    yield started
    started.relay.close()


def in_sandbox(assay_main: Assay, engine: Engine, *args: str) -> Ran:
    return assay_main("halt", *args, env={RELAY_ENV: engine.socket})


def test_through_the_relay_the_command_prints_what_it_prints_on_the_file(
    assay_main: Assay, armed: Armed, engine: Engine
) -> None:
    """The same moves on two identical files, one by the command itself, one by the relay:
    byte-for-byte the same output and exit code, but for the file's path and the clock."""
    moves = [
        ["--condition", BLOCK],
        ["--condition", BLOCK, "--pretty"],
        ["--condition", WARN, "--fire", "--evidence", "spent, with a \u00e9"],
        ["--condition", BLOCK, "--fire", "--evidence", "dropped prod table", "--pretty"],
        ["--condition", BLOCK, "--fire", "--evidence", "again"],  # sticky
        ["--condition", "halt-made-up"],
        ["--condition", "halt-scope-breach", "--fire"],  # no evidence
    ]
    for move in moves:
        local = assay_main("halt", "check", *armed.flags(), *move)
        relayed = in_sandbox(assay_main, engine, "check", "--dispatch-id", armed.dispatch_id, *move)
        assert relayed.code == local.code, (move, relayed)
        assert relayed.stderr == local.stderr == ""
        same = local.stdout.replace(str(armed.state_dir), str(engine.state_dir))
        assert STAMP.sub("T", relayed.stdout) == STAMP.sub("T", same), move
    assert [(n.name, n.detail) for n in engine.notices] == [
        (WARN, "spent, with a \u00e9"),
        (BLOCK, "dropped prod table"),
    ]  # each firing journaled by the engine as it made it


def test_a_state_dir_of_the_coders_own_does_not_get_around_the_relay(
    assay_main: Assay, armed: Armed, engine: Engine
) -> None:
    mine = armed.state_file.read_bytes()  # the coder's own copy, writable
    fired = in_sandbox(
        assay_main,
        engine,
        "check",
        *armed.flags(),
        "--condition",
        BLOCK,
        "--fire",
        "--evidence",
        "x",
    )
    assert fired.code == 1 and fired.doc["fired"] is True
    assert fired.doc["state_file"] == str(engine.state_file)
    assert armed.state_file.read_bytes() == mine  # the flag's folder was not touched
    assert (
        halt_ops.check(armed.dispatch_id, BLOCK, engine.state_dir)[0]["current_state"]["lifecycle"]
        == "FIRED"
    )


def test_another_dispatch_is_refused_and_nothing_changes(
    assay_main: Assay, armed: Armed, engine: Engine
) -> None:
    other = "r-other-run"
    contract = armed.contract
    assert halt_ops.arm(contract, other, engine.state_dir)[1] == 0
    before = engine.files()
    ran = in_sandbox(
        assay_main, engine, "check", "--dispatch-id", other, "--state-dir", str(engine.state_dir),
        "--condition", BLOCK, "--fire", "--evidence", "not mine",
    )  # fmt: skip
    assert ran.code == 1, ran
    assert (ran.doc["checked"], ran.doc["fired"], ran.doc["dispatch_id"]) == (False, False, other)
    [violation] = ran.doc["violations"]
    assert violation["halt_class"] == "halt-check-dispatch-refused"
    assert other in violation["detail"]
    assert engine.files() == before and engine.notices == []


def test_a_relay_that_does_not_answer_is_a_failure_and_nothing_is_written(
    assay_main: Assay, armed: Armed, engine: Engine
) -> None:
    engine.relay.close()
    before = armed.state_file.read_bytes()
    ran = in_sandbox(
        assay_main,
        engine,
        "check",
        *armed.flags(),
        "--condition",
        BLOCK,
        "--fire",
        "--evidence",
        "x",
    )
    assert ran.code == 1 and "Traceback" not in ran.stderr
    assert (ran.doc["checked"], ran.doc["fired"]) == (False, False)
    [violation] = ran.doc["violations"]
    assert violation["halt_class"] == "halt-check-relay-failure"
    assert "did not answer" in violation["detail"]
    assert armed.state_file.read_bytes() == before


def test_a_journal_that_fails_is_a_warning_and_the_exit_code_stays(
    assay_main: Assay, armed: Armed, engine: Engine
) -> None:
    engine.fail = True
    ran = in_sandbox(
        assay_main,
        engine,
        "check",
        *armed.flags(),
        "--condition",
        BLOCK,
        "--fire",
        "--evidence",
        "x",
    )
    assert ran.code == 1 and ran.doc["fired"] is True  # a fired block halt: seed 002's 1
    assert ran.stderr.startswith("assay halt: warning: the engine could not journal")


@pytest.mark.parametrize("command", ["arm", "attest", "rearm"])
def test_arm_attest_and_rearm_write_nothing_inside_a_sandbox(
    assay_main: Assay, armed: Armed, engine: Engine, tmp_path: Path, command: str
) -> None:
    armed.fire(BLOCK, "leaked")
    shutil.copy(armed.state_file, engine.state_file)
    before, mine = engine.files(), armed.state_file.read_bytes()
    fresh = tmp_path / "fresh"
    flags = {
        "arm": ["--contract", str(armed.contract), "--dispatch-id", "d-2"],
        "attest": armed.flags(),
        "rearm": [*armed.flags(), "--condition", BLOCK, "--evidence", "it was fine"],
    }[command]
    if command == "arm":
        flags += ["--state-dir", str(fresh)]
    ran = in_sandbox(assay_main, engine, command, *flags)
    assert ran.code == 1, ran
    assert ran.doc[{"arm": "armed", "attest": "attested", "rearm": "rearmed"}[command]] is False
    [violation] = ran.doc["violations"]
    assert violation["halt_class"].endswith("state-file-write-failure")
    assert "is for the operator" in violation["detail"]
    assert engine.files() == before and armed.state_file.read_bytes() == mine
    assert not fresh.exists()


def test_a_coders_halt_check_needs_no_ledger_url(
    assay_main: Assay, armed: Armed, engine: Engine
) -> None:
    """Inside a seat the command talks to the relay only: a ledger URL nobody answers at (a
    coder never has one) changes nothing, so none is ever handed to it."""
    ran = assay_main(
        "halt", "check", *armed.flags(), "--condition", BLOCK, "--fire", "--evidence", "x",
        env={RELAY_ENV: engine.socket, "ASSAY_DATABASE_URL": "postgresql+psycopg://no@127.0.0.1:1/x"},
    )  # fmt: skip
    assert ran.code == 1 and ran.doc["fired"] is True, ran
    assert ran.stderr == ""
    assert [n.name for n in engine.notices] == [BLOCK]
