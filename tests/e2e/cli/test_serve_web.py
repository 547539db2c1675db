"""``assay serve`` and its dashboard: the flags, the refusals, the token made on the first start
and its login URL, a clean stop, as a real process (its tokens in a config folder of the
test's own, ``ASSAY_CONFIG_DIR``)."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.repo import ASSAY, Repo, make_repo

READY = 20.0
ENV_TOKEN = "tok-from-env-0123456789"
LOGIN = re.compile(r"^dashboard login: (http://\S+/login\?token=(\S+)) ")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Serving:
    """``assay serve …`` running in the repository; its stderr lines read as they come."""

    def __init__(self, repo: Repo, *args: str, **env: str) -> None:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
        environ.update(env)
        self.proc = subprocess.Popen(
            [str(ASSAY), "serve", "--poll", "0.1", *args],
            cwd=repo.root,
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.said: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, start: str, timeout: float = READY) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            self.said.append(line)
            if line.startswith(start):
                return line
        raise AssertionError(f"never said {start!r}; said: {self.said}")

    def handles(self, signum: int) -> bool:
        """Whether serve has installed its handler for ``signum`` yet (Linux: SigCgt), so a
        signal sent now is its graceful stop, not the default death of a starting process."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
        return bool(int(caught.split()[1], 16) >> (signum - 1) & 1)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 15) -> int:
        deadline = time.monotonic() + READY
        while self.proc.poll() is None and not self.handles(signum):
            assert time.monotonic() < deadline, "serve never handled the signal"
            time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.send_signal(signum)
        code = self.proc.wait(timeout)
        while not self.lines.empty():
            self.said.append(self.lines.get())
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return make_repo(tmp_path_factory.mktemp("serve-web"))


@pytest.fixture
def config(tmp_path: Path) -> str:
    return str(tmp_path / "config")


@pytest.fixture
def serving(repo: Repo) -> Iterator[list[Serving]]:
    started: list[Serving] = []
    yield started
    for one in started:
        one.kill()


def run(repo: Repo, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    environ.update(env)
    return subprocess.run(
        [str(ASSAY), "serve", *args],
        cwd=repo.root,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--web-token", "short"], {}, "at least 16 bytes"),
        ([], {"ASSAY_WEB_TOKEN": "123456789012345"}, "at least 16 bytes"),
        (["--web-host", "0.0.0.0", "--web-anonymous-read"], {}, "loopback dashboard only"),
    ],
)
def test_refuses_a_short_token_and_anonymous_reading_off_loopback(
    repo: Repo, config: str, args: list[str], env: dict[str, str], says: str
) -> None:
    port = str(free_port())
    done = run(repo, "--web-only", "--web-port", port, *args, ASSAY_CONFIG_DIR=config, **env)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert not Path(config).exists()  # refused before any token was made


@pytest.mark.parametrize(
    ("args", "says"),
    [(["--no-web", "--web-only"], "choose one"), (["--once", "--web-only"], "choose one")],
)
def test_refuses_contradicting_flags(repo: Repo, config: str, args: list[str], says: str) -> None:
    done = run(repo, *args, ASSAY_CONFIG_DIR=config)
    assert done.returncode == 2 and says in done.stderr


