"""Halt state files on disk: ``<state-dir>/<dispatch-id>.json``.

Every write is atomic (temporary file, fsync, rename, fsync of the directory) and every
read-modify-write holds an exclusive ``flock`` on a sibling lock file, so concurrent
``assay halt check --fire`` calls on one dispatch never lose an update. ``fcntl`` is used
rather than ``filelock`` because this path runs inside a coder's turn and must start fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from pathlib import Path

from assay.core.halts import Violation
from assay.core.statefile import HaltStateFile, parse_state_document
from assay.core.vocab import CheckHalt

TYPE_CHECKING = False  # typing is an import `assay halt check` does without (assay.core.frozen)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

DEFAULT_STATE_DIR = ".assay/halt-state"
STATE_DIR_ENV = "ASSAY_HALT_STATE_DIR"
DISPATCH_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class StateFileError(Exception):
    """A state file could not be read or written; carries the violation to report."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.detail)
        self.violation = violation


def valid_dispatch_id(dispatch_id: str) -> bool:
    return DISPATCH_ID_PATTERN.fullmatch(dispatch_id) is not None


def resolve_state_dir(flag: str | None) -> Path:
    """``--state-dir`` beats ``ASSAY_HALT_STATE_DIR`` beats ``.assay/halt-state``."""
    chosen = flag or os.environ.get(STATE_DIR_ENV) or DEFAULT_STATE_DIR
    return Path(chosen).absolute()


def state_path(state_dir: Path, dispatch_id: str) -> Path:
    if not valid_dispatch_id(dispatch_id):
        raise ValueError(f"invalid dispatch id {dispatch_id!r}")
    return state_dir / f"{dispatch_id}.json"


@contextlib.contextmanager
def locked(path: Path, *, create_dir: bool = False) -> Iterator[None]:
    """Hold an exclusive lock for ``path`` (on ``.<name>.lock`` beside it)."""
    if create_dir:
        path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.parent / f".{path.name}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_state(path: Path) -> HaltStateFile:
    """Read and validate a state file; never modifies it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise StateFileError(
            Violation(
                halt_class=CheckHalt.STATE_FILE_MISSING.value,
                detail=f"no state file at {path} (run `assay halt arm` for this dispatch first)",
            )
        ) from None
    except OSError as exc:
        raise StateFileError(
            Violation(
                halt_class=CheckHalt.STATE_FILE_MALFORMED.value,
                detail=f"cannot read {path}: {exc.strerror or exc}",
            )
        ) from None
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StateFileError(
            Violation(
                halt_class=CheckHalt.STATE_FILE_MALFORMED.value,
                detail=f"{path} is not valid JSON: {exc}",
            )
        ) from None
    except (RecursionError, ValueError):  # nesting deeper than the decoder goes, huge numbers
        raise StateFileError(
            Violation(
                halt_class=CheckHalt.STATE_FILE_MALFORMED.value,
                detail=f"{path} is nested too deeply or holds a value JSON cannot hold",
            )
        ) from None
    parsed = parse_state_document(doc)
    if isinstance(parsed, Violation):
        raise StateFileError(parsed)
    return parsed


def write_json_atomic(path: Path, document: dict[str, Any], *, mode: int = 0o644) -> None:
    """Write ``document`` to ``path`` so a reader sees the old file or the new, never half."""
    write_bytes_atomic(path, (json.dumps(document, indent=2) + "\n").encode(), mode=mode)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode())


def write_bytes_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Temporary file in the same directory (made with ``mode``, so a private file is never
    readable by others, not even for a moment), fsync, rename over ``path``, fsync the
    directory."""
    # A unique name beside the target (same filesystem, so the rename is atomic); O_EXCL
    # instead of tempfile, which would cost this start-up-sensitive path a few milliseconds.
    tmp = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_state(path: Path, state: HaltStateFile) -> None:
    write_json_atomic(path, state.to_json())
