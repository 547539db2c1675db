"""A hostile coder killing the `assay` that runs it, through the real `assay run`. In its own
PID namespace the coder cannot see, let alone signal, any process outside its sandbox: its
parent is the sandbox's init, which ignores the signals of its namespace. So the run is not
interrupted at all: it finishes on its own, with the coder's candidate and an exit code of 0
(not merely a state `--resume` could recover).

`kill -9 $PPID` is safe to try anywhere: from an unconfined coder it kills the `assay` this
test started, nothing else. `pkill -f assay` and `kill -9 -1` are not: unconfined, they would
signal every process of the machine the user may signal (as root: all of them). The coder
therefore tries those two only once it has checked that it is in a PID namespace other than
this test's; otherwise it says so and stops, and the test fails on that.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from support.repo import git

if TYPE_CHECKING:
    from conftest import World

# What the coder prints when it is not confined: computed, as the log also shows the command.
UNCONFINED = "UNCONFINED-PID-NAMESPACE-9"


def test_the_coder_cannot_kill_assay(world: World) -> None:
    ours = os.readlink("/proc/self/ns/pid")
    contract = world.contract(
        "kill_parent.yaml",
        [
            "echo note > NOTE.md",
            "kill -9 $PPID",
            'ns="$(readlink /proc/self/ns/pid)"',
            f'if [ -z "$ns" ] || [ "$ns" = "{ours}" ]; then',
            '  echo "UNCONFINED-PID-NAMESPACE-$((3*3))"; exit 0',
            "fi",
            # Spelt in two pieces, so this shell's own command line does not match.
            'pkill -f "ass""ay"',
            'pkill -9 -f "ass""ay"',
            "kill -9 -1",
            'echo "SURVIVED-$((1+1))"',
            "exit 0",
        ],
    )
    done = world.run(contract)
    world.assert_coder_ran()
    payload = world.payload(done)  # assay was not killed: it printed its payload
    assert not world.logged(UNCONFINED), "the coder shares the PID namespace of assay"
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert payload["status"] == "ready", payload
    assert world.logged("SURVIVED-2"), "the coder itself did not get through its kills"
    branch = f"assay/{payload['run_id']}/seat-1"
    assert git(world.root, "show", f"{branch}:NOTE.md") == "note"
