"""One source's lines through detect-secrets' plugins, in bounded memory and bounded time.

The lines arrive in batches (:class:`~secret_diff.Lines`) and are read in chunks of at most
``CHUNK_LINES`` lines or ``CHUNK_CHARS`` characters. For each plugin, its gate
(:mod:`secret_gate`) finds the lines it could find anything on; the plugin reads only those.
A chunk is read once the ``LOOKAHEAD`` lines after it have arrived (a private key's body is
read from the lines after its header), and the few before it are kept (a finding's context
snippet, the pragma on the line above). What is held is a few chunks, whatever the size of the
change. The generic detectors (their findings only warn) read at most ``GENERIC_BUDGET``
characters a scan, and at most ``MAX_HITS`` findings are kept: past either, the scan says so.

A line longer than ``MAX_LINE_CHARS`` (minified code, a data blob) is read as overlapping
windows of that size, so the work per character stays bounded and a credential shorter than
``WINDOW_OVERLAP`` is whole in one window; its findings keep the line's number.

A private key is judged by its body, not its header: an unchanged header line (a context line
of the diff) is read too, and is a finding when a line of its body is added (a regenerated key
whose ``-----BEGIN ... KEY-----`` line stayed). When a hunk starts inside a key, the header is
looked for in the base file above the hunk (``base_lines``: the unchanged lines above a hunk
are the base's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from assay.adapters.validators.secret_diff import Lines
from assay.adapters.validators.secret_gate import Chunk, Gate
from assay.adapters.validators.secret_patterns import plausible
from assay.adapters.validators.secret_rules import ENV_VALUE_PREFIX, detector
from assay.adapters.validators.secret_values import (
    MAX_KEY_LINES,
    PRIVATE_KEY_TYPE,
    completed_values,
    inside_key,
    key_material,
    private_key_body,
)

MAX_LINE_CHARS = 16_384
WINDOW_OVERLAP = 4_096
# The generic detectors (keyword, entropy: findings that only warn) cost far more a line than
# the providers' patterns; past this many characters read, they stop (and it is said).
GENERIC_BUDGET = 4 << 20
MAX_HITS = 10_000  # findings kept; more is no verdict (the scan says so, never a pass)
CHUNK_LINES = 20_000
CHUNK_CHARS = 4 << 20
LOOKAHEAD = MAX_KEY_LINES
_CONTEXT = 5  # lines around a line, as detect-secrets' code snippets hold
_BACK = 8  # lines kept before a chunk, for the snippets of its first lines
_KEY_PLUGIN = "PrivateKeyDetector"
_MIN_KEY_LINE = 32  # a hunk starting on such a line of base64 may be inside a key


@dataclass(frozen=True)
class Hit:
    """One detect-secrets finding: where, which detector, and the credential's whole text."""

    source: str
    line: int
    type: str
    plugin: str
    secret_hash: str  # detect-secrets' hashed_secret, as a .secrets.baseline lists it
    values: frozenset[str] = field(repr=False)  # never shown; for the exposure check, redaction
    text: str = field(default="", repr=False)  # the stripped line (a key header alone)
    # A provider's finding on a line the allowlist pragma marks: the coder may have written the
    # pragma itself, so it is reported (as a warning), never dropped.
    allowlisted: bool = False


@dataclass
class Scanned:
    hits: list[Hit] = field(default_factory=list)
    added: int = 0  # new lines read (added lines of the diff, lines of output)
    windowed: int = 0  # of those, lines longer than MAX_LINE_CHARS, read in windows
    generic_chars: int = 0  # characters the generic detectors read
    generic_skipped: int = 0  # lines they would have read past GENERIC_BUDGET
    overflow: bool = False  # more than MAX_HITS findings: the rest were not kept


@dataclass(frozen=True)
class Plugin:
    """A detect-secrets plugin as one source uses it, with its gate (None: every line)."""

    plugin: Any
    gate: Gate | None
    name: str = field(init=False)  # detect-secrets' class name
    generic: bool = field(init=False)  # its findings only warn (secret_rules)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", type(self.plugin).__name__)
        object.__setattr__(self, "generic", detector(self.name).generic)


@dataclass
class Source:
    """What reading one source needs: its names, plugins, and detect-secrets' filters."""

    name: str  # as reported: the path, or "coder output"
    filename: str  # as detect-secrets' filters see it
    plugins: Sequence[Plugin]
    ds: Any
    known: Mapping[str, str] = field(default_factory=dict)  # variable -> exact value to find
    base_lines: Callable[[], Sequence[str] | None] | None = None


