"""`assay gc` never touches a run that is running: its seats and its halt relay stay while
another `assay run` process works in them. The rest of gc is tests/unit/cli/test_gc.py."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from support.repo import ASSAY, make_repo

from tests.unit.cli.test_gc import _contract, _gc


def test_gc_never_touches_a_running_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = _contract(repo, "fixed", before="sleep 4 && ")
    running = subprocess.Popen(
        [str(ASSAY), "run", "--contract", str(contract), "--json"],
        cwd=repo.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seats = repo.root / ".assay" / "seats"
        deadline = time.monotonic() + 30
        while not list(seats.glob("*/seat-1/src")) and time.monotonic() < deadline:
            time.sleep(0.1)
        [seat] = list(seats.glob("*/seat-1"))
        code, report = _gc(repo, "--older-than", "0")
        assert code == 0, report
        assert seat.is_dir() and (seat / "src" / "slug.py").is_file()
        skipped = [s for s in report["skipped"] if s["run_id"] == seat.parent.name]
        # Its seats and its halt relay (listening in /tmp) both stay.
        assert sorted(s["kind"] for s in skipped) == ["relay", "seats"]
        assert {s["reason"] for s in skipped} == {f"run {seat.parent.name} is running"}
    finally:
        out, err = running.communicate(timeout=60)
    assert running.returncode == 0, err
    assert json.loads(out)["status"] == "ready"  # land: branch, the default
