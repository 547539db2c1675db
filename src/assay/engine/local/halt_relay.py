"""The halt relay: how ``assay halt check``, inside a coder's sandbox, acts on its halts.

A coder's sandbox hides assay's folder, its ledger and the halt state folder: the engine's state
files are written by the engine only. Each seat dispatch (one coder's turn in one attempt) gets
a relay of its own: a unix stream socket in a short private folder
(``/tmp/assay-halt-<run>-<random>/s``, mode 0700: a socket path is limited to 108 bytes, and
pytest's folders are long), bound READ-ONLY at the same path into that seat's sandbox only and
named by ``$ASSAY_HALT_RELAY``. On a read-only mount the socket accepts ``connect`` but cannot
be unlinked or replaced, and no other seat sees it. The halt command sends each query or fire
as one JSON line (:func:`assay.adapters.store.halt_relay_client.check_request`); the relay
performs the move with :func:`assay.adapters.store.halt_ops.check` on the engine's state file
of the dispatch the socket serves (never the one the line claims: another is refused),
journals a firing before it answers, and answers with seed 002's document and exit code.

The peer is untrusted: a line is read up to :data:`RELAY_MAX_LINE` bytes and for at most
``read_timeout`` seconds in all, each connection has a thread of its own (daemon, at most
``max_connections`` at once; more are closed unanswered), and nothing a peer sends can raise
out of the relay or block the engine. A firing is journaled with the armed severity.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.adapters import folders
from assay.adapters.store import halt_ops
from assay.adapters.store.halt_files import state_path, valid_dispatch_id
from assay.adapters.store.halt_relay_client import RELAY_MAX_LINE
from assay.core.halts import Violation
from assay.core.payload import HaltNotice
from assay.core.vocab import CheckHalt, HaltSeverity

SOCKET_NAME = "s"
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes, the last one a NUL
_MAX_CONDITION = 256
_SHORT_TMP = Path("/tmp")
_ID_CHARS = 40  # of the dispatch id in the folder's name: the path stays far below the limit


def folder_prefix(dispatch_id: str) -> str:
    """The relay folder's name starts with this, so recovery can find a killed run's."""
    return f"assay-halt-{dispatch_id[:_ID_CHARS]}-"


def remove_relay_folders(dispatch_id: str) -> None:
    """Remove what a run killed before its close (``kill -9``, a crash) left of its relay:
    called when recovery closes it; a folder of another user's is never touched."""
    with contextlib.suppress(OSError):
        for folder in _SHORT_TMP.glob(folder_prefix(dispatch_id) + "*"):
            with contextlib.suppress(OSError):
                info = folder.lstat()
                if folder.is_dir() and not folder.is_symlink() and info.st_uid == os.getuid():
                    folders.remove_tree(folder)


@dataclass(frozen=True)
class RelayFolder:
    """A relay folder of this user's in ``/tmp``: whose run, how old, whether it is in use."""

    path: Path
    dispatch_id: str  # its first 40 characters, as the folder's name keeps them
    modified: float  # st_mtime
    listening: bool


def relay_folders() -> list[RelayFolder]:
    """Every relay folder of this user's (another user's is never looked into)."""
    found = []
    prefix = folder_prefix("")[:-1]  # "assay-halt-"
    with contextlib.suppress(OSError):
        for folder in sorted(_SHORT_TMP.glob(prefix + "*")):
            with contextlib.suppress(OSError):
                info = folder.lstat()
                if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                    continue
                # mkdtemp's random part has no "-": the dispatch id is all before the last one.
                dispatch_id = folder.name[len(prefix) :].rpartition("-")[0]
                found.append(
                    RelayFolder(
                        folder, dispatch_id, info.st_mtime, _listening(folder / SOCKET_NAME)
                    )
                )
    return found


def remove_relay_folder(folder: Path) -> None:
    """Remove one relay folder (OSError when it could not be)."""
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{folder} is not a relay folder of this user's")
    removal = folders.remove_tree(folder)
    if not removal.complete:
        raise OSError(removal.summary())