def test_refuses_a_taken_port(repo: Repo, config: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(repo, "--web-only", "--web-port", str(port), ASSAY_CONFIG_DIR=config)
    assert done.returncode == 2
    assert f"port {port}" in done.stderr and "already in use" in done.stderr
    assert "Traceback" not in done.stderr
    assert not Path(config).exists()  # no dashboard, no token made


def test_serves_the_dashboard_beside_the_queue_and_stops_on_sigterm(
    repo: Repo, serving: list[Serving], config: str
) -> None:
    port = free_port()
    one = Serving(repo, "--web-port", str(port), ASSAY_CONFIG_DIR=config)
    serving.append(one)
    said = one.wait_for("dashboard: ")
    assert said == f"dashboard: http://127.0.0.1:{port}/"
    login = LOGIN.match(one.wait_for("dashboard login: "))
    assert login is not None, one.said
    base = f"http://127.0.0.1:{port}/"
    assert httpx.get(base, timeout=10).status_code == 401  # loopback too needs the token
    bearer = {"Authorization": f"Bearer {login.group(2)}"}
    events = httpx.Client(timeout=10, headers=bearer)
    with events.stream("GET", f"{base}events") as stream:
        assert stream.status_code == 200  # an open live stream must not hold the stop
        started = time.monotonic()
        assert one.stop(signal.SIGTERM) == 143
    assert time.monotonic() - started < 10
    assert any(line.startswith("served 0 run(s)") for line in one.said), one.said
    with pytest.raises(httpx.ConnectError):
        httpx.get(base, timeout=2)


def test_the_first_start_makes_a_token_and_prints_its_login_url_once(
    repo: Repo, serving: list[Serving], config: str
) -> None:
    port = free_port()
    first = Serving(repo, "--web-only", "--web-port", str(port), ASSAY_CONFIG_DIR=config)
    serving.append(first)
    login = LOGIN.match(first.wait_for("dashboard login: "))
    assert login is not None and "'operator'" in first.said[-1]
    url, secret = login.group(1), login.group(2)
    stored = Path(config) / "web-tokens.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and secret not in stored.read_text()
    with httpx.Client(timeout=10) as browser:
        landed = browser.get(url, follow_redirects=False)
        assert landed.status_code == 303 and landed.headers["location"] == "/"
        assert browser.get(f"http://127.0.0.1:{port}/").status_code == 200  # the session
    assert first.stop() == 143
    again = Serving(repo, "--web-only", "--web-port", str(port), ASSAY_CONFIG_DIR=config)
    serving.append(again)
    said = again.wait_for("dashboard login: ")
    assert "token=" not in said and "assay token add NAME" in said
    assert secret not in "\n".join(again.said)


def test_web_only_with_a_token_from_the_environment(
    repo: Repo, serving: list[Serving], config: str
) -> None:
    port = free_port()
    one = Serving(
        repo,
        "--web-only",
        "--web-host",
        "0.0.0.0",
        "--web-port",
        str(port),
        ASSAY_WEB_TOKEN=ENV_TOKEN,
        ASSAY_CONFIG_DIR=config,
    )
    serving.append(one)
    one.wait_for("dashboard: ")
    said = one.wait_for("dashboard login: ")
    assert ENV_TOKEN not in said and "token=" not in said  # the operator's own: not printed
    base = f"http://127.0.0.1:{port}/"
    assert httpx.get(base, timeout=10).status_code == 401
    bearer = {"Authorization": f"Bearer {ENV_TOKEN}"}
    assert httpx.get(base, headers=bearer, timeout=10).status_code == 200
    assert one.stop(signal.SIGINT) == 130
    assert "assay: SIGINT: stopping the dashboard" in one.said  # no coders to stop here
    assert "dashboard stopped" in one.said


def test_anonymous_reading_on_loopback_shows_pages_not_actions(
    repo: Repo, serving: list[Serving], config: str
) -> None:
    port = free_port()
    one = Serving(
        repo, "--web-only", "--web-port", str(port), "--web-anonymous-read", ASSAY_CONFIG_DIR=config
    )
    serving.append(one)
    assert "reading open" in one.wait_for("dashboard: ")
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(timeout=10) as anyone:
        assert anyone.get(f"{base}/").status_code == 200
        refused = anyone.post(
            f"{base}/tasks/t-x/hold",
            data={"csrf": anyone.cookies.get("assay_csrf", "")},
            headers={"Origin": base},
        )
        assert refused.status_code == 401
    assert one.stop() == 143


def test_no_web_serves_nothing(repo: Repo, serving: list[Serving], config: str) -> None:
    port = free_port()
    one = Serving(repo, "--no-web", "--web-port", str(port), ASSAY_CONFIG_DIR=config)
    serving.append(one)
    deadline = time.monotonic() + READY
    while not one.handles(signal.SIGTERM):  # serving now: a dashboard would have bound first
        assert one.proc.poll() is None and time.monotonic() < deadline, one.said
        time.sleep(0.05)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
    assert one.stop() == 143
    assert not [line for line in one.said if line.startswith("dashboard")]
    assert not Path(config).exists()  # no dashboard, no token made


def test_serve_temporal_serves_the_dashboard_over_the_shared_ledger(
    repo: Repo, serving: list[Serving], postgres_url: str, temporal_server: Any, config: str
) -> None:
    port = free_port()
    one = Serving(
        repo,
        "--temporal",
        temporal_server.address,
        "--task-queue",
        f"web-{port}",
        "--web-port",
        str(port),
        ASSAY_DATABASE_URL=postgres_url,
        ASSAY_CONFIG_DIR=config,
    )
    serving.append(one)
    assert one.wait_for("dashboard: ") == f"dashboard: http://127.0.0.1:{port}/"
    login = LOGIN.match(one.wait_for("dashboard login: "))
    assert login is not None
    bearer = {"Authorization": f"Bearer {login.group(2)}"}
    page = httpx.get(f"http://127.0.0.1:{port}/", headers=bearer, timeout=10)
    assert page.status_code == 200 and "Queue" in page.text
    assert one.stop(signal.SIGTERM) == 143
    assert any("workflow(s)" in line for line in one.said), one.said


def test_a_stopped_serve_temporal_stops_waiting_on_a_workflow_no_worker_runs(
    repo: Repo, serving: list[Serving], postgres_url: str, temporal_server: Any, config: str
) -> None:
    """No worker listens on its queue, so the workflow it submitted never ends: SIGTERM must
    end serve at once all the same (the workflow goes on; a worker finishes it later)."""
    added = repo.main(
        *("task", "add", "a task no worker runs", "--no-check"),
        *("--coder", "command", "--coder-command", "true", "--validator", "true"),
        ASSAY_DATABASE_URL=postgres_url,
    )
    assert added.returncode == 0, added.stderr
    one = Serving(
        repo,
        *("--temporal", temporal_server.address, "--task-queue", f"nobody-{free_port()}"),
        "--no-web",
        ASSAY_DATABASE_URL=postgres_url,
        ASSAY_CONFIG_DIR=config,
    )
    serving.append(one)
    one.wait_for("t")  # "<task>: submitted as workflow <id>"
    assert any("submitted as workflow" in line for line in one.said), one.said
    start = time.monotonic()
    assert one.stop(signal.SIGTERM, timeout=10) == 143
    assert time.monotonic() - start < 5
    assert any("serve stopped waiting; its workflow goes on" in line for line in one.said), one.said
