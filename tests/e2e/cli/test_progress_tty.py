"""The live progress: on a terminal, a footer with the elapsed time and one line per running
seat, redrawn while nothing happens, and the run's lines kept above it; off a terminal,
nothing but the result (no live display, no ANSI), unless ``--progress always`` asks."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from support.repo import ASSAY, Repo, make_repo, replay_contract

from assay.adapters import process
from assay.cli.progress_live import LiveProgress, clock_text
from assay.cli.signals import graceful_stop
from assay.engine.effects import RunEvent

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def waiting_coder(repo: Repo, go: Path) -> str:
    wait = f"for i in $(seq 600); do [ -e {go} ] && break; sleep 0.1; done"
    return f"{wait}; {repo.put('fixed.py', 'src/slug.py')}"


class Terminal:
    """The reading end of a pty that a child's stderr is written to."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.seen = b""

    def text(self) -> str:
        return ANSI.sub("", self.seen.decode("utf-8", "replace"))

    def read_until(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            if not self.read(0.2):
                continue
        raise AssertionError(f"{pattern!r} never appeared in:\n{self.text()[-2000:]}")

    def read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the child closed its end
            return False
        self.seen += chunk
        return bool(chunk)


def test_a_terminal_gets_a_live_seat_line_with_its_elapsed_time(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    go = tmp_path / "go"
    term = Terminal()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env.update(COLUMNS="160", TERM="xterm")
    proc = subprocess.Popen(
        [
            str(ASSAY), "run", "Make slugify keep digits", "--coder", "command",
            "--coder-command", waiting_coder(repo, go), "--validator", "true",
            "--sandbox", "none", "--json",
        ],
        cwd=repo.root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=term.slave,
        env=env,
    )  # fmt: skip
    os.close(term.slave)
    try:
        # The seat's line ticks while the coder works, without any event: a redrawn footer.
        term.read_until(r"seat 1 \[command\] coding · 0:0[2-9]")
        term.read_until(r"assay 0:0[2-9] elapsed")
        assert "\x1b[" in term.seen.decode("utf-8", "replace")  # drawn, not printed
    finally:
        go.touch()
    stdout = proc.communicate(timeout=120)[0]
    while term.read(0.2):
        pass
    assert proc.returncode == 0, term.text()
    # The lines stay in the scrollback; the result on stdout is untouched by the display.
    shown = term.text()
    assert "decision: land (seat 1)" in shown and re.search(r"run r\S+ took \d+:\d\d", shown)
    assert json.loads(stdout)["status"] == "ready"


CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


def screen(raw: str) -> list[str]:
    """The lines a terminal shows after ``raw``: carriage returns, newlines, cursor up and
    line erasure played as a terminal plays them (colours and cursor visibility ignored)."""
    lines, row, col, at = [""], 0, 0, 0
    while at < len(raw):
        found = CSI.match(raw, at)
        if found:
            args, command = found.groups()
            if command == "A":
                row = max(0, row - int(args or 1))
            elif command == "K":
                lines[row] = "" if args == "2" else lines[row][:col]
            at = found.end()
            continue
        char = raw[at]
        at += 1
        if char == "\r":
            col = 0
        elif char == "\n":
            row += 1
            col = 0
            lines.extend([""] * (row + 1 - len(lines)))
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + char + line[col + 1 :]
            col += 1
    return lines


def test_the_result_never_shares_a_line_with_the_footer(tmp_path: Path) -> None:
    """stdout and stderr on the same terminal: the result lines (stdout) are written while the
    live footer (stderr) is drawn, each on a line of its own, and the footer is gone after."""
    repo = make_repo(tmp_path)
    term = Terminal()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env.update(COLUMNS="200", TERM="xterm")
    proc = subprocess.Popen(
        [
            str(ASSAY), "run", "Make slugify keep digits", "--coder", "command",
            "--coder-command", f"sleep 1; {repo.put('wrong.py', 'src/slug.py')}",
            "--validator", "echo the last words; exit 3", "--max-recovery", "0",
            "--sandbox", "none",
        ],
        cwd=repo.root, stdin=subprocess.DEVNULL, stdout=term.slave, stderr=term.slave, env=env,
    )  # fmt: skip
    os.close(term.slave)
    while proc.poll() is None or term.read(0.2):
        term.read(0.2)
    shown = screen(term.seen.decode("utf-8", "replace"))
    assert proc.returncode == 1, "\n".join(shown)
    assert not [line for line in shown if "elapsed" in line], shown  # the footer went
    results = [line for line in shown if line.startswith(("blocked: ", "task ", "payload: "))]
    assert [line.split()[0] for line in results] == ["blocked:", "task", "payload:"], shown
    assert results[0] == "blocked: validators still block after 1 attempt(s): blocked by v1"
    assert "    ✗ v1: `echo the last words; exit 3` exited 3" in shown
    assert "      │ the last words" in shown


def test_off_a_terminal_the_progress_is_quiet_unless_asked_for(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = str(replay_contract(repo, "fixed", land="branch"))
    quiet = repo.assay("run", "--contract", contract)
    assert quiet.returncode == 0, quiet.stderr
    assert "decision:" not in quiet.stderr and "seat 1" not in quiet.stderr, quiet.stderr
    assert "\x1b" not in quiet.stderr
    assert "ready:" in quiet.stdout and "payload: " in quiet.stdout  # the result is still said
    never = repo.assay("run", "--contract", contract, "--progress", "never")
    assert never.returncode == 0 and "decision:" not in never.stderr, never.stderr
    plain = repo.assay("run", "--contract", contract, "--progress", "always")
    assert plain.returncode == 0, plain.stderr
    assert "decision: land (seat 1)" in plain.stderr and "\x1b" not in plain.stderr
    logged = repo.assay("run", "--contract", contract, ASSAY_PROGRESS="always")
    assert "decision: land (seat 1)" in logged.stderr, logged.stderr


def footer_of(progress: LiveProgress) -> list[str]:
    return [line.plain for line in progress.footer()]


def test_the_footer_has_a_line_per_running_seat_with_its_coder_state_and_time() -> None:
    now = [100.0]
    progress = LiveProgress(console=Console(file=io.StringIO()), clock=lambda: now[0])
    progress(RunEvent("run.started", {"run_id": "r1", "seats": 2}))
    progress(RunEvent("attempt.started", {"attempt": 1}))
    progress(RunEvent("dispatch.started", {"attempt": 1, "seat": 1, "coder": "claude"}))
    progress(RunEvent("dispatch.started", {"attempt": 1, "seat": 2, "coder": "codex"}))
    now[0] = 165.0
    assert footer_of(progress) == [
        "assay 1:05 elapsed",
        "  r1 · attempt 1 · coding · 1:05",
        "    seat 1 [claude] coding · 1:05",
        "    seat 2 [codex] coding · 1:05",
    ]
    no_change = {"attempt": 1, "seat": 2, "coder": "codex", "files": [], "viable": False}
    progress(RunEvent("seat.finished", no_change))
    progress(RunEvent("seat.finished", {"attempt": 1, "seat": 1, "coder": "claude",
                                        "files": ["a.py"], "viable": True}))  # fmt: skip
    progress(RunEvent("validator.finished", {"attempt": 1, "seat": 1, "validator": "tests",
                                             "severity": "pass"}))  # fmt: skip
    now[0] = 200.0
    seats = footer_of(progress)[2:]
    assert seats == [
        "    seat 1 [claude] validator tests: pass · 1:40",
        "    seat 2 [codex] no candidate · 1:05",  # it stopped counting when it ended
    ]
    progress(RunEvent("attempt.decided", {"attempt": 1, "action": "proceed", "next": "land",
                                          "seat": 1}))  # fmt: skip
    assert footer_of(progress) == ["assay 1:40 elapsed", "  r1 · attempt 1 · land · 1:40"]
    progress.ended()
    assert footer_of(progress) == ["assay 1:40 elapsed"]


def test_elapsed_time_reads_as_clock_time() -> None:
    assert [clock_text(s) for s in (0, 7.9, 65, 3599, 3723)] == [
        "0:00", "0:07", "1:05", "59:59", "1:02:03",
    ]  # fmt: skip


def test_a_stop_is_said_on_a_line_of_its_own_never_through_the_footer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C while the footer is drawn: the signal's line is printed above the footer by the
    display's next line, not written into the footer's last line (which glued the two, and
    left a stale footer line behind when the footer was redrawn)."""
    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)  # the same terminal, as stderr and console
    monkeypatch.setattr(process, "_stop", [])
    progress = LiveProgress(console=Console(file=terminal, force_terminal=True, width=100))
    with graceful_stop(notice=progress.notice), progress:
        progress(RunEvent("run.started", {"run_id": "r1", "seats": 1}))
        progress(RunEvent("dispatch.started", {"attempt": 1, "seat": 1, "coder": "command"}))
        time.sleep(0.3)  # the footer is drawn
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)  # redrawn meanwhile
        progress(RunEvent("seat.finished", {"attempt": 1, "seat": 1, "coder": "command",
                                            "files": [], "viable": False}))  # fmt: skip
        progress.ended()
    assert process.stop_requested() == signal.SIGINT
    shown = [line for line in screen(terminal.getvalue()) if line.strip()]
    assert shown == [
        "run r1 · 1 seat(s)",
        "assay: SIGINT: stopping the coders and closing the run",
        "  seat 1 [command]: no change",
        "run r1 took 0:00",
    ], shown