def read(source: Source, batches: Iterable[Lines], scanned: Scanned) -> None:
    """Every finding in ``batches`` into ``scanned``."""
    found: dict[tuple[object, ...], Hit] = {}
    keys = next((p for p in source.plugins if p.name == _KEY_PLUGIN), None)
    headers = tuple(keys.plugin.denylist) if keys is not None else ()
    buf = Lines()
    done = chars = 0
    for batch in _windows(batches, scanned):
        for start, end, above in _segments(batch):
            if above is not None and source.base_lines is not None and headers:
                first = (batch.numbers[start], batch.texts[start], above)
                _extend(buf, _key_above(first, buf, source.base_lines, headers))
            _extend(buf, batch, start, end)
        chars += sum(map(len, batch.texts))
        while len(buf) - done > LOOKAHEAD and (
            len(buf) - done >= CHUNK_LINES + LOOKAHEAD or chars >= CHUNK_CHARS
        ):
            end = min(len(buf) - LOOKAHEAD, done + CHUNK_LINES)
            _chunk(source, buf, done, end, found, scanned)
            cut = max(end - _BACK, 0)
            for column in (buf.numbers, buf.texts, buf.added):
                del column[:cut]
            done = end - cut
            chars = sum(map(len, buf.texts[done:]))
    _chunk(source, buf, done, len(buf), found, scanned)
    scanned.hits += found.values()


def _segments(batch: Lines) -> Iterator[tuple[int, int, int | None]]:
    """The batch cut at each hunk's first line: (start, end, the base line above start)."""
    cuts = sorted(batch.above)
    if not cuts or cuts[0] != 0:
        cuts = [0, *cuts]
    for n, start in enumerate(cuts):
        end = cuts[n + 1] if n + 1 < len(cuts) else len(batch)
        yield start, end, batch.above.get(start)


def _extend(buf: Lines, batch: Lines, start: int = 0, end: int | None = None) -> None:
    buf.numbers += batch.numbers[start:end]
    buf.texts += batch.texts[start:end]
    buf.added += batch.added[start:end]


def _windows(batches: Iterable[Lines], scanned: Scanned) -> Iterator[Lines]:
    """Each batch's lines right-stripped; a line longer than MAX_LINE_CHARS as overlapping
    windows (the same number, one after the other)."""
    step = MAX_LINE_CHARS - WINDOW_OVERLAP
    for batch in batches:
        texts = [text.rstrip() for text in batch.texts]
        scanned.added += sum(batch.added)
        if max(map(len, texts), default=0) <= MAX_LINE_CHARS:
            yield Lines(batch.numbers, texts, batch.added, batch.above)
            continue
        cut = Lines()
        for index, (number, text, added) in enumerate(
            zip(batch.numbers, texts, batch.added, strict=True)
        ):
            if index in batch.above:
                cut.above[len(cut)] = batch.above[index]
            if len(text) > MAX_LINE_CHARS and added:
                scanned.windowed += 1
            for at in range(0, max(len(text) - WINDOW_OVERLAP, 1), step):
                cut.numbers.append(number)
                cut.texts.append(text[at : at + MAX_LINE_CHARS])
                cut.added.append(added)
        yield cut


def _chunk(
    source: Source,
    buf: Lines,
    start: int,
    end: int,
    found: dict[tuple[object, ...], Hit],
    scanned: Scanned,
) -> None:
    if start >= end:
        return
    shown = Chunk(buf.texts[start:end])
    # An unchanged line is read by the private key detector only: the others see it blank.
    added = buf.added[start:end]
    chunk = (
        shown
        if all(added)
        else Chunk([t if a else "" for t, a in zip(shown.texts, added, strict=True)])
    )
    readers: dict[int, list[Plugin]] = {}
    for plugin in source.plugins:
        read_by = shown if plugin.name == _KEY_PLUGIN else chunk
        lines = range(len(chunk.texts)) if plugin.gate is None else read_by.gated(plugin.gate)
        if plugin.generic:
            lines = _within_budget(lines, chunk.texts, scanned)
        for index in lines:
            readers.setdefault(index, []).append(plugin)
    for index in sorted(readers):
        for hit in _line(source, buf, start + index, readers[index]):
            _keep(hit, found, scanned)
    for name, value in sorted(source.known.items()):
        if value in chunk.joined:
            for index, text in enumerate(chunk.texts):
                at = start + index
                if value in text:
                    kind = f"{ENV_VALUE_PREFIX}{name}"
                    hit = Hit(
                        source.name, buf.numbers[at], kind, "environment", "", frozenset({value})
                    )
                    _keep(hit, found, scanned)


def _within_budget(lines: Iterable[int], texts: list[str], scanned: Scanned) -> list[int]:
    """Those of ``lines`` the generic detectors still have the budget to read."""
    kept = []
    for index in lines:
        size = len(texts[index])
        if scanned.generic_chars + size > GENERIC_BUDGET:
            scanned.generic_skipped += 1
        else:
            scanned.generic_chars += size
            kept.append(index)
    return kept


