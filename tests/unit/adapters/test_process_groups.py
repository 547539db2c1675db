"""The run's process groups: recorded only while a run records; stop_recorded_groups() ends a
recorded group only while it is provably the one recorded, and waits only on live members."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from assay.adapters.process_groups import (
    GROUPS_FILE,
    record_group,
    recording_groups,
    start_time,
    stop_recorded_groups,
)


def _zombie() -> subprocess.Popen[bytes]:
    """A child that has exited and is not reaped yet: a zombie, alone in its group."""
    child = subprocess.Popen(["true"], start_new_session=True)
    for _ in range(200):
        if _state(child.pid) == "Z":
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


def _member_of(pgid: int) -> int:
    """A live process of group ``pgid`` other than its leader."""
    for _ in range(200):
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != pgid:
                try:
                    fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[2]) == pgid and fields[0] != "Z":
                    return int(entry)
        time.sleep(0.01)
    raise AssertionError("the group never had a member besides its leader")


def _ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_live_member_behind_a_zombie_leader_is_ended(tmp_path: Path) -> None:
    """The leader exited (unreaped), a child it left in the group ignores TERM: KILL ends it."""
    leader = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; sleep 30 & exit 0"], start_new_session=True
    )
    try:
        member = _member_of(leader.pid)
        record = tmp_path / GROUPS_FILE
        record.write_text(f"{leader.pid} {start_time(leader.pid)} /nowhere\n")
        assert stop_recorded_groups(record, grace=0.3) == [leader.pid]
        for _ in range(200):
            if _ended(member):
                break
            time.sleep(0.01)
        assert _ended(member)
    finally:
        leader.wait()


def test_a_stopped_member_acts_on_the_term_at_once(tmp_path: Path) -> None:
    """A stopped process (SIGSTOP, Ctrl-Z) holds a TERM until it runs again: it is continued,
    so it ends by the TERM, not by the KILL after the whole grace period."""
    leader = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        os.kill(leader.pid, signal.SIGSTOP)
        record = tmp_path / GROUPS_FILE
        record.write_text(f"{leader.pid} {start_time(leader.pid)} /nowhere\n")
        start = time.monotonic()
        assert stop_recorded_groups(record, grace=3) == [leader.pid]
        assert time.monotonic() - start < 1
        assert leader.wait(timeout=5) == -signal.SIGTERM
    finally:
        leader.kill()
        leader.wait()


# The main thread ends (pthread_exit) while another thread of the process runs on: the kernel
# shows the process as a zombie ("Z") though it is alive.
MAIN_THREAD_GONE = """
import ctypes, threading, time
threading.Thread(target=time.sleep, args=(30,)).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def test_a_process_whose_main_thread_ended_is_still_a_live_member(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", MAIN_THREAD_GONE], start_new_session=True)
    try:
        for _ in range(200):
            if len(os.listdir(f"/proc/{child.pid}/task")) == 2 and _state(child.pid) == "Z":
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the main thread never ended alone")
        record = tmp_path / GROUPS_FILE
        record.write_text(f"{child.pid} {start_time(child.pid)} /nowhere\n")
        assert stop_recorded_groups(record, grace=3) == [child.pid]
        assert child.wait(timeout=5) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


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


def test_a_group_recorded_after_a_stop_request_is_ended_at_once(tmp_path: Path) -> None:
    """An operator's stop request (``stop-request.json`` beside the groups) was written before
    this group started: recording it ends it, so nothing a run starts outlives the request."""
    from assay.adapters.process_groups import STOP_FILE

    (tmp_path / STOP_FILE).write_text("{}")
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        with recording_groups(tmp_path / GROUPS_FILE):
            record_group(child.pid, tmp_path)
        assert child.wait(timeout=5) == -signal.SIGTERM
        assert (tmp_path / GROUPS_FILE).read_text().startswith(f"{child.pid} ")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
