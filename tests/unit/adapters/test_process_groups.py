"""stop_recorded_groups() waits only on groups with a live member."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from assay.adapters.process_groups import GROUPS_FILE, start_time, stop_recorded_groups


def _zombie() -> subprocess.Popen[bytes]:
    """A child that has exited and is not reaped yet: a zombie, alone in its group."""
    child = subprocess.Popen(["true"], start_new_session=True)
    for _ in range(200):
        if Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return child
        time.sleep(0.01)
    raise AssertionError("the child never exited")


def test_a_group_of_only_zombies_is_not_waited_on(tmp_path: Path) -> None:
    child = _zombie()
    try:
        record = tmp_path / GROUPS_FILE
        record.write_text(f"{child.pid} {start_time(child.pid)} /nowhere\n")
        start = time.monotonic()
        assert stop_recorded_groups(record, grace=3) == []  # nothing left to end
        assert time.monotonic() - start < 1  # never the grace period
        os.killpg(child.pid, 0)  # the zombie is still in its group: only reaping ends it
    finally:
        child.wait()
