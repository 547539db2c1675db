"""Faults met while assay itself writes a run's files, through the `assay` command (in-process).

A seat folder, the validators' log folder or the payload that cannot be written is the
machine's fault: the seat or the attempt is refunded as an environment error that names the
cause, never exit 4 and never a traceback; a payload that cannot be written still leaves the
run closed in the ledger (the ledger is the truth) with one line on stderr. The coder here
(a command) breaks the run folder itself, exactly where assay writes next (it finds its log
folder as the folder of ``$ASSAY_PROMPT_FILE``): a write the seat's sandbox refuses on
purpose, so those coders run with `--sandbox none` (standing in for the machine breaking the
folder). The file-size limit's faults are e2e (RLIMIT_FSIZE is set on a whole process).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.repo import Repo, make_repo

SEAT = 'd=$(dirname "$ASSAY_PROMPT_FILE"); echo "# touched" >> src/slug.py; '
LIMIT = 4_000_000  # far above the ledger, payload and git objects; below the model's answer


def run(repo: Repo, coder: str, *extra: str, expect: int) -> tuple[dict[str, Any], str]:
    done = repo.main(
        "run", "break the run folder", "--coder-command", SEAT + coder, *extra, "--json"
    )
    assert done.returncode == expect, done.stderr
    assert "Traceback" not in done.stderr
    payload: dict[str, Any] = json.loads(done.stdout)
    return payload, done.stderr


def show(repo: Repo, task_id: str) -> dict[str, Any]:
    shown = repo.main("task", "show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    loaded: dict[str, Any] = json.loads(shown.stdout)
    return loaded


def test_a_seat_folder_that_cannot_be_made_is_the_seats_environment_error(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    # Attempt 1 is blocked by the validator and leaves a file where attempt 2's folder goes.
    coder = ': > "$d/../../attempt-2"'
    extra = ("--validator", "false", "--land", "none", "--max-recovery", "1")
    extra += ("--sandbox", "none")  # the run folder is outside what the sandbox may write
    payload, _ = run(repo, coder, *extra, expect=1)
    assert payload["halt_type"] == "environment_error" and payload["status"] == "failed"
    assert payload["attempt_spent"] is False and payload["task_status"] == "failed"
    assert "a folder of the run is not a folder writing " in payload["reason"]
    assert payload["reason"].endswith("attempt-2/seat-1")
    assert payload["attempts"]["total"] == 2 and payload["attempts"]["coder_dispatches"] == 2
    [seat] = payload["candidates"]
    assert "the coder's environment failed" in seat["fault"]
    shown = show(repo, payload["task_id"])
    assert shown["runs"][-1]["settle_row"] == "failed_machine_fault"


def test_a_validator_log_folder_that_cannot_be_made_refunds_the_attempt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    extra = ("--validator", "true", "--land", "none", "--sandbox", "none")
    payload, _ = run(repo, ': > "$d/validators"', *extra, expect=1)
    assert payload["halt_type"] == "environment_error" and payload["status"] == "failed"
    assert payload["attempt_spent"] is False
    assert payload["reason"].startswith("environment error: a folder of the run is not a folder")
    assert payload["reason"].endswith("seat-1/validators")
    assert payload["attempts"]["coder_dispatches"] == 1  # the coder ran, and is counted
    shown = show(repo, payload["task_id"])
    assert shown["runs"][-1]["settle_row"] == "failed_machine_fault"


def test_a_payload_that_cannot_be_written_still_closes_the_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    coder = 'mkdir "$d/../../payload.json"'
    extra = ("--validator", "true", "--land", "none")
    extra += ("--sandbox", "none")  # the run folder is outside what the sandbox may write
    payload, stderr = run(repo, coder, *extra, expect=0)
    assert payload["status"] == "ready" and payload["task_status"] == "done"
    flat = " ".join(stderr.split())
    assert "the payload was not written to " in flat and "payload.json: Is a directory" in flat
    shown = show(repo, payload["task_id"])
    assert shown["status"] == "done"
    [record] = shown["runs"]
    assert record["status"] == "ready" and record["settle_row"] == "succeeded"
    kept = repo.main("payload", "show", payload["run_id"])  # the ledger keeps it
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["run_id"] == payload["run_id"]
