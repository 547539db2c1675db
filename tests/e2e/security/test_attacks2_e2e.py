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


# A stand-in for the `claude` CLI: a judge that does what a diff's injected text asks of it,
# within what its sandbox lets it do (write in the run's judges folder). It ranks the blind
# candidates (judge 1 best-first, judge 2 worst-first, so the panel splits and deliberates)
# and, as judge 1 in round 0, leaves `judge-1/round-1` as a link to the operator's home.
FAKE_JUDGE = """#!/bin/sh
cat >/dev/null
here="$(pwd)"
labels="$(ls *.diff | sed 's/\\.diff$//' | tr '\\n' ' ')"
case "$here" in
  */judge-2/*) order="$(echo $labels | tr ' ' '\\n' | sort -r | tr '\\n' ' ')" ;;
  *) order="$labels" ;;
esac
json="$(printf '%s' "$order" | sed 's/\\([A-Z]\\)/\\\\"\\1\\\\"/g; s/ *$//; s/ /, /g')"
answer='{{\\"ranking\\": ['"$json"'], \\"reasons\\": \\"ok\\"}}'
head='{{"type":"result","subtype":"success","is_error":false,"num_turns":1'
tail='"stop_reason":"end_turn","total_cost_usd":0,"usage":{{"input_tokens":1,"output_tokens":1}}}}'
line="$(printf '%s,"result":"%s",%s' "$head" "$answer" "$tail")"
echo "$line"
case "$here" in
  */judge-1/round-0/candidates) {judge1} ;;
  */judge-2/round-0/candidates) {judge2} ;;
esac
"""


def test_a_cli_judge_cannot_plant_a_link_the_next_round_follows(world: World) -> None:
    """Two seats, two `claude` judges that disagree, one round of deliberation. A CLI judge
    reads the coders' diffs (text a coder wrote to steer it), and its sandbox lets it write
    anywhere in the run's judges folder, shared by every judge and round. Round 0's judge 1
    leaves `judge-1/round-1` as a link to the operator's home. For round 1 the host follows
    it: it deletes the operator's own `~/candidates` folder (`write_scratch` clears a folder of
    that name) and writes the blinded diffs there. (The judge itself then fails to start: the
    log is opened without following links, so the home is not bound; the host's writes and
    deletion already happened.) Principle 9: what a sandboxed process could write is never
    followed. At fault: `seating.judge_sandbox` (writable: the whole judges folder) and
    `panel.judge_blind` / `judging.cli.write_scratch` (mkdir, remove and write through links)."""
    (world.home / "candidates").mkdir()
    (world.home / "candidates" / "keep.txt").write_text("the operator's own file\n")
    world.commit({"a.txt": "good\n"})
    bindir = world.tmp / "fakebin"
    bindir.mkdir()
    fake = bindir / "claude"
    plant = f"ln -s {world.home} ../../round-1"
    fake.write_text(FAKE_JUDGE.format(judge1=plant, judge2=":"))
    fake.chmod(0o755)
    contract = world.contract(
        "judged.yaml",
        ['echo "seat $ASSAY_SEAT" > a.txt'],
        extra="seats: 2\njudges: 2\njudge: claude\ndeliberate_rounds: 1\n",
    )
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "ANTHROPIC_API_KEY": "k"}  # claude needs one
    done = world.run(contract, env, args=["--progress", "always"])
    world.assert_coder_ran()
    payload = world.payload(done)
    assert payload["tally"] is not None, f"the judges never ran: {payload['reason']}"
    assert (world.root / ".assay" / "runs" / payload["run_id"]).exists()
    assert world.home_changes() == [], f"the operator's home changed: {world.home_changes()}"


def test_one_cli_judge_cannot_rewrite_another_judges_answer(world: World) -> None:
    """Two seats, two `claude` judges that disagree (judge 1: A first, judge 2: B first). Both
    run at once, and each one's sandbox binds the whole judges folder writable, so judge 1
    (steered by a diff's text) waits for judge 2's output file and rewrites it in place with
    its own ranking; the host reads judge 2's answer back from that file. The panel must stay
    split (one vote each), never two votes for judge 1's choice: a judge writes only its own
    folder. At fault: `seating.judge_sandbox` (writable: every judge's folder) and
    `process.run_process` (the answer read back from a file the sandbox can write)."""
    world.commit({"a.txt": "good\n"})
    bindir = world.tmp / "fakebin"
    bindir.mkdir()
    fake = bindir / "claude"
    other = "../../../judge-2/round-0/claude.log.out"
    wait = f"for i in $(seq 1 100); do [ -s {other} ] && break; sleep 0.05; done"
    forge = f'{wait}; echo "$line" > {other}'
    fake.write_text(FAKE_JUDGE.format(judge1=forge, judge2="sleep 2"))
    fake.chmod(0o755)
    contract = world.contract(
        "judged.yaml",
        ['echo "seat $ASSAY_SEAT" > a.txt'],
        extra="seats: 2\njudges: 2\njudge: claude\n",
    )
    done = world.run(contract, {"PATH": f"{bindir}:/usr/bin:/bin", "ANTHROPIC_API_KEY": "k"})
    world.assert_coder_ran()
    payload = world.payload(done)
    tally = payload["tally"]
    assert tally is not None, f"the judges never ran: {payload['reason']}"
    assert sorted(tally["first_choices"].values()) == [1, 1], f"judge 2's vote was forged: {tally}"
