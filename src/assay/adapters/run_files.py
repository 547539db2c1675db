"""The folders and files assay itself writes for a run: seat folders, prompt files, validator
logs. A machine fault met there (a full disk, the file-size limit, an unwritable folder, a
file where a folder should be) is raised as :class:`EnvironmentFault`, named by its cause, so
the engine charges it as an environment error (refunded), never as an internal error.
"""

from __future__ import annotations

import contextlib
import errno
import tempfile
from collections.abc import Iterator
from pathlib import Path

from assay.adapters.process import EnvironmentFault, environment_fault


def seat_log_dir(run_dir: Path, attempt: int, seat: int) -> Path:
    """Where assay keeps one dispatch's logs (its program's output among them): the engine's
    folder, never the coder's to write."""
    return run_dir / f"attempt-{attempt}" / f"seat-{seat}"


def make_folder(path: Path) -> None:
    """Create ``path`` and its parents; EnvironmentFault when the machine refuses."""
    with writing(path):
        try:
            path.mkdir(parents=True, exist_ok=True)
        except FileExistsError as exc:  # a file (or a dangling link) stands where it should be
            raise EnvironmentFault(f"a folder of the run is not a folder: {path}") from exc


def fresh_folder(parent: Path, prefix: str) -> Path:
    """A new, empty folder in ``parent`` (made with its parents) that nothing has used before,
    its name starting with ``prefix``; EnvironmentFault when the machine refuses."""
    make_folder(parent)
    with writing(parent):
        return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Name a machine fault met while writing ``path``; any other error passes unchanged."""
    try:
        yield
    except OSError as exc:
        fault = fault_of(exc, path)
        if fault is None:
            raise
        raise fault from exc


def fault_of(exc: OSError, fallback: Path) -> EnvironmentFault | None:
    """The machine fault ``exc`` is, named with the file it names (else ``fallback``).

    Beyond :func:`environment_fault`'s list, ENOTDIR counts here: these paths are assay's own,
    so a file where one of its folders should be means the run folder was tampered with or
    broken, not that a caller passed a wrong path.
    """
    named = exc.filename if isinstance(exc.filename, str) and exc.filename else None
    path = Path(named) if named else fallback
    if exc.errno == errno.ENOTDIR:
        return EnvironmentFault(f"a folder of the run is not a folder writing {path}")
    return environment_fault(exc, path)


def cause_of(exc: OSError) -> str:
    """Why a write failed, in words an operator acts on."""
    if exc.errno == errno.EFBIG:
        return "the file-size limit (RLIMIT_FSIZE) was reached"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left on device"
    return exc.strerror or str(exc)
