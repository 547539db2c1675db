"""The halt relay of one seat dispatch: a query or fire sent by ``assay halt check`` is performed
on the engine's state file for the dispatch the socket serves (never the one the line claims),
a firing is journaled before the answer goes back, anything else is refused with a reason, and
no peer can crash or stall it. In a real sandbox its socket takes connections but cannot be
removed or replaced, and no other seat's relay is in sight."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.adapters.process import run_process
from assay.adapters.sandbox import bwrap_problem
from assay.adapters.sandbox_spec import SandboxSpec
from assay.adapters.store import halt_ops
from assay.adapters.store.halt_relay_client import (
    RELAY_ENV,
    RELAY_MAX_LINE,
    call_relay,
    check_request,
)
from assay.core.halts import CANONICAL_HALTS
from assay.core.payload import HaltNotice
from assay.core.vocab import HaltSeverity, NetworkMode
from assay.engine.local.halt_relay import MAX_SOCKET_PATH, HaltRelay, remove_relay_folders

DISPATCH = "r20260101-000000-abcdef"
OTHER = "r20260101-000000-other0"
ARMED = {name.value: severity for name, severity in CANONICAL_HALTS.items()}
BLOCK = "halt-irreversible-action"
ASSAY = Path(sys.executable).with_name("assay")


class Journal:
    """What the relay handed the engine, thread-safe like the engine's own record."""

    def __init__(self) -> None:
        self.notices: list[HaltNotice] = []
        self.lock = threading.Lock()
        self.fail = False

    def record(self, notice: HaltNotice) -> None:
        if self.fail:
            raise RuntimeError("database is locked")
        with self.lock:
            self.notices.append(notice)


def arm(state_dir: Path, dispatch_id: str = DISPATCH) -> Path:
    """An armed state file of the canonical halts; its path."""
    contract = state_dir.parent / f"{dispatch_id}.yaml"
    lines = ["task: fix it", "halt_classes:"]
    lines += [f"  - {{name: {n}, severity: {s.value}}}" for n, s in ARMED.items()]
    contract.write_text("\n".join(lines) + "\n")
    document, code = halt_ops.arm(contract, dispatch_id, state_dir)
    assert code == 0, document
    return state_dir / f"{dispatch_id}.json"


def lifecycle(path: Path, name: str) -> str:
    halts = json.loads(path.read_text())["halts"]
    return str(next(h["lifecycle"] for h in halts if h["name"] == name))


@pytest.fixture
def journal() -> Journal:
    return Journal()


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "halt-state"
    arm(folder)
    return folder


def start(
    state_dir: Path, journal: Journal, *, read_timeout: float = 5.0, max_connections: int = 32
) -> HaltRelay:
    relay = HaltRelay(
        dispatch_id=DISPATCH,
        state_dir=state_dir,
        armed=ARMED,
        record=journal.record,
        read_timeout=read_timeout,
        max_connections=max_connections,
    )
    relay.start()
    return relay


@pytest.fixture
def relay(state_dir: Path, journal: Journal) -> Iterator[HaltRelay]:
    started = start(state_dir, journal, read_timeout=0.5, max_connections=4)
    yield started
    started.close()


def ask(
    relay: HaltRelay, condition: str = BLOCK, *, fire: bool = True, claim: str = DISPATCH
) -> tuple[dict[str, Any], int, str | None] | str:
    """``assay halt check`` as the client sends it; (document, exit code, warning) or why not."""
    evidence = "dropped prod table" if fire else None
    return call_relay(
        str(relay.path), check_request(claim, condition, fire=fire, evidence=evidence)
    )


