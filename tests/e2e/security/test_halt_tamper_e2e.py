"""A coder cannot erase a block halt it fired. In its sandbox the state file is out of its
reach: the erase changes nothing and the firing holds the task. Unconfined (``--sandbox
none``), removing the file or writing the fired halt back to ARMED holds the task for a human
and the payload names the tampering."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.repo import ASSAY, CHECK_TESTS, Repo, git, make_repo

FIRE = (
    f'{ASSAY} halt check --dispatch-id "$ASSAY_DISPATCH_ID" '
    "--condition halt-irreversible-action --fire --evidence 'dropped prod table' >/dev/null; "
)
STATE = '"$ASSAY_HALT_STATE_DIR/$ASSAY_DISPATCH_ID.json"'
# Puts every halt back to ARMED, as if nothing had fired.
UNFIRE = (
    "python3 -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); "
    '[h.update(lifecycle="ARMED", evidence=None, fired_at=None) for h in d["halts"]]; '
    f'json.dump(d, open(p, "w"))\' {STATE}; '
)


@pytest.mark.parametrize(
    ("erase", "why"),
    [
        (f"rm -f {STATE}; ", "it was removed"),
        (UNFIRE, "halt-irreversible-action fired, and the file no longer says so"),
    ],
    ids=["removed", "rewritten-armed"],
)
def test_an_unconfined_coder_that_erases_its_fired_halt_is_held(
    tmp_path: Path, erase: str, why: str
) -> None:
    repo = make_repo(tmp_path)
    base = git(repo.root, "rev-parse", "main")
    done = _run(repo, erase, "--sandbox", "none")
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "blocked" and payload["halt_type"] == "escalate"
    assert payload["task_status"] == "held"
    fired = {h["name"]: h for h in payload["halts"]["fired"]}
    assert fired["halt-irreversible-action"]["detail"] == "dropped prod table"
    tampered = fired["halt-state-tampered"]["detail"]
    assert tampered.startswith(
        "the halt state file was removed or tampered with while the coder ran: "
    )
    assert why in tampered
    assert "halt-state-tampered" in payload["reason"]
    assert git(repo.root, "rev-parse", "main") == base  # nothing landed
    # The firing is in the ledger's journal, journaled by the halt command as it fired.
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as db:
        rows = db.execute(
            "SELECT data FROM events WHERE kind = 'halt.fired' AND run_id = ?",
            (payload["run_id"],),
        ).fetchall()
    journaled = [json.loads(data) for (data,) in rows]
    assert {"name": "halt-irreversible-action", "by": "halt check"}.items() <= journaled[0].items()


@pytest.mark.parametrize("erase", [f"rm -f {STATE}; ", UNFIRE], ids=["remove", "rewrite-armed"])
def test_a_sandboxed_coder_cannot_reach_the_state_file_to_erase_its_halt(
    tmp_path: Path, erase: str
) -> None:
    repo = make_repo(tmp_path)
    base = git(repo.root, "rev-parse", "main")
    done = _run(repo, erase)
    assert done.returncode == 3, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "blocked" and payload["task_status"] == "held"
    fired = {h["name"]: h["detail"] for h in payload["halts"]["fired"]}
    assert fired == {"halt-irreversible-action": "dropped prod table"}  # nothing tampered
    state = json.loads(
        (repo.root / ".assay" / "halt-state" / f"{payload['run_id']}.json").read_text()
    )
    [halt] = [h for h in state["halts"] if h["name"] == "halt-irreversible-action"]
    assert halt["evidence"] == {"detail": "dropped prod table"} and halt["fired_at"]
    assert git(repo.root, "rev-parse", "main") == base


def _run(repo: Repo, erase: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return repo.main(
        "run", "Make slugify keep digits.",
        "--coder", "command",
        "--coder-command", FIRE + erase + repo.put("fixed.py", "src/slug.py"),
        "--validator", CHECK_TESTS,
        "--land", "merge",
        "--json",
        *flags,
    )  # fmt: skip
