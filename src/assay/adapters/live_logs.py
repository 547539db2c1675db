"""A running coder's log, read for the ledger while it still grows: a provisional copy.

The final copy of a coder's log is shipped only once the secret scan read the coder's output
(:mod:`assay.adapters.log_shipping`), so a secret it finds is redacted from what is kept. A live
copy cannot wait for that, so it is made safe on its own, more strictly than the final one:

- only the end of the file (:data:`LIVE_LIMIT` bytes), cut at line ends: a line the program is
  still writing (a secret half printed) waits for its end, and a line the cut would split
  (the start of the window) is left out;
- the same secret detectors the scan runs over a coder's output (:func:`scan_streams` with the
  output's rules) and over the files of its change (the generic ones too: a value they find
  in the change is redacted from the final copy of the log), run over that text itself;
  every value they find is redacted, as are the operator's secrets and whatever the run's
  scans found already;
- a private key's lines are never shown in part: lines before a key's end whose start the
  window cut off, and a key whose end is not written yet, are left out; so are the lines at
  the window's start that may be the rest of a key whose header it cut off (key material,
  header fields, blank lines, up to the key's end), whatever the key's kind (an SSH2 or a
  PuTTY key, or a key printed without its end): the detectors know a key by its header;
- a scan that could not read everything (too many findings, a budget hit) or failed ships
  nothing.

The copy is kept under the file's own name (``attempt-N/seat-M/<program>.log.out``, the raw
stream the program writes to) and says so in its first line; the final ship replaces it
(the ledger drops a program's raw streams once its ``.log`` is kept,
:func:`assay.adapters.store.run_logs.write_logs`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from assay.adapters.redact import Redactor, redactions
from assay.adapters.safe_files import open_regular
from assay.core.run_logs import KeptLog, place_of

LIVE_LIMIT = 64 * 1024  # bytes of a running log's end shipped live
LIVE_EVERY = 2.0  # seconds between two live shipments of a running seat's logs
PROVISIONAL = "… live copy while the coder runs (redacted; replaced when its seat ends) …\n"

_KEY_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY")
_KEY_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY")


AS_FILE = "live-copy.log"  # the name the live text is scanned under as a file of a change


class ScanIncomplete(Exception):
    """The detectors could not read the whole text: nothing of it may be shipped."""


def read_tail(path: Path, limit: int = LIVE_LIMIT) -> tuple[str, int, bool] | None:
    """The complete lines among the last ``limit`` bytes of ``path``: (text, the file's size,
    whether lines before them were left out); None when it is no regular file (or is gone)."""
    with open_regular(path) as opened:
        if opened is None:
            return None
        source, info = opened
        size = info.st_size
        start = max(size - limit, 0)
        source.seek(start)
        data = source.read(limit)
    end = data.rfind(b"\n") + 1  # the line still being written waits for its end
    data = data[:end]
    cut = start > 0
    if cut:  # the window's first line began before it: left out whole
        data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
    return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd"), size, cut


def whole_keys_only(text: str) -> str:
    """``text`` without a private key's lines cut off from its start (before an end whose
    begin is not there) or from its end (after a begin whose end is not written yet)."""
    end = _KEY_END.search(text)
    if end is not None and not _KEY_BEGIN.search(text, 0, end.start()):
        after = text.find("\n", end.end())
        text = "" if after < 0 else text[after + 1 :]
    begins = list(_KEY_BEGIN.finditer(text))
    if begins and not _KEY_END.search(text, begins[-1].end()):
        text = text[: text.rfind("\n", 0, begins[-1].start()) + 1]
    return text


def without_cut_key(text: str) -> str:
    """``text`` without its first lines while they may be the rest of a private key whose
    header lies before ``text`` (a window's start): the scan takes a key's body from its
    header down to its end or the first line that is no key material (at most
    ``MAX_KEY_LINES``), and that body is what the final copy redacts. Lines are read as the
    detectors read them (every line break, and the escaped ones of a string literal or a JSON
    stream); lines of letters only are passed over as the scan passes over them, and are left
    alone when no key material follows among them."""
    from assay.adapters.validators.secret_values import (
        KEY_END,
        MAX_KEY_LINES,
        inside_key,
        key_material,
    )

    lines = text.splitlines(keepends=True)
    skip, material = 0, False
    for line in lines[:MAX_KEY_LINES]:
        parts = re.split(r"\\[rn]", line.rstrip("\r\n"))
        if any(KEY_END.search(part) for part in parts):
            return "".join(lines[skip + 1 :])  # the key's end: left out with its body
        if not all(inside_key(part) for part in parts):
            break
        material = material or any(key_material(part) for part in parts)
        skip += 1
    return "".join(lines[skip:]) if material else text


def detected(text: str, known: dict[str, str]) -> set[tuple[str, str]]:
    """``(type, value)`` of every secret the coder-output detectors find in ``text``; raises
    :class:`ScanIncomplete` when they could not read all of it."""
    from assay.adapters.validators.secret_scan import OUTPUT_SOURCE, ScanSource, scan_streams

    lines = list(enumerate(text.splitlines(), start=1))
    if not lines:
        return set()
    # Read as the coder's output, and as a file of its change: a value the change's scan finds
    # (a keyword's, a high-entropy string's: the generic detectors read a change only) is
    # redacted from the final copy wherever it is, the log too, so the live copy redacts what
    # those detectors find in the log itself (it cannot know the change before its scan).
    sources = [ScanSource(OUTPUT_SOURCE, lines), ScanSource(AS_FILE, lines)]
    try:
        scanned = scan_streams([source.stream() for source in sources], known=known)
    except Exception as exc:  # a detector that fails never lets its text through
        raise ScanIncomplete(str(exc)) from exc
    if scanned.overflow or scanned.generic_skipped:
        raise ScanIncomplete("the detectors did not read every line")
    return {(hit.type, value) for hit in scanned.hits for value in hit.values if value}


def live_copy(
    path: Path, name: str, secrets: Iterable[tuple[str, str]], known: dict[str, str]
) -> KeptLog | None:
    """What the ledger may keep of a running log now (see the module's doc); None when there
    is no file to read. ``secrets``: values always redacted (the operator's, the run's found
    ones); ``known``: exact values the detectors look for, by the variable that holds them."""
    read = read_tail(path)
    if read is None:
        return None
    text, size, cut = read
    text = whole_keys_only(without_cut_key(text) if cut else text)
    redactor = Redactor(redactions(set(secrets) | detected(text, known)))
    place = place_of(name)
    return KeptLog(
        name, place.role, place.attempt, place.seat, size, PROVISIONAL + redactor.text(text), cut
    )
