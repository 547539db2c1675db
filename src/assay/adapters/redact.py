"""Redaction: a detected credential's value replaced by ``[REDACTED:<type>]`` where assay keeps it.

A candidate blocked for a secret still leaves the value in the files assay wrote for its seat:
the coder's logs and transcripts, the validators' logs. :func:`redact_tree` rewrites each
regular file that holds one (atomically, a new file renamed over the old one, so a reader never
sees half a file and a hard link planted in a log folder never carries the rewrite elsewhere);
symlinks are never followed. Files are streamed, so a huge log costs no memory.
:func:`redact_data` does the same for a JSON document (the payload, a ledger event).

Each value is also redacted in the form a JSON log holds it (quotes and backslashes escaped).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from assay.adapters import folders
from assay.adapters.validators.base import ValidationOutcome
from assay.core.results import ValidatorResult

CHUNK = 1 << 20
# Shorter values would redact ordinary words; no detector reports one this short.
MIN_VALUE = 4
# How much of a run's folder a redaction walks (a coder could have filled it with any shape).
TREE_MAX_ENTRIES = 200_000
TREE_MAX_DEPTH = 64


def label(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def redactions(found: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{value: label}`` from ``(type, value)`` pairs, with each value's JSON-escaped form."""
    table: dict[str, str] = {}
    for kind, value in sorted(found):
        if len(value) < MIN_VALUE:
            continue
        for form in (value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
            table.setdefault(form, label(kind))
    return table


class Redactor:
    """Replaces every value of a table by its label, in text, JSON data and files."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self.table = dict(table)
        # Longest first: a value that contains another is replaced whole.
        ordered = sorted(self.table, key=len, reverse=True)
        self._text = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None
        raw = {v.encode("utf-8"): self.table[v].encode("utf-8") for v in ordered}
        self._raw = raw
        self._bytes = re.compile(b"|".join(re.escape(v) for v in raw)) if raw else None
        self._keep = max((len(v) for v in raw), default=1) - 1

    def __bool__(self) -> bool:
        return bool(self.table)

    def text(self, text: str) -> str:
        if self._text is None:
            return text
        return self._text.sub(lambda m: self.table[m.group(0)], text)

    def data(self, value: Any) -> Any:
        """A JSON-like value with every string (keys too) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                self.text(k) if isinstance(k, str) else k: self.data(v) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def file(self, path: Path) -> bool:
        """Rewrite ``path`` (a regular file, never followed if a link) without the values.
        True when it held one."""
        if self._bytes is None:
            return False
        try:
            # Non-blocking: a FIFO planted under a log's name never holds assay up.
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return False
        with os.fdopen(fd, "rb") as source:
            info = os.fstat(source.fileno())
            if not stat.S_ISREG(info.st_mode):
                return False
            if not self._holds(source):
                return False
            source.seek(0)
            handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".r")
            try:
                with os.fdopen(handle, "wb") as out:
                    self._stream(source, out)
                    os.fchmod(out.fileno(), stat.S_IMODE(info.st_mode))
                os.replace(temp, path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        return True

    def tree(self, root: Path) -> tuple[list[Path], list[tuple[Path, OSError]]]:
        """Redact every regular file under ``root`` (links not followed, within the walk's
        bounds): (the files changed, the files that could not be rewritten or searched and
        why)."""
        changed: list[Path] = []
        failed: list[tuple[Path, OSError]] = []
        if not self or root.is_symlink() or not root.is_dir():
            return changed, failed
        listed = folders.walk(root, max_entries=TREE_MAX_ENTRIES, max_depth=TREE_MAX_DEPTH)
        for entry in listed:
            if not entry.is_file:  # a link, a FIFO, a device: never opened
                continue
            try:
                if self.file(entry.path):
                    changed.append(entry.path)
            except OSError as exc:
                failed.append((entry.path, exc))
        failed += [(root, OSError(f"not searched: {why}")) for why in listed.cut]
        return changed, failed

    def _holds(self, source: Any) -> bool:
        assert self._bytes is not None
        tail = b""
        while chunk := source.read(CHUNK):
            if self._bytes.search(tail + chunk):
                return True
            tail = (tail + chunk)[-self._keep :] if self._keep else b""
        return False

    def _stream(self, source: Any, out: Any) -> None:
        """Copy with every value replaced; a value split across two reads is still found,
        because the last ``longest - 1`` bytes wait for the next read."""
        assert self._bytes is not None
        pending = b""
        while chunk := source.read(CHUNK):
            buffer = pending + chunk
            safe = len(buffer) - self._keep
            at = 0
            for match in self._bytes.finditer(buffer):
                if match.start() >= safe:
                    break
                out.write(buffer[at : match.start()])
                out.write(self._raw[match.group(0)])
                at = match.end()
            cut = max(at, safe)
            out.write(buffer[at:cut])
            pending = buffer[cut:]
        out.write(self._bytes.sub(lambda m: self._raw[m.group(0)], pending))


class SecretRedaction:
    """What a run's secret scans found so far, and the redaction of it where the run keeps it."""

    def __init__(self) -> None:
        self.found: set[tuple[str, str]] = set()
        self.redactor = Redactor({})

    def absorb(self, outcomes: Iterable[ValidationOutcome]) -> bool:
        """Take in the values a validation found; True when one is new."""
        found = {(s.type, s.value) for o in outcomes for s in o.secrets}
        if not found - self.found:
            return False
        self.found |= found
        self.redactor = Redactor(redactions(self.found))
        return True

    def redact_folders(self, run_dir: Path) -> list[tuple[Path, OSError]]:
        """Every attempt's folder of the run (seats, validators, judges); what failed."""
        failed: list[tuple[Path, OSError]] = []
        for folder in sorted(run_dir.glob("attempt-*")):
            failed += self.redactor.tree(folder)[1]
        return failed

    def outcomes(self, outcomes: list[ValidationOutcome]) -> list[ValidationOutcome]:
        """The verdicts with no detected value in their text (a judge may quote the diff)."""
        if not self.redactor:
            return outcomes
        return [
            dataclasses.replace(
                o,
                result=ValidatorResult.model_validate(self.redactor.data(o.result.model_dump())),
                evidence=self.redactor.text(o.evidence) if o.evidence else o.evidence,
            )
            for o in outcomes
        ]
