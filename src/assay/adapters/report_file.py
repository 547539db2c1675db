"""Read the coder's report file without letting the coder hurt the run.

The coder controls ``$ASSAY_REPORT_PATH``: it can leave a FIFO there (a blocking open would
hang the run outside the coder's timeout), a directory, a symlink to ``/etc/passwd`` or a
file of gigabytes. The report is best-effort evidence (seed 001), so it is read only when it
is a regular file directly inside the seat's output folder, opened without following symlinks
and without blocking, and at most :data:`MAX_REPORT_BYTES` long
(:func:`~assay.adapters.safe_files.read_limited`). Any problem discards it with one warning;
nothing here raises.
"""

from __future__ import annotations

from pathlib import Path

from assay.adapters.safe_files import LimitedRead, read_at_most, read_limited

MAX_REPORT_BYTES = 1024 * 1024

ReportRead = LimitedRead  # the report's bytes, or None with the warning saying why

__all__ = ["MAX_REPORT_BYTES", "ReportRead", "read_at_most", "read_report_file"]


def read_report_file(path: Path, folder: Path) -> ReportRead:
    """The bytes of the coder's report at ``path``, which must sit directly in ``folder``.

    Pass ``folder`` already resolved, as it was before the coder ran: it is compared as given,
    so a folder the coder swapped for a symlink afterwards does not match.
    """
    read = read_limited(path, folder, MAX_REPORT_BYTES)
    if read.warning is None:
        return read
    return LimitedRead(read.data, f"coder report discarded: {read.warning}")
