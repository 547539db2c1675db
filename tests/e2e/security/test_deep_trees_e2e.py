"""A hostile coder's deep tree, through the real `assay run`: 1,100 nested folders in its work
tree and 1,100 in its `.git` (deeper than Python's recursion limit). The run used to land,
then crash removing the seat (exit 4), and every later `assay serve --once`, `assay gc` and
`assay run --resume` crashed on the same folder, so no queued task ever ran again. Now the
candidate is over its depth budget (a block halt with the figure, the task held), the run
closes normally, its seat is gone, and the queue goes on."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from support.deep import remove_deep
from support.repo import git

if TYPE_CHECKING:
    from conftest import World

DEPTH = 1_100
# One `mkdir -p` of a path 2,200 bytes long (PATH_MAX is 4,096), a file at the bottom.
NEST = (
    'p="{where}/$(printf "{name}/%.0s" $(seq {depth}))"; '
    'mkdir -p "$p" && echo bottom > "$p/at-the-bottom.txt" || exit 1'
)


def test_a_seat_1100_folders_deep_closes_normally_and_the_queue_goes_on(world: World) -> None:
    try:
        contract = world.contract(
            "deep.yaml",
            [
                "echo note > NOTE.md",
                NEST.format(where=".", name="d", depth=DEPTH),
                NEST.format(where=".git", name="g", depth=DEPTH),
            ],
            land="branch",
        )
        done = world.run(contract)
        world.assert_coder_ran()
        assert done.returncode == 3, (done.stderr or done.stdout)[-3000:]
        payload = world.payload(done)
        assert payload["status"] == "blocked", payload
        assert payload["reason"].startswith("block halt fired: halt-scope-breach"), payload
        (fired,) = payload["halts"]["fired"]
        assert "over max_depth 64" in json.dumps(fired), fired
        assert git(world.root, "for-each-ref", "refs/heads/assay/") == ""
        assert not (world.root / ".assay" / "seats").exists()  # the seat went with the run
        home = {"HOME": str(world.home)}

        # A task queued afterwards is served: nothing the deep seat left stops the queue.
        later = world.contract("later.yaml", ["echo more > MORE.md"], land="branch")
        added = world.repo.main("task", "add", "--contract", str(later), "--json", **home)
        assert added.returncode == 0, added.stderr
        task_id = json.loads(added.stdout)["id"]
        served = world.repo.main("serve", "--once", "--no-web", "--poll", "0.2", **home)
        assert served.returncode == 0, served.stderr[-3000:]
        assert (
            f"task {task_id}: ready: " in served.stderr and "; the task is done" in served.stderr
        ), served.stderr

        collected = world.repo.main("gc", "--older-than", "0", "--json", **home)
        assert collected.returncode == 0, collected.stderr[-3000:]
        assert json.loads(collected.stdout)["failed"] == []

        resumed = world.repo.main("run", "--resume", **home)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "no interrupted run to resume" in resumed.stderr
    finally:
        # Whatever happened, no deep tree stays for pytest's own (recursive) clean-up.
        remove_deep(world.root)
