"""Many ``assay halt check`` processes on one dispatch at once: no update is ever lost."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from assay.adapters.store.halt_files import read_state
from assay.core.halts import CANONICAL_HALTS

if TYPE_CHECKING:
    from conftest import Armed, Assay

CANONICAL = [(n.value, s.value) for n, s in CANONICAL_HALTS.items()]
# 7 canonical + 13 of the task's own: one distinct halt for each of the 20 processes.
ADDITIONS = [(f"halt-task-{i:02d}", ("block", "warn", "log")[i % 3]) for i in range(13)]
HALTS = [*CANONICAL, *ADDITIONS]
SEVERITY = dict(HALTS)


def _finish(procs: list[tuple[str, str, subprocess.Popen[str]]]) -> dict[str, tuple[int, Any]]:
    results: dict[str, tuple[int, Any]] = {}
    for name, _mode, proc in procs:
        out, err = proc.communicate(timeout=60)
        assert out.endswith("\n"), (name, out, err)
        results[name] = (proc.returncode, json.loads(out))
    return results


def test_twenty_processes_on_twenty_halts_lose_nothing(
    assay: Assay, arm_dispatch: Callable[..., Armed]
) -> None:
    armed = arm_dispatch(HALTS, dispatch_id="busy")
    names = [name for name, _ in HALTS]
    # Interleave fires and queries so both kinds race each other over the whole file.
    to_fire = names[0::2]
    to_query = names[1::2]
    assert len(to_fire) + len(to_query) == 20
    assert {SEVERITY[n] for n in to_fire} == {"block", "warn", "log"}

    procs: list[tuple[str, str, subprocess.Popen[str]]] = []
    for name in names:  # every process is started before any is waited on
        args = ["halt", "check", *armed.flags(), "--condition", name]
        if name in to_fire:
            args += ["--fire", "--evidence", f"evidence for {name}"]
        procs.append((name, "fire" if name in to_fire else "query", assay.popen(*args)))
    results = _finish(procs)

    for name in to_fire:
        code, doc = results[name]
        assert code == (1 if SEVERITY[name] == "block" else 0), doc
        assert doc["fired"] is True
        assert doc["transition"]["from"] == "ARMED"
    for name in to_query:
        code, doc = results[name]
        assert code == 0, doc
        assert doc["checked"] is True
        assert doc["transition_applied"] is True

    # Every single update is in the file, and the file is valid.
    state = read_state(armed.state_file)
    on_disk = armed.load()
    assert on_disk["schema_version"] == "1.0.0"
    assert [h["name"] for h in on_disk["halts"]] == names
    by_name = {h.name: h for h in state.halts}
    for name in to_fire:
        halt = by_name[name]
        assert halt.lifecycle.value == "FIRED", name
        assert halt.evidence == {"detail": f"evidence for {name}"}
        assert halt.fired_at == results[name][1]["current_state"]["fired_at"]
    for name in to_query:
        halt = by_name[name]
        assert halt.lifecycle.value == "CHECKED", name
        assert halt.evidence is None
        assert halt.fired_at is None
    leftovers = sorted(p.name for p in armed.state_dir.iterdir())
    assert leftovers == [".busy.json.lock", "busy.json"]


def test_racing_fires_of_one_block_halt_have_exactly_one_winner(
    assay: Assay, arm_dispatch: Callable[..., Armed]
) -> None:
    armed = arm_dispatch(CANONICAL, dispatch_id="race")
    target = "halt-secret-exposure"
    fire = ["halt", "check", *armed.flags(), "--condition", target, "--fire", "--evidence"]
    procs = [(str(i), "fire", assay.popen(*fire, f"racer {i}")) for i in range(6)]
    results = _finish(procs)
    winners = [i for i, (_, doc) in results.items() if doc.get("fired") is True]
    assert len(winners) == 1, results
    for i, (code, doc) in results.items():
        assert code == 1, doc
        if i not in winners:
            assert doc["violations"][0]["halt_class"] == "halt-check-sticky-rejection"
            assert doc["current_state"]["evidence"] == {"detail": f"racer {winners[0]}"}
    assert armed.halt(target)["evidence"] == {"detail": f"racer {winners[0]}"}
