"""The halt relay: a firing sent by ``assay halt check --fire`` is journaled by the engine and
acknowledged; anything else is refused with a reason, and no peer can crash or stall it."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.adapters.process import run_process
from assay.adapters.sandbox import bwrap_problem
from assay.adapters.sandbox_spec import SandboxSpec
from assay.adapters.store import halt_ops
from assay.adapters.store.halt_journal import RELAY_ENV, RELAY_MAX_LINE, relay_fired
from assay.core.halts import CANONICAL_HALTS
from assay.core.payload import HaltNotice
from assay.core.vocab import HaltSeverity, NetworkMode
from assay.engine.halt_relay import MAX_SOCKET_PATH, HaltRelay, remove_relay_folders

DISPATCH = "r20260101-000000-abcdef"
ARMED = {name.value: severity for name, severity in CANONICAL_HALTS.items()}
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


@pytest.fixture
def journal() -> Journal:
    return Journal()


@pytest.fixture
def relay(journal: Journal) -> Iterator[HaltRelay]:
    started = HaltRelay(
        dispatch_id=DISPATCH,
        armed=ARMED,
        record=journal.record,
        read_timeout=0.5,
        max_connections=4,
    )
    started.start()
    yield started
    started.close()


def firing(name: str = "halt-irreversible-action", **changes: object) -> dict[str, object]:
    message: dict[str, object] = {
        "dispatch_id": DISPATCH,
        "name": name,
        "severity": "block",
        "evidence": "dropped prod table",
        "fired_at": "2026-01-01T00:00:00Z",
    }
    message.update(changes)
    return message


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


def test_a_firing_sent_is_journaled_and_acknowledged(relay: HaltRelay, journal: Journal) -> None:
    assert relay.path is not None
    assert relay_fired(str(relay.path), firing()) is None  # the ack came back
    assert journal.notices == [
        HaltNotice(
            name="halt-irreversible-action",
            severity=HaltSeverity.BLOCK,
            detail="dropped prod table",
            fired_at="2026-01-01T00:00:00Z",
        )
    ]


def test_the_socket_is_short_private_and_removed_at_close(journal: Journal) -> None:
    relay = HaltRelay(dispatch_id=DISPATCH, armed=ARMED, record=journal.record)
    path = relay.start()
    folder = path.parent
    assert len(str(path).encode()) <= MAX_SOCKET_PATH
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    relay.close()
    relay.close()  # idempotent
    assert not folder.exists()
    problem = relay_fired(str(path), firing())
    assert problem is not None and "did not answer" in problem  # never raised


def test_the_armed_severity_counts_not_the_senders(relay: HaltRelay, journal: Journal) -> None:
    assert exchange(relay, json.dumps(firing(severity="log")).encode() + b"\n") == {"ok": True}
    assert [n.severity for n in journal.notices] == [HaltSeverity.BLOCK]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json at all\n", "not a JSON line"),
        (b"\xff\xfe\x00garbage\n", "not a JSON line"),
        (b"[1, 2, 3]\n", "not a JSON object"),
        (json.dumps(firing(dispatch_id="r-other-run")).encode() + b"\n", "dispatch id"),
        (json.dumps(firing(name="halt-made-up")).encode() + b"\n", "no such halt is armed"),
        (json.dumps(firing(name=["x"])).encode() + b"\n", "no such halt is armed"),
        (json.dumps(firing(evidence={"detail": 1})).encode() + b"\n", "evidence"),
        (json.dumps(firing(fired_at="x" * 500)).encode() + b"\n", "fired_at"),
        (b"{" * 100_000 + b"\n", "longer than"),
        (json.dumps(firing(evidence="e" * RELAY_MAX_LINE)).encode() + b"\n", "longer than"),
    ],
    ids=[
        "garbage", "binary", "not-object", "other-dispatch", "unarmed-name", "name-not-text",
        "evidence-not-text", "huge-fired-at", "huge-line", "huge-evidence",
    ],
)  # fmt: skip
def test_a_bad_line_is_refused_and_the_relay_goes_on(
    relay: HaltRelay, journal: Journal, raw: bytes, why: str
) -> None:
    reply = exchange(relay, raw)
    assert reply["ok"] is False and why in str(reply["error"]), reply
    assert journal.notices == []
    assert exchange(relay, json.dumps(firing()).encode() + b"\n") == {"ok": True}
    assert [n.name for n in journal.notices] == ["halt-irreversible-action"]


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


def test_a_silent_peer_is_dropped_and_does_not_block_others(journal: Journal) -> None:
    relay = HaltRelay(dispatch_id=DISPATCH, armed=ARMED, record=journal.record, read_timeout=3)
    path = str(relay.start())
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        silent.connect(path)
        started = time.monotonic()
        assert relay_fired(path, firing()) is None  # served while the silent one waits
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
    while (problem := relay_fired(str(relay.path), firing())) is not None:
        assert time.monotonic() < deadline, problem
        time.sleep(0.1)
    assert [n.name for n in journal.notices] == ["halt-irreversible-action"]


def test_a_journal_that_fails_is_a_refusal_not_a_crash(relay: HaltRelay, journal: Journal) -> None:
    journal.fail = True
    assert relay.path is not None
    problem = relay_fired(str(relay.path), firing())
    assert problem is not None and "database is locked" in problem
    journal.fail = False
    assert relay_fired(str(relay.path), firing()) is None


def _arm(tmp_path: Path) -> Path:
    contract = tmp_path / "contract.yaml"
    lines = ["task: fix it", "halt_classes:"]
    lines += [f"  - {{name: {n}, severity: {s.value}}}" for n, s in ARMED.items()]
    contract.write_text("\n".join(lines) + "\n")
    state_dir = tmp_path / "halt-state"
    document, code = halt_ops.arm(contract, DISPATCH, state_dir)
    assert code == 0, document
    return state_dir


def _fire(state_dir: Path, relay_path: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env[RELAY_ENV] = relay_path
    flags = ["--dispatch-id", DISPATCH, "--state-dir", str(state_dir)]
    fire = ["--condition", "halt-irreversible-action", "--fire", "--evidence", "dropped it"]
    return subprocess.run(
        [str(ASSAY), "halt", "check", *flags, *fire],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_halt_command_reports_its_firing_through_the_relay(
    tmp_path: Path, relay: HaltRelay, journal: Journal
) -> None:
    state_dir = _arm(tmp_path)
    done = _fire(state_dir, str(relay.path))
    assert done.returncode == 1, done.stderr  # a fired block halt: seed 002's exit code
    assert done.stderr == ""
    assert json.loads(done.stdout)["fired"] is True
    state = json.loads((state_dir / f"{DISPATCH}.json").read_text())
    fired_at = next(h["fired_at"] for h in state["halts"] if h["lifecycle"] == "FIRED")
    assert journal.notices == [
        HaltNotice(
            name="halt-irreversible-action",
            severity=HaltSeverity.BLOCK,
            detail="dropped it",
            fired_at=fired_at,
        )
    ]


def test_a_relay_that_is_gone_changes_nothing_of_the_exit_code(tmp_path: Path) -> None:
    state_dir = _arm(tmp_path)
    done = _fire(state_dir, str(tmp_path / "no-relay-here"))
    assert done.returncode == 1
    assert json.loads(done.stdout)["fired"] is True
    assert "warning: the halt relay at" in done.stderr and "Traceback" not in done.stderr


PROBE = """
import sys
from pathlib import Path
from assay.adapters.store.halt_journal import journal_fired
state = {"name": "halt-irreversible-action", "severity": "block", "evidence": {"detail": "x"}}
print(journal_fired(Path(sys.argv[1]), sys.argv[2], state), "sqlalchemy" in sys.modules)
"""


def test_relaying_a_firing_never_imports_sqlalchemy(
    tmp_path: Path, relay: HaltRelay, journal: Journal
) -> None:
    env = {"PATH": "/usr/bin:/bin", RELAY_ENV: str(relay.path)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path), DISPATCH],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert done.stdout.split() == ["None", "False"], done.stderr
    assert [n.detail for n in journal.notices] == ["x"]


CLIENT = """
import sys
from assay.adapters.store.halt_journal import relay_fired
message = {"dispatch_id": sys.argv[1], "name": "halt-scope-breach", "severity": "block",
           "evidence": "inside", "fired_at": None}