def exchange(relay: HaltRelay, raw: bytes) -> dict[str, object]:
    """Send ``raw`` as is and read the relay's one-line answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5)
        conn.connect(str(relay.path))
        conn.sendall(raw)
        answer = conn.makefile("rb").readline()
    reply = json.loads(answer)
    assert isinstance(reply, dict)
    return reply


def test_a_query_and_a_fire_act_on_the_engines_state_file(
    relay: HaltRelay, journal: Journal, state_dir: Path
) -> None:
    path = state_dir / f"{DISPATCH}.json"
    answer = ask(relay, "halt-scope-breach", fire=False)
    assert not isinstance(answer, str), answer
    document, code, warning = answer
    assert (document["checked"], document["transition_applied"], code) == (True, True, 0)
    assert document["state_file"] == str(path) and warning is None
    assert lifecycle(path, "halt-scope-breach") == "CHECKED"
    assert journal.notices == []  # a query journals nothing

    answer = ask(relay)
    assert not isinstance(answer, str), answer
    document, code, warning = answer
    assert (document["fired"], code, warning) == (True, 1, None)  # a block halt: exit 1
    assert document["violations"][0]["halt_class"] == BLOCK
    fired_at = next(h["fired_at"] for h in json.loads(path.read_text())["halts"] if h["fired_at"])
    assert journal.notices == [  # journaled before the answer came back
        HaltNotice(
            name=BLOCK, severity=HaltSeverity.BLOCK, detail="dropped prod table", fired_at=fired_at
        )
    ]
    again = ask(relay)  # sticky, as seed 002 says
    assert not isinstance(again, str)
    assert again[0]["violations"][0]["halt_class"] == "halt-check-sticky-rejection"
    assert again[1] == 1 and len(journal.notices) == 1


def test_a_claimed_other_dispatch_is_refused_and_nothing_changes(
    relay: HaltRelay, journal: Journal, state_dir: Path
) -> None:
    other = arm(state_dir, OTHER)
    before = other.read_bytes(), (state_dir / f"{DISPATCH}.json").read_bytes()
    answer = ask(relay, claim=OTHER)
    assert not isinstance(answer, str), answer
    document, code, _ = answer
    assert code == 1 and document["fired"] is False and document["checked"] is False
    assert document["dispatch_id"] == OTHER and document["state_file"] == str(other)
    [violation] = document["violations"]
    assert violation["halt_class"] == "halt-check-dispatch-refused"
    assert OTHER in violation["detail"] and DISPATCH in violation["detail"]
    assert (other.read_bytes(), (state_dir / f"{DISPATCH}.json").read_bytes()) == before
    assert journal.notices == []


def test_each_seat_has_its_own_socket_and_a_firing_counts_for_the_run(
    state_dir: Path, journal: Journal
) -> None:
    first, second = start(state_dir, journal), start(state_dir, journal)
    try:
        assert first.folder != second.folder
        assert not isinstance(ask(first), str)
        answer = ask(second, fire=False)  # the other seat sees the run's halt FIRED
        assert not isinstance(answer, str)
        assert answer[0]["current_state"]["lifecycle"] == "FIRED" and answer[1] == 0
    finally:
        first.close()
        second.close()
    assert [n.name for n in journal.notices] == [BLOCK]


def test_the_socket_is_short_private_and_removed_at_close(
    state_dir: Path, journal: Journal
) -> None:
    relay = HaltRelay(dispatch_id=DISPATCH, state_dir=state_dir, armed=ARMED, record=print)
    path = relay.start()
    folder = path.parent
    assert len(str(path).encode()) <= MAX_SOCKET_PATH
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert os.listdir(folder) == ["s"]
    relay.close()
    relay.close()  # idempotent
    assert not folder.exists()
    problem = ask(relay)
    assert isinstance(problem, str) and "did not answer" in problem  # never raised


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json at all\n", "not a JSON line"),
        (b"\xff\xfe\x00garbage\n", "not a JSON line"),
        (b"[1, 2, 3]\n", "not a JSON object"),
        (b'{"dispatch_id": "' + DISPATCH.encode() + b'", "name": "' + BLOCK.encode() + b'"}\n',
         "not a halt check request"),
        (json.dumps({**check_request("../x", BLOCK, fire=False, evidence=None)}).encode() + b"\n",
         "dispatch id"),
        (json.dumps({**check_request(DISPATCH, "", fire=False, evidence=None)}).encode() + b"\n",
         "condition"),
        (json.dumps({**check_request(DISPATCH, BLOCK, fire=False, evidence=None),
                     "fire": "yes"}).encode() + b"\n", "fire"),
        (json.dumps(check_request(DISPATCH, BLOCK, fire=False, evidence="x")).encode() + b"\n",
         "evidence"),
        (b"[" * 100_000 + b"\n", "longer than"),
        (json.dumps(check_request(DISPATCH, BLOCK, fire=True, evidence="e" * RELAY_MAX_LINE))
         .encode() + b"\n", "longer than"),
    ],
    ids=[
        "garbage", "binary", "not-object", "old-firing-line", "bad-dispatch-id", "no-condition",
        "fire-not-bool", "evidence-without-fire", "huge-line", "huge-evidence",
    ],
)  # fmt: skip
def test_a_bad_line_is_refused_and_the_relay_goes_on(
    relay: HaltRelay, journal: Journal, state_dir: Path, raw: bytes, why: str
) -> None:
    before = (state_dir / f"{DISPATCH}.json").read_bytes()
    reply = exchange(relay, raw)
    assert reply["ok"] is False and why in str(reply["error"]), reply
    assert journal.notices == [] and (state_dir / f"{DISPATCH}.json").read_bytes() == before
    answer = ask(relay)
    assert not isinstance(answer, str) and answer[0]["fired"] is True
    assert [n.name for n in journal.notices] == [BLOCK]


def test_an_endless_line_is_cut_at_the_bound(relay: HaltRelay, journal: Journal) -> None:
    """A peer that streams without a newline is answered after 64 KiB, not read to the end."""
    assert relay.path is not None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5)
        conn.connect(str(relay.path))
        sent = 0
        with pytest.raises(OSError):  # the relay stops reading and closes: the send fails
            while sent < 50 * RELAY_MAX_LINE:
                sent += conn.send(b"x" * 65536)
        assert sent < 50 * RELAY_MAX_LINE
    assert journal.notices == []


def test_a_silent_peer_is_dropped_and_does_not_block_others(
    state_dir: Path, journal: Journal
) -> None:
    relay = start(state_dir, journal, read_timeout=3)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        silent.connect(str(relay.path))
        started = time.monotonic()
        assert not isinstance(ask(relay), str)  # served while the silent one waits
        assert time.monotonic() - started < 2
        silent.settimeout(10)
        reply = json.loads(silent.makefile("rb").readline())
        assert reply == {"ok": False, "error": "no complete line in time"}
        assert time.monotonic() - started > 2.5  # only once its time was up
    finally:
        silent.close()
        relay.close()
    assert len(journal.notices) == 1


def test_a_flood_of_connections_leaves_the_relay_serving(
    relay: HaltRelay, journal: Journal
) -> None:
    assert relay.path is not None
    flood = []
    for _ in range(40):  # ten times its slots, all silent
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(relay.path))
        flood.append(conn)
    for conn in flood:
        conn.close()
    deadline = time.monotonic() + 5
    while isinstance(answer := ask(relay), str):
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)
    assert [n.name for n in journal.notices] == [BLOCK]


def test_a_journal_that_fails_is_a_warning_and_the_file_holds_the_firing(
    relay: HaltRelay, journal: Journal, state_dir: Path
) -> None:
    journal.fail = True
    answer = ask(relay)
    assert not isinstance(answer, str), answer
    document, code, warning = answer
    assert (document["fired"], code) == (True, 1)  # seed 002's exit code all the same
    assert warning is not None and "database is locked" in warning
    assert lifecycle(state_dir / f"{DISPATCH}.json", BLOCK) == "FIRED"


# In the sandbox: remove and replace the socket, bind one of its own there, look for the other
# seat's relay, then fire through the real `assay halt check` (on its PATH, as a coder does).
HOSTILE = """
import os, socket, subprocess, sys
relay, other = sys.argv[1], sys.argv[2]
for attempt in ("unlink", "rename", "bind"):
    try:
        if attempt == "unlink":
            os.unlink(relay)
        elif attempt == "rename":
            os.rename(relay, relay + ".x")
        else:
            socket.socket(socket.AF_UNIX).bind(os.path.join(os.path.dirname(relay), "t"))
        print(attempt, "done")
    except OSError as exc:
        print(attempt, "failed", exc.errno)
