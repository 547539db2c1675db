"""Second pass of attacks on the seat boundary, through the real `assay run` with a `command`
coder and the default `sandbox: bwrap`. Each test asserts outcomes only (what main holds),
never how the engine gets there; each fails today for the reason its docstring gives."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from support.repo import git

if TYPE_CHECKING:
    from conftest import World


def test_a_moved_base_whose_combined_tree_failed_its_checks_is_revalidated(world: World) -> None:
    """Two seats: seat 1 adds `x.txt`, seat 2 adds `x.txt` and `marker.txt`; the validator
    refuses a tree holding both (an interaction), so seat 2 fails and seat 1 wins. While the
    validators run, the operator commits `marker.txt` to main. Seat 1's change on the moved
    main is exactly seat 2's tree, which failed: it must be revalidated (and blocked), never
    landed as "validated". Today `fx.validated` records every tree the checks ran on,
    whatever their verdict, and `landing.land_squash` skips the revalidation of any tree in
    it: main receives a tree its validator refuses."""
    world.commit({"a.txt": "good\n"})
    contract = world.contract(
        "moved.yaml",
        [
            "echo x > x.txt",
            'if [ "$ASSAY_SEAT" = 2 ]; then echo marker > marker.txt; fi',
        ],
        validators=json.dumps(
            [
                {
                    "id": "apart",
                    "kind": "command",
                    "run": "sleep 3; ! { test -f x.txt && test -f marker.txt; }",
                }
            ]
        ),
        land="merge",
        extra="seats: 2\n",
    )
    result: list[subprocess.CompletedProcess[str]] = []
    running = threading.Thread(target=lambda: result.append(world.run(contract)))
    running.start()
    try:
        runs = world.root / ".assay" / "runs"
        deadline = time.monotonic() + 60
        while not list(runs.glob("*/attempt-1/seat-*/validators")):
            assert time.monotonic() < deadline, "the validators never started"
            time.sleep(0.05)
        (world.root / "marker.txt").write_text("marker\n")
        git(world.root, "add", "marker.txt")
        git(world.root, "commit", "-q", "-m", "the operator moves main")
    finally:
        running.join(timeout=120)
    [done] = result
    world.assert_coder_ran()
    payload = world.payload(done)
    tree = world.tree("main")
    assert not ("x.txt" in tree and "marker.txt" in tree), (
        f"main holds a tree its validator refuses: {payload['status']}: {payload['reason']}"
    )
