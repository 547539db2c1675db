"""A service's periodic gc (serve's, a worker's; in-process): a leftover it cannot remove is
said once, not at every collection, and the service goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.cli.gc import collect_between
from assay.core.gc import GcPlan, Leftover
from assay.core.vocab import LeftoverKind
from assay.engine.operations import gc
from assay.engine.operations.gc import GcReport


class Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.append(text)


def test_a_leftover_gc_cannot_remove_is_said_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stuck = Leftover(kind=LeftoverKind.SEATS, target=str(tmp_path / "r1"), run_id="r1")
    other = Leftover(kind=LeftoverKind.SEATS, target=str(tmp_path / "r2"), run_id="r2")
    failures = [[stuck], [stuck], [stuck, other]]

    def collect_garbage(**_: Any) -> GcReport:
        report = GcReport(plan=GcPlan(remove=[], skip=[]), older_than=0, dry_run=False)
        report.failed = [(x, f"{x.target}/f: Permission denied") for x in failures.pop(0)]
        return report

    monkeypatch.setattr(gc, "collect_garbage", collect_garbage)
    workspace: Any = type("W", (), {"repo": tmp_path, "home": tmp_path})()
    display, said = Said(), set[str]()
    for _ in range(3):
        collect_between(workspace, None, 0, display.say, said)  # type: ignore[arg-type]
    told = [line for line in display.lines if line.startswith("could not remove")]
    assert told == [
        f"could not remove seats {tmp_path / 'r1'}: {tmp_path / 'r1'}/f: Permission denied",
        f"could not remove seats {tmp_path / 'r2'}: {tmp_path / 'r2'}/f: Permission denied",
    ]