def _listening(path: Path) -> bool:
    """Whether a relay listens on the socket at ``path``: only a refused connection or no
    socket file says no (a relay too busy to answer in time counts as there). The connection
    is closed at once, which the relay answers as an empty line."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError, NotADirectoryError):
        return False
    except OSError:  # a timeout, a full backlog: someone is there
        return True
    finally:
        probe.close()
    return True


class RelayRefused(Exception):
    """A line the relay does not act on; the reason goes back to the sender."""


@dataclass(frozen=True)
class CheckRequest:
    """One ``assay halt check``: the dispatch it claims (checked, never believed), the halt,
    and whether to fire it (with evidence) or query it."""

    dispatch_id: str
    condition: str
    fire: bool
    evidence: str | None


def parse_request(line: bytes) -> CheckRequest:
    """The request one line holds; :class:`RelayRefused` if it is not one."""
    try:
        message: Any = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise RelayRefused("not a JSON line") from None
    if not isinstance(message, dict):
        raise RelayRefused("not a JSON object")
    if message.get("op") != "check":
        raise RelayRefused("not a halt check request")
    dispatch_id, condition = message.get("dispatch_id"), message.get("condition")
    if not isinstance(dispatch_id, str) or not valid_dispatch_id(dispatch_id):
        raise RelayRefused("the dispatch id is not one")
    if not isinstance(condition, str) or not 0 < len(condition) <= _MAX_CONDITION:
        raise RelayRefused("the condition is not a halt name")
    fire, evidence = message.get("fire"), message.get("evidence")
    if not isinstance(fire, bool):
        raise RelayRefused("fire is not true or false")
    if evidence is not None and (not isinstance(evidence, str) or not fire):
        raise RelayRefused("evidence is text, and only with fire")
    return CheckRequest(dispatch_id, condition, fire, evidence)


def perform_check(
    request: CheckRequest,
    *,
    dispatch_id: str,
    state_dir: Path,
    armed: Mapping[str, HaltSeverity],
    record: Callable[[HaltNotice], None],
) -> dict[str, Any]:
    """The relay's answer to ``request`` on a socket of ``dispatch_id``'s: the document and
    exit code of the move on the engine's state file, as ``assay halt check`` would print
    them; a firing journaled (``record``) before the answer goes back. A request that claims
    another dispatch changes nothing and is answered with a violation naming it."""
    if request.dispatch_id != dispatch_id:
        return _answer(_refused_dispatch(request, dispatch_id, state_dir), 1)
    document, code = halt_ops.check(
        dispatch_id, request.condition, state_dir, fire=request.fire, evidence=request.evidence
    )
    current = document.get("current_state")
    if document.get("fired") is True and isinstance(current, dict):
        try:
            record(_notice(current, armed))
        except Exception as exc:  # a locked ledger: the file holds it; the engine reads it later
            return _answer(document, code, f"the engine could not journal the firing yet: {exc}")
    return _answer(document, code)


def _answer(document: dict[str, Any], code: int, warning: str | None = None) -> dict[str, Any]:
    return {"ok": True, "document": document, "exit_code": code, "warning": warning}


def _refused_dispatch(request: CheckRequest, dispatch_id: str, state_dir: Path) -> dict[str, Any]:
    violation = Violation(
        halt_class=CheckHalt.DISPATCH_REFUSED.value,
        detail=f"this sandbox may act on the halts of dispatch {dispatch_id} only, not on "
        f"{request.dispatch_id}'s: nothing was changed",
    )
    return {
        "checked": False,
        "fired": False,
        "dispatch_id": request.dispatch_id,
        "condition": request.condition,
        "state_file": str(state_path(state_dir, request.dispatch_id)),
        "violations": [violation.to_json()],
        "warnings": [],
    }


def _notice(current: Mapping[str, Any], armed: Mapping[str, HaltSeverity]) -> HaltNotice:
    name = str(current.get("name"))
    evidence = current.get("evidence")
    fired_at = current.get("fired_at")
    return HaltNotice(
        name=name,
        # The severity armed for the halt; the file's is the engine's own, the same.
        severity=armed.get(name) or HaltSeverity(str(current.get("severity"))),
        detail=str(evidence.get("detail", "")) if isinstance(evidence, dict) else "",
        fired_at=fired_at if isinstance(fired_at, str) else None,
    )


class HaltRelay:
    """The relay of one seat dispatch of a run: every request on its socket acts on
    ``dispatch_id``'s state file in ``state_dir``. ``record`` journals a firing (called from
    the relay's own threads; it must be thread-safe); an exception from it is a warning in
    the answer, never a crash."""

    def __init__(
        self,
        *,
        dispatch_id: str,
        state_dir: Path,
        armed: Mapping[str, HaltSeverity],
        record: Callable[[HaltNotice], None],
        read_timeout: float = 5.0,
        max_connections: int = 32,
    ) -> None:
        self.dispatch_id = dispatch_id
        self.state_dir = state_dir
        self.armed = dict(armed)
        self.record = record
        self.read_timeout = read_timeout
        self.path: Path | None = None
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopped = threading.Event()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def folder(self) -> Path | None:
        return self.path.parent if self.path is not None else None

    def start(self) -> Path:
        """Listen; the socket's path. OSError when it cannot (the caller warns and goes on)."""
        parent = _SHORT_TMP if _SHORT_TMP.is_dir() else None
        prefix = folder_prefix(self.dispatch_id)
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent)).resolve()  # mode 0700
        path = folder / SOCKET_NAME
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # not inherited by coders
        try:
            if len(str(path).encode()) > MAX_SOCKET_PATH:
                raise OSError(f"the socket path {path} is longer than {MAX_SOCKET_PATH} bytes")
            listener.bind(str(path))
            listener.listen(64)
            listener.settimeout(0.5)  # the accept loop sees a close within half a second
        except OSError:
            listener.close()
            folders.remove_tree(folder)
            raise
        self._listener, self.path = listener, path
        self._thread = threading.Thread(target=self._accept, name="assay-halt-relay", daemon=True)
        self._thread.start()
        return path

    def close(self) -> None:
        """Stop listening and remove the socket's folder (idempotent)."""
        self._stopped.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept on Linux
            listener.close()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        if self.path is not None:
            folders.remove_tree(self.path.parent)

    # -- the relay's threads ------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopped.is_set():
            listener = self._listener
            if listener is None:
                return
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed under us, or out of file descriptors for a moment
                if self._stopped.is_set():
                    return
                time.sleep(0.05)
                continue
            if not self._slots.acquire(blocking=False):
                conn.close()  # too many at once: this one is not answered
                continue
            try:
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
            except RuntimeError:  # no thread to be had: refused like an excess connection
                conn.close()
                self._slots.release()

    def _serve(self, conn: socket.socket) -> None:
        try:
            reply: dict[str, object]
            try:
                request = parse_request(self._read_line(conn))
                reply = perform_check(
                    request,
                    dispatch_id=self.dispatch_id,
                    state_dir=self.state_dir,
                    armed=self.armed,
                    record=self.record,
                )
            except RelayRefused as exc:
                reply = {"ok": False, "error": str(exc)}
            except Exception as exc:  # the engine's own failure: the peer is told, never raised
                reply = {"ok": False, "error": f"the engine could not act on it: {exc}"}
            with contextlib.suppress(OSError):
                conn.settimeout(1.0)
                conn.sendall(json.dumps(reply).encode() + b"\n")
        finally:
            conn.close()
            self._slots.release()

    def _read_line(self, conn: socket.socket) -> bytes:
        """One line, within the size bound and the time limit for the whole read."""
        deadline = time.monotonic() + self.read_timeout
        data = b""
        while b"\n" not in data:
            if len(data) > RELAY_MAX_LINE:
                raise RelayRefused(f"the line is longer than {RELAY_MAX_LINE} bytes")
            left = deadline - time.monotonic()
            if left <= 0:
                raise RelayRefused("no complete line in time")
            conn.settimeout(left)
            try:
                chunk = conn.recv(min(65536, RELAY_MAX_LINE + 1 - len(data)))
            except TimeoutError:
                raise RelayRefused("no complete line in time") from None
            except OSError as exc:
                raise RelayRefused(f"the connection failed: {exc}") from None
            if not chunk:
                break  # a line without its newline still counts: the peer closed its side
            data += chunk
        line = data.split(b"\n", 1)[0]
        if len(line) > RELAY_MAX_LINE:
            raise RelayRefused(f"the line is longer than {RELAY_MAX_LINE} bytes")
        return line
