"""A run whose halt state file disappears mid-run still closes; attestation failure is a
payload warning and a line on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from support.repo import CHECK_TESTS, make_repo


def test_a_state_file_removed_after_the_coder_is_a_warning_and_the_run_closes(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    done = repo.main(
        "run",
        "Make slugify keep digits.",
        "--coder",
        "command",
        "--coder-command",
        repo.put("fixed.py", "src/slug.py"),
        "--validator",
        # Removed after the engine's last read of it (a removal while the coder runs is
        # tampering, a block): only the attestation at close meets the missing file.
        f"rm {repo.root}/.assay/halt-state/*.json && {CHECK_TESTS}",
        "--land",
        "branch",
        # Unconfined on purpose: the validator stands in for whatever removes the state file
        # from assay's own folder, which the seat's sandbox hides from every seat process.
        "--sandbox",
        "none",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "ready" and payload["task_status"] == "done"
    assert payload["attempts"] == {
        "total": 1,
        "coder_dispatches": 1,
        "history": [{"attempt": 1, "outcome": "passed"}],
    }
    warnings = payload["halts"]["warnings"]
    assert [w["name"] for w in warnings] == ["halt-check-state-file-missing"]
    assert warnings[0]["severity"] == "warn"
    assert warnings[0]["detail"].startswith("attestation at close failed: no state file at ")
    shown = " ".join(done.stderr.split())
    assert "attestation at close failed: no state file at" in shown
    on_disk = json.loads(
        (repo.root / ".assay" / "runs" / payload["run_id"] / "payload.json").read_text()
    )
    assert on_disk["halts"]["warnings"] == warnings
