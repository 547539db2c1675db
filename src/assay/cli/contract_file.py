"""Reading a contract file the operator names: bounded, never blocking, strictly UTF-8.

``run --contract /dev/zero`` must not read forever, and a FIFO must not hang the command, so only
a regular file is read, opened without blocking and up to :data:`MAX_CONTRACT_BYTES`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from assay.adapters.safe_files import read_at_most

MAX_CONTRACT_BYTES = 1024 * 1024
"""A contract is a page of YAML; anything larger than this is refused, not read."""


class ContractFileError(Exception):
    """The file cannot be read as a contract; ``str()`` says why in one line."""


def read_contract_text(path: Path) -> str:
    """The text of the contract at ``path``, or ContractFileError saying why not."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ContractFileError(exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ContractFileError("it is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise ContractFileError("it is not a regular file (a device, FIFO or socket)")
        if info.st_size > MAX_CONTRACT_BYTES:
            raise ContractFileError(_too_large(info.st_size))
        data = read_at_most(fd, MAX_CONTRACT_BYTES)  # the file may grow while it is read
        if len(data) > MAX_CONTRACT_BYTES:
            raise ContractFileError(_too_large(len(data)))
    except OSError as exc:
        raise ContractFileError(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractFileError(
            f"invalid UTF-8 at byte {exc.start} (0x{data[exc.start]:02x}); save it as UTF-8"
        ) from None


def _too_large(size: int) -> str:
    return f"it is larger than {MAX_CONTRACT_BYTES // 1024} KiB ({size} bytes or more)"