def _keep(hit: Hit, found: dict[tuple[object, ...], Hit], scanned: Scanned) -> None:
    """``hit`` among the source's findings: the same finding twice (in two windows of one line)
    is one, with the values of both; past MAX_HITS findings none is kept."""
    key = (hit.source, hit.line, hit.type, hit.plugin, hit.secret_hash)
    seen = found.get(key)
    if seen is not None:
        found[key] = replace(seen, values=seen.values | hit.values)
    elif len(scanned.hits) + len(found) < MAX_HITS:
        found[key] = hit
    else:
        scanned.overflow = True


def _line(source: Source, buf: Lines, at: int, plugins: list[Plugin]) -> Iterator[Hit]:
    """The findings of ``plugins`` on line ``at`` of ``buf``. An unchanged line is read for a
    private key's header only, and counts when its key's body has an added line."""
    ds, name = source.ds, source.filename
    number, text = buf.numbers[at], buf.texts[at]
    if not buf.added[at]:
        plugins = [p for p in plugins if p.name == _KEY_PLUGIN]
        if not plugins:
            return
    context = _snippet(buf, at, ds)
    found = []
    for plugin in plugins:
        for secret in plugin.plugin.analyze_line(
            filename=name, line=text, line_number=number, context=context
        ):
            value = secret.secret_value
            if not plausible(plugin.name, str(value or "")):
                continue
            if not ds.filtered(
                ["secret"], filename=name, secret=value, plugin=plugin.plugin, line=text
            ):
                found.append((plugin, secret))
    # The line's own filters (the pragma) after the plugins, not before as detect-secrets
    # does: the same verdict, paid only on the few lines where a plugin found something.
    if not found:
        return
    allowlisted = ds.is_line_allowlisted(name, text, context)
    if allowlisted:
        found = [(p, f) for p, f in found if not p.generic]
    elif ds.filtered(["line"], filename=name, line=text, context=context):
        return
    for plugin, secret in found:
        if not allowlisted and ds.filtered(
            ["context"],
            filename=name,
            secret=secret.secret_value,
            plugin=plugin.plugin,
            line=text,
            context=context,
        ):
            continue
        kind = str(secret.type)
        if kind == PRIVATE_KEY_TYPE:
            run = _run(buf, at)
            values = private_key_body([buf.texts[i] for i in run], 0)
            if not buf.added[at] and not any(
                buf.added[i] and any(v in buf.texts[i] for v in values) for i in run
            ):
                continue  # an unchanged key: its header was only shown beside another change
        else:
            captured = str(secret.secret_value or "")
            values = completed_values(text, captured, getattr(plugin.plugin, "denylist", ()))
        yield Hit(
            source=source.name,
            line=number,
            type=kind,
            plugin=plugin.name,
            secret_hash=str(secret.secret_hash),
            values=frozenset(values),
            text=text.strip(),
            allowlisted=allowlisted,
        )


def _run(buf: Lines, at: int) -> range:
    """Line ``at`` and the lines right after it in the file (up to a gap the diff does not
    show, or MAX_KEY_LINES)."""
    end = at + 1
    while (
        end < len(buf) and end - at < MAX_KEY_LINES and buf.numbers[end] - buf.numbers[end - 1] <= 1
    ):
        end += 1
    return range(at, end)


def _key_above(
    first: tuple[int, str, int],
    buf: Lines,
    base_lines: Callable[[], Sequence[str] | None],
    headers: Sequence[re.Pattern[str]],
) -> Lines:
    """The base's lines from a private key's header down to a hunk that starts inside that
    key's body (``first``: the hunk's first line, its text, the base's line number above it),
    as unchanged lines: so the header is read, and counts when the hunk adds to the body."""
    number, text, above = first
    material = key_material(text)
    if material is None or len(material) < _MIN_KEY_LINE:
        return Lines()
    base = base_lines()
    if not base:
        return Lines()
    above = min(above, len(base))
    for header in range(above, max(above - MAX_KEY_LINES, 0), -1):
        line = base[header - 1].rstrip()
        if any(pattern.search(line) for pattern in headers):
            shift = number - 1 - above
            last = buf.numbers[-1] if buf.numbers else 0
            return Lines.of(
                (n + shift, base[n - 1].rstrip(), False)
                for n in range(header, above + 1)
                if n + shift > last
            )
        if not inside_key(line):
            break
    return Lines()


def _snippet(buf: Lines, at: int, ds: Any) -> Any:
    """detect-secrets' code snippet around a line: the lines shown near it, blank elsewhere."""
    number = buf.numbers[at]
    first = max(1, number - _CONTEXT)
    window = [""] * (number + _CONTEXT - first + 1)
    for near in range(max(at - _BACK, 0), min(at + _BACK + 1, len(buf))):
        offset = buf.numbers[near] - first
        if 0 <= offset < len(window) and not window[offset]:
            window[offset] = buf.texts[near]
    window[number - first] = buf.texts[at]
    return ds.CodeSnippet(snippet=window, start_line=first - 1, target_index=number - first)