print("other seat's relay visible:", os.path.exists(other))
fire = ["--condition", "halt-irreversible-action", "--fire", "--evidence", "inside"]
done = subprocess.run(["assay", "halt", "check", "--dispatch-id", sys.argv[3], *fire],
                      capture_output=True, text=True)
print("exit", done.returncode, done.stdout.strip(), done.stderr.strip())
"""


@pytest.mark.parametrize("network", [NetworkMode.ON, NetworkMode.NONE])
def test_in_a_real_sandbox_the_socket_takes_a_call_but_cannot_be_removed_or_replaced(
    tmp_path: Path, state_dir: Path, journal: Journal, network: NetworkMode
) -> None:
    """The seat's relay folder bound read-only over the sandbox's private /tmp, at the same
    path; ``network: none`` takes the network, not a socket in the file system."""
    if problem := bwrap_problem():
        pytest.skip(problem)
    mine, others = start(state_dir, journal), start(state_dir, journal)
    try:
        assert mine.path is not None and mine.folder is not None and others.path is not None
        spec = SandboxSpec(
            network=network,
            readable=(mine.folder,),
            writable=(tmp_path / "seat",),
            hidden=(Path.home(), state_dir),
        )
        path = f"{ASSAY.parent}:{os.environ['PATH']}"
        done = run_process(
            [sys.executable, "-c", HOSTILE, str(mine.path), str(others.path), DISPATCH],
            cwd=tmp_path,
            env={"PATH": path, RELAY_ENV: str(mine.path)},
            timeout=60,
            log_path=tmp_path / "client.log",
            sandbox=spec,
        )
        lines = done.stdout.splitlines()
        assert done.exit_code == 0, done.stderr
        assert lines[:4] == [
            "unlink failed 30",  # EROFS: a read-only mount
            "rename failed 30",
            "bind failed 30",
            "other seat's relay visible: False",
        ], done.stdout
        assert lines[4].startswith("exit 1 {") and '"fired": true' in lines[4], lines[4]
        assert os.listdir(mine.folder) == ["s"] and stat.S_ISSOCK(mine.path.stat().st_mode)
    finally:
        mine.close()
        others.close()
    assert [(n.name, n.detail) for n in journal.notices] == [(BLOCK, "inside")]
    assert lifecycle(state_dir / f"{DISPATCH}.json", BLOCK) == "FIRED"


def test_recovery_removes_the_relay_folders_a_killed_run_left(
    state_dir: Path, journal: Journal
) -> None:
    # Ids of this test's own: removing DISPATCH's folders would take the relay of a test
    # running at the same time on another worker.
    killed = f"r20260101-000000-k{os.getpid()}"

    def relay_of(dispatch_id: str) -> HaltRelay:
        return HaltRelay(
            dispatch_id=dispatch_id, state_dir=state_dir, armed=ARMED, record=journal.record
        )

    seat_1, seat_2, other = relay_of(killed), relay_of(killed), relay_of(f"{killed}x")
    try:
        left = [seat_1.start().parent, seat_2.start().parent]
        kept = other.start().parent
        assert all(f.name.startswith(f"assay-halt-{killed}-") for f in left)
        remove_relay_folders(killed)  # what close_unfinished does for a run killed by -9
        assert not any(f.exists() for f in left) and kept.is_dir()
    finally:
        for relay in (seat_1, seat_2, other):
            relay.close()


def test_arming_from_the_engine_s_json_copy_arms_what_the_yaml_contract_arms(
    tmp_path: Path,
) -> None:
    """The engine arms from the JSON it wrote of the contract (read by the JSON parser): the
    same halts as from the YAML; a JSON file that is no object is still read as YAML."""
    (tmp_path / "yaml").mkdir()
    yaml_state = json.loads(arm(tmp_path / "yaml" / "halt-state").read_text())
    copy = tmp_path / "contract.json"
    halts = [{"name": n, "severity": s.value} for n, s in ARMED.items()]
    copy.write_text(json.dumps({"task": "fix it", "halt_classes": halts}))
    document, code = halt_ops.arm(copy, DISPATCH, tmp_path / "json" / "halt-state")
    assert code == 0, document
    json_state = json.loads((tmp_path / "json" / "halt-state" / f"{DISPATCH}.json").read_text())

    def armed(state: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(h["name"], h["severity"], h["lifecycle"]) for h in state["halts"]]

    assert armed(json_state) == armed(yaml_state) and len(armed(json_state)) == len(ARMED)
    copy.write_text("[1, 2]")
    refused, code = halt_ops.arm(copy, OTHER, tmp_path / "json" / "halt-state")
    assert code == 1 and "not a mapping" in refused["violations"][0]["detail"]
