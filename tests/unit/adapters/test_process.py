"""run_process: a timeout kills the whole process group, and what was written is kept."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from assay.adapters.process import environment_fault, run_process

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for a reaper counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def _gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


def _pids(stdout: str, label: str) -> list[int]:
    return [int(line.split()[1]) for line in stdout.splitlines() if line.startswith(label + " ")]


def test_timeout_kills_the_grandchildren_and_keeps_the_output(tmp_path: Path) -> None:
    script = "sleep 100 & echo grandchild $!; echo shell $$; echo written; wait"
    started = time.monotonic()
    ran = run_process(
        ["/bin/sh", "-c", script], cwd=tmp_path, env=ENV, timeout=0.5, log_path=tmp_path / "p.log"
    )
    assert time.monotonic() - started < 3.0
    assert ran.timed_out
    assert ran.exit_code is None
    assert "written" in ran.stdout
    grandchild = _pids(ran.stdout, "grandchild")[0]
    shell = _pids(ran.stdout, "shell")[0]
    assert _gone(grandchild), "the background sleep survived the timeout"
    assert _gone(shell)
    assert _group_members(shell) == []  # no live process of that group is left


def test_a_grandchild_that_ignores_sigterm_is_killed_too(tmp_path: Path) -> None:
    script = "(trap '' TERM; sleep 100) & echo grandchild $!; wait"
    ran = run_process(
        ["/bin/sh", "-c", script], cwd=tmp_path, env=ENV, timeout=0.5, log_path=tmp_path / "p.log"
    )
    assert ran.timed_out
    assert _gone(_pids(ran.stdout, "grandchild")[0])


def test_a_background_process_left_by_a_finished_child_is_killed(tmp_path: Path) -> None:
    script = "sleep 100 >/dev/null 2>&1 & echo grandchild $!"
    ran = run_process(
        ["/bin/sh", "-c", script], cwd=tmp_path, env=ENV, timeout=5, log_path=tmp_path / "p.log"
    )
    assert ran.exit_code == 0 and not ran.timed_out
    assert _gone(_pids(ran.stdout, "grandchild")[0])


def test_output_is_streamed_to_the_log_and_kept_on_timeout(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "run.log"
    ran = run_process(
        ["/bin/sh", "-c", "echo before; echo oops >&2; sleep 30"],
        cwd=tmp_path,
        env=ENV,
        timeout=0.5,
        log_path=log,
    )
    assert ran.timed_out
    assert ran.stdout == "before\n"
    assert ran.stderr == "oops\n"
    assert "before" in log.read_text() and "oops" in log.read_text()
    assert log.with_suffix(".log.out").read_text() == "before\n"
    assert ran.tail() == "before\noops"


def test_exit_code_and_stdin(tmp_path: Path) -> None:
    ran = run_process(
        ["/bin/sh", "-c", "cat; exit 3"],
        cwd=tmp_path,
        env=ENV,
        timeout=5,
        log_path=tmp_path / "p.log",
        stdin="hello",
    )
    assert (ran.exit_code, ran.stdout, ran.timed_out) == (3, "hello", False)


def test_a_child_that_never_reads_stdin_still_times_out(tmp_path: Path) -> None:
    started = time.monotonic()
    ran = run_process(
        ["/bin/sh", "-c", "sleep 30"],
        cwd=tmp_path,
        env=ENV,
        timeout=0.5,
        log_path=tmp_path / "p.log",
        stdin="x" * 2_000_000,  # far more than a pipe buffer
    )
    assert ran.timed_out
    assert time.monotonic() - started < 3.0


def test_a_missing_executable_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_process(
            ["assay-no-such-tool-xyz"], cwd=tmp_path, env=ENV, timeout=5, log_path=tmp_path / "l"
        )


def test_the_child_runs_in_cwd_with_exactly_the_given_env(tmp_path: Path) -> None:
    ran = run_process(
        ["/bin/sh", "-c", 'pwd; echo "[$ONLY]"; echo "[$HOME]"'],
        cwd=tmp_path,
        env={**ENV, "ONLY": "this"},
        timeout=5,
        log_path=tmp_path / "p.log",
    )
    assert ran.stdout.splitlines() == [str(tmp_path), "[this]", "[]"]


# -- machine faults are named, never "could not start" ----------------------------------------

_UNDER_LIMIT = """
import resource, sys
from pathlib import Path
from assay.adapters.process import EnvironmentFault, run_process
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))
try:
    run_process(["/bin/sh", "-c", "head -c 1000000 /dev/zero"], cwd=Path("."), env={},
                timeout=30, log_path=Path(sys.argv[1]))
except EnvironmentFault as exc:
    print(exc)
"""


def test_output_cut_at_the_file_size_limit_is_an_environment_fault(tmp_path: Path) -> None:
    import subprocess
    import sys

    log = tmp_path / "logs" / "coder.log"
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_LIMIT, str(log)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"a log hit the file-size limit (RLIMIT_FSIZE) writing {log}.out"
    )


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.EFBIG, "a log hit the file-size limit (RLIMIT_FSIZE) writing /x/log"),
        (errno.ENOSPC, "no space left on device writing /x/log"),
        (errno.EROFS, "the run folder is not writable: /x/log"),
        (errno.EACCES, "the run folder is not writable: /x/log"),
    ],
)
def test_machine_faults_are_named(code: int, words: str) -> None:
    fault = environment_fault(OSError(code, os.strerror(code)), Path("/x/log"))
    assert fault is not None and str(fault).startswith(words)


def test_other_errors_are_not_machine_faults() -> None:
    assert environment_fault(OSError(errno.ENOENT, "missing"), Path("/x")) is None


def test_a_log_path_under_a_file_is_not_a_machine_fault(tmp_path: Path) -> None:
    """ENOTDIR is a wrong path (the caller's bug), not the machine's: it passes unchanged."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(NotADirectoryError):
        run_process(["true"], cwd=tmp_path, env={}, timeout=5, log_path=blocker / "x" / "l.log")


def test_links_a_child_plants_at_its_log_names_are_never_followed(tmp_path: Path) -> None:
    """Unconfined, a child can reach its log folder: a link it leaves at the log's name (to a
    file of the operator's) or at its captured output's (to a secret) changes nothing."""
    outside = tmp_path / "operator"
    outside.mkdir()
    (outside / ".bashrc").write_text("# start-up\n")
    (outside / "secret.txt").write_text("operator-secret\n")
    log = tmp_path / "logs" / "coder.log"
    script = (
        f"ln -sf {outside}/.bashrc {log}; ln -sf {outside}/secret.txt {log}.out; "
        f"ln -sf {outside}/secret.txt {log}.err; echo mine"
    )
    ran = run_process(["sh", "-c", script], cwd=tmp_path, env=ENV, timeout=10, log_path=log)
    assert ran.stdout == "mine\n" and "secret" not in ran.stderr
    assert (outside / ".bashrc").read_text() == "# start-up\n"
    assert (outside / "secret.txt").read_text() == "operator-secret\n"
    assert not log.is_symlink() and "mine" in log.read_text()
    assert "operator-secret" not in log.read_text()
