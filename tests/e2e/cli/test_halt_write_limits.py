"""``assay halt`` when the state file cannot be written: a file-size limit (RLIMIT_FSIZE, which
root cannot override, unlike a read-only folder) set on the ``assay`` process alone. Set in the
test run's own process it would bind pytest too, so these two stay end-to-end; the commands'
other behaviour is tests/unit/cli/test_halt_cli.py."""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from support.halt_shapes import arm_failure, check_failure

from assay.core.halts import CANONICAL_HALTS

if TYPE_CHECKING:
    from support.cli_fixtures import Armed, Assay

CANONICAL = [(n.value, s.value) for n, s in CANONICAL_HALTS.items()]
BLOCK = "halt-anchor-resolution-failure"


def _limit_file_size() -> None:
    # Python ignores SIGXFSZ, so writing past the limit fails with EFBIG ("File too large"):
    # a filesystem error that root cannot override.
    resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))


def test_arm_state_file_write_failure_leaves_nothing_half_written(
    assay: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    write_contract(tmp_path / "c.yaml", CANONICAL)
    ran = assay(
        "halt",
        "arm",
        "--contract",
        "c.yaml",
        "--dispatch-id",
        "d-1",
        "--state-dir",
        "states",
        preexec_fn=_limit_file_size,
    )
    assert "File too large" in arm_failure(
        ran, tmp_path / "c.yaml", "halt-state-file-write-failure"
    )
    assert [p.name for p in (tmp_path / "states").iterdir() if not p.name.endswith(".lock")] == []


def test_check_state_file_write_failure(assay: Assay, armed: Armed) -> None:
    # Read-only directories do not stop root; a file-size limit does.
    before = armed.state_file.read_bytes()
    assert len(before) > 256
    ran = assay(
        "halt", "check", *armed.flags(), "--condition", BLOCK, "--fire", "--evidence", "x",
        preexec_fn=_limit_file_size,
    )  # fmt: skip
    doc = check_failure(ran, armed, BLOCK, "halt-check-state-file-write-failure")
    assert "File too large" in doc["violations"][0]["detail"]
    assert doc["current_state"]["lifecycle"] == "ARMED"
    assert armed.state_file.read_bytes() == before
    assert sorted(p.name for p in armed.state_dir.iterdir()) == [".d-1.json.lock", "d-1.json"]
