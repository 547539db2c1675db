"""Hostile coders and the halts, through the real `assay run` / `assay serve`: a coder acts on
its own run's halts only. It cannot fire another run's halt (by its dispatch id, with
`--state-dir`), cannot make the engine create a file on the host through a planted lock-file
link, and cannot erase another seat's block halt by taking over the relay socket.

The coders meet the test on a localhost socket (:class:`Gate`: a sandbox with the network
sees the host's loopback), so each step happens in the order the attack needs, whatever the
machine's speed, and no coder waits longer than it must."""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from support.repo import ASSAY, git

if TYPE_CHECKING:
    from conftest import World

BLOCK = "halt-irreversible-action"
RELAY_AT = re.compile(r"^relay at (/tmp/\S+)$", re.MULTILINE)
# Puts every halt of the state file at $1 back to ARMED, as if nothing had fired.
UNFIRE = (
    "python3 -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); "
    '[h.update(lifecycle="ARMED", evidence=None, fired_at=None) for h in d["halts"]]; '
    'json.dump(d, open(p, "w"))\''
)


class Gate:
    """A rendezvous on localhost: a coder connects, says its name, and waits for the line the
    test sends it (:meth:`tell`)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.arrived: dict[str, socket.socket] = {}
        self.changed = threading.Condition()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def call(self, name: str) -> str:
        """The shell command a coder runs to meet the test at ``name``; it prints the answer."""
        script = (
            "import socket,sys; c=socket.create_connection(('127.0.0.1',int(sys.argv[2])),"
            "timeout=25); c.sendall(sys.argv[1].encode()+b'\\n'); "
            "print(c.makefile().readline().strip())"
        )
        return f'python3 -c "{script}" {name} {self.port}'

    @property
    def network(self) -> str:
        """The contract lines that let a coder reach the gate (a seat's network is its own)."""
        return f"network: {{allow: ['127.0.0.1:{self.port}']}}\n"

    def wait(self, name: str, timeout: float = 40.0) -> None:
        with self.changed:
            met = self.changed.wait_for(lambda: name in self.arrived, timeout=timeout)
        assert met, f"no coder came to {name!r} in {timeout:.0f} s"

    def tell(self, name: str, text: str = "go") -> None:
        with self.changed:
            conn = self.arrived.pop(name)
        with conn:
            conn.sendall(text.encode() + b"\n")

    def close(self) -> None:
        self.closed = True
        self.server.close()
        with self.changed:
            for conn in self.arrived.values():
                conn.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(30)
            try:
                name = conn.makefile("rb").readline().decode().strip()
            except OSError:
                conn.close()
                continue
            with self.changed:
                self.arrived[name] = conn
                self.changed.notify_all()


def _serve(world: World) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env["HOME"] = str(world.home)
    return subprocess.Popen(
        [str(ASSAY), "serve", "--concurrency", "2", "--once", "--poll", "0.2"],
        cwd=world.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _add(world: World, contract: Path) -> str:
    added = world.repo.main("task", "add", "--contract", str(contract), "--json")
    assert added.returncode == 0, added.stderr
    return str(json.loads(added.stdout)["id"])


def _run_of(world: World, task_id: str, timeout: float = 20.0) -> str:
    """The id of the task's run (its dispatch id), once the ledger has it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(world.root / ".assay" / "assay.db") as db:
            query = "SELECT dispatch_id FROM runs WHERE task_id = ?"
            row = db.execute(query, (task_id,)).fetchone()
        if row is not None:
            return str(row[0])
        time.sleep(0.1)
    raise AssertionError(f"task {task_id} has no run after {timeout:.0f} s")


def test_a_coder_cannot_fire_another_runs_halt(world: World) -> None:
    """Two tasks under `assay serve --concurrency 2`: the attacker, told the victim's dispatch
    id while both run, fires the victim's block halt through `--state-dir` and by naming its
    id; the victim, released only after that, lands as if nothing had happened."""
    gate = Gate()
    fire = f'--dispatch-id "$V" --condition {BLOCK} --fire --evidence "from another task"'
    victim = world.contract(
        "victim.yaml",
        [f"{gate.call('victim')} >/dev/null", "echo note > NOTE.md"],
        extra=gate.network,
    )
    attacker = world.contract(
        "attacker.yaml",
        [
            f"V=$({gate.call('attacker')})",
            f'assay halt check --state-dir "$ASSAY_HALT_STATE_DIR" {fire}; echo "attack 1: $?"',
            f'assay halt check {fire}; echo "attack 2: $?"',
            f"{gate.call('attacker-done')} >/dev/null",
            "echo other > OTHER.md",
        ],
        extra=gate.network,
    )
    victim_task = _add(world, victim)
    _add(world, attacker)
    served = _serve(world)
    try:
        gate.wait("victim")
        gate.wait("attacker")
        victim_run = _run_of(world, victim_task)
        gate.tell("attacker", victim_run)
        gate.wait("attacker-done")
        gate.tell("attacker-done")
        gate.tell("victim")  # the victim's coder ends only now: the attack came first
        _, err = served.communicate(timeout=90)
    finally:
        served.kill()
        gate.close()
    assert served.returncode == 0, err
    world.assert_coder_ran()
    [payload] = [p for p in world.repo.payloads() if p["run_id"] == victim_run]
    assert world.fired(payload) == [], "another task's coder fired the victim's halt"
    assert payload["status"] == "ready", payload["reason"]
    state = json.loads((world.root / ".assay" / "halt-state" / f"{victim_run}.json").read_text())
    assert [h["name"] for h in state["halts"] if h["fired_at"]] == []
    shown = json.loads(world.repo.main("task", "show", victim_task, "--json").stdout)
    assert shown["status"] == "done", shown
    # Both attacks were made and refused, naming the reason.
    assert world.logged("attack 1: 1") and world.logged("attack 2: 1")
    assert world.logged("halt-check-dispatch-refused")


def test_a_planted_lock_link_makes_the_engine_create_nothing_on_the_host(world: World) -> None:
    """The lock file beside the state file, replaced by a link to the user's
    `.git/index.lock`: the engine's next lock of the state (a firing, the attestation at
    close) must not create it, and the run lands."""
    target = world.root / ".git" / "index.lock"
    lock = ".$ASSAY_DISPATCH_ID.json.lock"
    contract = world.contract(
        "lock-link.yaml",
        [
            f'ln -sf {target} "$ASSAY_HALT_STATE_DIR/{lock}"; echo "link 1: $?"',
            f'ln -sf {target} "$(dirname "$ASSAY_HALT_RELAY")/{lock}"; echo "link 2: $?"',
            # A firing now: the engine locks the state file while the coder runs.
            'assay halt check --dispatch-id "$ASSAY_DISPATCH_ID" '
            '--condition halt-budget-exhausted --fire --evidence "spent"',
            "echo note > NOTE.md",
        ],
        land="merge",
    )
    done = world.run(contract)
    world.assert_coder_ran()
    assert not os.path.lexists(target), "the engine created the user's .git/index.lock"
    payload = world.payload(done)
    assert payload["status"] == "merged", payload["reason"]
    assert world.logged("link 1: 1") and world.logged("link 2: 1")
    world.assert_git_unchanged(merged=True)
    assert git(world.root, "show", "main:NOTE.md") == "note"
    assert not list(Path("/tmp").glob(f"assay-halt-{payload['run_id']}-*"))  # relays gone


def test_one_seat_cannot_take_over_the_relay_and_erase_another_seats_block_halt(
    world: World,
) -> None:
    """Seats: 2. Seat 1 removes `$ASSAY_HALT_RELAY` and binds a socket of its own there that
    answers `{"ok": true}`; seat 2 then fires a block halt; seat 1 writes the state file
    back to ARMED. The firing still holds the task: exit 3, nothing lands."""
    gate = Gate()
    # A listener of its own at the relay's path, answering every request {"ok": true}.
    fake_relay = (
        r"""python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); """
        r"""s.bind(sys.argv[1]); s.listen(8); [(c:=s.accept()[0], c.recv(65536), """
        r"""c.sendall(b'{\"ok\": true}\n'), c.close()) for _ in iter(int, 1)]" """
    )
    state = '"$ASSAY_HALT_STATE_DIR/$ASSAY_DISPATCH_ID.json"'
    contract = world.contract(
        "seats.yaml",
        [
            'echo "relay at $ASSAY_HALT_RELAY"',
            'if [ "$ASSAY_SEAT" = 1 ]; then',
            '  if rm -f "$ASSAY_HALT_RELAY"; then',
            f'    {fake_relay} "$ASSAY_HALT_RELAY" >/dev/null 2>&1 &',
            '    i=0; while [ ! -S "$ASSAY_HALT_RELAY" ] && [ $i -lt 100 ]; do',
            "      sleep 0.05; i=$((i+1))",
            '    done; [ -S "$ASSAY_HALT_RELAY" ] && echo "relay re""placed"',
            "  fi",
            f"  {gate.call('seat-1-ready')} >/dev/null",
            f"  {UNFIRE} {state} && echo 'state re''stored'",
            "  echo note > NOTE.md",
            "else",
            f"  {gate.call('seat-2-waiting')} >/dev/null",
            '  assay halt check --dispatch-id "$ASSAY_DISPATCH_ID" '
            f'--condition {BLOCK} --fire --evidence "dropped prod table"; echo "fired: $?"',
            f"  {gate.call('seat-2-fired')} >/dev/null",
            "fi",
        ],
        land="merge",
        extra="seats: 2\n" + gate.network,
    )
    result: list[subprocess.CompletedProcess[str]] = []
    running = threading.Thread(target=lambda: result.append(world.run(contract)))
    running.start()
    try:
        gate.wait("seat-1-ready")  # seat 1 did what it could to the relay first
        gate.wait("seat-2-waiting")
        gate.tell("seat-2-waiting")
        gate.wait("seat-2-fired")
        gate.tell("seat-2-fired")
        gate.tell("seat-1-ready")  # then seat 1 tries to take the firing back
    finally:
        running.join(timeout=120)
        gate.close()
    [done] = result
    world.assert_coder_ran()
    payload = world.payload(done)
    assert world.fired(payload) == [BLOCK], "seat 1 erased seat 2's block halt"
    assert done.returncode == 3, done.stderr
    assert payload["status"] == "blocked" and payload["task_status"] == "held"
    world.assert_git_unchanged(merged=False)
    assert world.logged("fired: 1")  # seat 2's block halt, as seed 002 answers it
    assert not world.logged("relay replaced") and not world.logged("state restored")
    relays = {m for p in world.logs() for m in RELAY_AT.findall(p.read_text(errors="replace"))}
    assert len(relays) == 2, relays  # a relay of each seat's own
    assert not any(Path(r).parent.exists() for r in relays)  # gone with their dispatches