print(relay_fired(sys.argv[2], message))
"""


@pytest.mark.parametrize("network", [NetworkMode.ON, NetworkMode.NONE])
def test_a_sandboxed_process_reaches_the_relay_through_its_bound_folder(
    tmp_path: Path, relay: HaltRelay, journal: Journal, network: NetworkMode
) -> None:
    """The socket's folder bound writable over the sandbox's private /tmp, at the same path;
    ``network: none`` takes the network, not a socket in the file system."""
    if problem := bwrap_problem():
        pytest.skip(problem)
    assert relay.folder is not None
    spec = SandboxSpec(network=network, writable=(relay.folder, tmp_path), hidden=(Path.home(),))
    done = run_process(
        [sys.executable, "-c", CLIENT, DISPATCH, str(relay.path)],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        timeout=60,
        log_path=tmp_path / "client.log",
        sandbox=spec,
    )
    assert (done.exit_code, done.stdout.strip()) == (0, "None"), done.stderr
    assert [n.detail for n in journal.notices] == ["inside"]


def test_recovery_removes_the_relay_folder_a_killed_run_left(journal: Journal) -> None:
    # Ids of this test's own: removing DISPATCH's folders would take the relay of a test
    # running at the same time on another worker.
    killed = f"r20260101-000000-k{os.getpid()}"
    mine = HaltRelay(dispatch_id=killed, armed=ARMED, record=journal.record)
    other = HaltRelay(dispatch_id=f"{killed}x", armed=ARMED, record=journal.record)
    try:
        left, kept = mine.start().parent, other.start().parent
        assert left.name.startswith(f"assay-halt-{killed}-")
        remove_relay_folders(killed)  # what close_unfinished does for a run killed by -9
        assert not left.exists() and kept.is_dir()
    finally:
        mine.close()
        other.close()
