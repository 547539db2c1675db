"""stop_recorded_groups(): ends a recorded group only while it is provably the one recorded."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from assay.adapters.process_groups import (
    GROUPS_FILE,
    record_group,
    recording_groups,
    start_time,
    stop_recorded_groups,
)


def test_groups_are_recorded_only_while_a_run_records(tmp_path: Path) -> None:
    record = tmp_path / GROUPS_FILE
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        record_group(other.pid, tmp_path)
        assert not record.exists()
        with recording_groups(record):
            record_group(other.pid, tmp_path)
            record_group(other.pid, tmp_path)
        assert (
            record.read_text().splitlines()
            == [f"{other.pid} {start_time(other.pid)} {tmp_path}"] * 2
        )
    finally:
        other.kill()
        other.wait()


def test_a_recorded_group_id_now_someone_elses_is_left_alone(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        started = start_time(other.pid)
        assert started is not None
        record = tmp_path / GROUPS_FILE
        # Recorded with another start time: the id was reused, the group is not ours.
        record.write_text(f"{other.pid} {started + 1} /nowhere\ngarbage line\n")
        assert stop_recorded_groups(record, grace=0.2) == []
        assert other.poll() is None
        # Recorded as it is: ours, ended.
        record.write_text(f"{other.pid} {started} /nowhere\n")
        assert stop_recorded_groups(record, grace=2) == [other.pid]
        assert other.wait(timeout=5) == -signal.SIGTERM
    finally:
        other.kill()
        other.wait()
