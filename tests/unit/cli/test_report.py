"""A coder's report file cannot hurt the run: a FIFO or a directory there is one warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.repo import CHECK_TESTS, FIXED, make_repo

from assay.adapters.store.sql import Ledger


@pytest.mark.parametrize(
    ("make_report", "warning"),
    [
        ('mkfifo "$ASSAY_REPORT_PATH"', "a FIFO"),
        ('mkdir "$ASSAY_REPORT_PATH"', "a directory"),
    ],
    ids=["fifo", "directory"],
)
def test_a_report_that_is_not_a_file_is_one_warning(
    tmp_path: Path, make_report: str, warning: str
) -> None:
    repo = make_repo(tmp_path)
    (repo.fixes / "fixed.py").write_text(FIXED)
    done = repo.main(
        "run",
        "Make slugify keep digits.",
        "--coder",
        "command",
        "--coder-command",
        f"{repo.put('fixed.py', 'src/slug.py')} && {make_report}",
        "--validator",
        CHECK_TESTS,
        "--land",
        "branch",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    shown = " ".join(done.stderr.split())  # the progress display wraps long lines
    assert f"coder report discarded: it is not a regular file ({warning})" in shown
    payload = json.loads(done.stdout)
    assert payload["status"] == "ready" and payload["task_status"] == "done"
    assert payload["attempts"]["total"] == 1
    assert payload["attempts"]["coder_dispatches"] == 1
    assert payload["coder_report"] is None or payload["coder_report"]["summary"] is None
    with Ledger.open(f"sqlite:///{repo.root / '.assay' / 'assay.db'}") as ledger:
        events = ledger.events(run_id=payload["run_id"])
    warnings = [e.data["message"] for e in events if e.kind == "run.warning"]
    assert sum("coder report discarded" in w for w in warnings) == 1
