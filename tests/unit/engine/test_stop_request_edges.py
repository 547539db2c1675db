"""`assay task stop` against what its tests did not try: what stands where the stop request
a folder), a stop sent to a run on this machine that does not watch for one, and a coder that
runs in assay's own process. The rule: a stop always ends the run, its coders stopped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.in_process import fresh_repo, ledger_of, run_main
from support.llm_requests import make_request
from support.model_server import ModelServer, Turn

from assay.adapters import process_groups
from assay.adapters.coders.llm import LlmCoder
from assay.adapters.stop_request import STOP_FILE, StopAsk, asked, read_ask, watching
from assay.engine.local.run_lock import hold_run_lock

UNKNOWN = StopAsk(action="hold", by="unknown", via="unknown", reason="stop requested")


def _asked_within(run_dir: Path, seconds: float) -> list[StopAsk | None]:
    """What ``asked()`` says for ``run_dir``, when it answers within ``seconds`` (else [])."""
    said: list[StopAsk | None] = []

    def look() -> None:
        with watching(run_dir):
            said.append(asked())

    looker = threading.Thread(target=look, daemon=True)
    looker.start()
    looker.join(seconds)
    return said


def test_a_pipe_where_the_request_is_stops_the_run_and_never_blocks_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / STOP_FILE)
    try:
        assert _asked_within(tmp_path, 5) == [UNKNOWN]  # was: blocked at every boundary
    finally:  # a reader still blocked on the pipe gets its end of file
        with contextlib.suppress(OSError):
            os.close(os.open(tmp_path / STOP_FILE, os.O_WRONLY | os.O_NONBLOCK))


def test_a_link_where_the_request_is_is_a_request_whose_target_is_never_read(
    tmp_path: Path,
) -> None:
    forged = tmp_path / "elsewhere.json"
    forged.write_text(json.dumps({"action": "cancel", "by": "mallory", "via": "web"}))
    (tmp_path / STOP_FILE).symlink_to(forged)
    assert read_ask(tmp_path) == UNKNOWN  # was: the link's target, as who asked
    (tmp_path / STOP_FILE).unlink()
    (tmp_path / STOP_FILE).symlink_to(tmp_path / "nothing")  # dangling: still a request
    assert _asked_within(tmp_path, 5) == [UNKNOWN]  # was: no request at all
    (tmp_path / STOP_FILE).unlink()
    (tmp_path / STOP_FILE).mkdir()
    assert read_ask(tmp_path) == UNKNOWN
    (tmp_path / STOP_FILE).rmdir()
    assert _asked_within(tmp_path, 5) == [None]


def test_a_group_started_after_a_dangling_link_request_is_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / STOP_FILE).symlink_to(tmp_path / "nothing")
    ended: list[tuple[int, int]] = []
    monkeypatch.setattr(process_groups, "start_time", lambda pid: 1)
    monkeypatch.setattr(process_groups.os, "killpg", lambda pid, sig: ended.append((pid, sig)))
    with process_groups.recording_groups(tmp_path / process_groups.GROUPS_FILE):
        process_groups.record_group(4242, tmp_path)
    assert ended == [(4242, signal.SIGTERM)]


def test_an_in_process_coder_stops_at_a_stop_request_as_at_a_signal(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """The ``llm`` coder (model calls made by assay itself: no process group to end) stops at
    its run's stop request as at a signal, before its next model call."""
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: elsewhere\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / STOP_FILE).write_text(json.dumps({"action": "hold", "by": "ada", "via": "cli"}))
    model_server.script(*[Turn.call("list_files", {"path": "."}) for _ in range(5)])
    with watching(run_dir):
        result = LlmCoder().dispatch(make_request(model_server, worktree))
    assert len(model_server.completions) == 0, f"{len(model_server.completions)} model calls"
    assert result.error is not None and "stopped" in result.error


def test_a_stop_is_refused_for_a_live_run_here_that_no_stop_request_reaches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run an ``assay worker`` (Temporal) holds on this machine reads no stop request (its
    workflow stops it): without ``ASSAY_TEMPORAL`` the stop is refused, exit 2, and nothing is
    written to its folder, never answered "stopping" for a run it cannot reach."""
    repo = fresh_repo(tmp_path, monkeypatch)
    code, out, err = run_main(
        capsys, "task", "add", "do it", "--coder", "command", "--coder-command", "true",
        "--sandbox", "none", "--json",
    )  # fmt: skip
    assert code == 0, err
    task_id = json.loads(out)["id"]
    with ledger_of(repo) as ledger:
        task = ledger.get_task(task_id)
        task.start(datetime.now(UTC), run_id="r-held")
        ledger.start_run(task, "r-held")
    run_dir = repo / ".assay" / "runs" / "r-held"
    run_dir.mkdir(parents=True)
    lock = hold_run_lock(run_dir)  # as the worker's open holds it, no `watching` around it
    try:
        code, out, err = run_main(capsys, "task", "stop", task_id, "--wait", "0")
    finally:
        os.close(lock)
    assert code == 2, (code, out, err)
    assert not (run_dir / STOP_FILE).exists()


def test_a_stop_that_does_not_wait_still_kills_a_coder_that_ignores_term(tmp_path: Path) -> None:
    """``assay task stop --wait 0`` sends the request and exits: the groups are ended in a
    thread of its own, which, a daemon, died with the command between the TERM and the KILL,
    so a coder that ignores TERM lived on (and its run with it, until the coder's timeout).
    Here the sender is a Python process that sends and exits, as that command does."""
    stubborn = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"], start_new_session=True
    )
    try:
        started = process_groups.start_time(stubborn.pid)
        (tmp_path / process_groups.GROUPS_FILE).write_text(f"{stubborn.pid} {started} /\n")
        send = (
            "import sys; from pathlib import Path; "
            "from assay.adapters.stop_request import StopAsk, send_ask; "
            "send_ask(Path(sys.argv[1]), StopAsk('hold', 'ada', 'cli', 'r'))"
        )
        subprocess.run([sys.executable, "-c", send, str(tmp_path)], check=True, timeout=60)
        assert read_ask(tmp_path) == StopAsk("hold", "ada", "cli", "r")
        stubborn.wait(timeout=process_groups.STOP_GRACE_SECONDS + 5)  # was: it lived on
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(stubborn.pid, signal.SIGKILL)
        stubborn.wait()
