"""detect-secrets over a whole change in one pass, in memory.

detect-secrets is set up once per scan (one settings set-up for the whole change: its settings
are a process-wide singleton, so scans take turns) and fed the lines themselves: no file is
written. Each line goes through what ``scan_file`` does with it: every plugin's
``analyze_line`` with the file's name (so the keyword detector's file-type rules apply), then
detect-secrets' own filters, the ``# pragma: allowlist secret`` one among them (on the line, or
``pragma: allowlist nextline secret`` on the line above, which the diff's context shows). Its
file transformers (YAML, INI re-parsing) are not used: they need the whole file.

Speed: a plugin's patterns are first run once over the whole source (its lines joined), and
the plugin then reads only the lines a match touched. That is exact: the patterns are compiled
again with ``re.MULTILINE`` (so ``^`` and ``$`` still mean a line's ends), and a plugin whose
patterns could behave differently across a line end (a negative lookaround other than
``(?!\\w)``, ``\\A``, ``\\Z``, atomic groups, possessive repeats) reads every line. A test
compares both ways on a corpus.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import re
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.adapters.validators.secret_patterns import PATTERNS, plausible
from assay.adapters.validators.secret_rules import PROVIDER_ONLY_FILES, detector
from assay.adapters.validators.secret_values import (
    PRIVATE_KEY_TYPE,
    completed_values,
    private_key_body,
)

OUTPUT_SOURCE = "coder output"
_OUTPUT_NAME = "coder-output.log"  # the file name detect-secrets' rules see for the output
_CONTEXT = 5  # lines around a line, as detect-secrets' code snippets hold
# Constructs a joined text may read differently from a single line (see the module doc).
_LINE_UNSAFE = ("(?!", "(?<!", "\\A", "\\Z", "(?>", "*+", "++", "?+", "}+")
_LINE_SAFE = ("(?!\\w)", "(?<!\\w)")  # \w never matches a line end
# A negative lookaround of one character class that holds no line end: before a line's first
# character a joined text has "\n", which the class does not match, as nothing would.
_CLASS_LOOKAROUND = re.compile(r"\(\?<?!\[(?!\^)(?:[^\]\\]|\\[-\\\]./+_dw])+\]\)")

_SCAN_LOCK = threading.Lock()


@dataclass(frozen=True)
class ScanSource:
    """Lines to scan from one file of the change, or from the coder's output."""

    name: str  # the path in the change, or OUTPUT_SOURCE
    lines: Sequence[tuple[int, str]]  # (line number, text)
    # Every line the diff shows (context lines too), for the pragma on the line above.
    shown: Mapping[int, str] = field(default_factory=dict)

    @property
    def output(self) -> bool:
        return self.name == OUTPUT_SOURCE


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


def scan(sources: Sequence[ScanSource], *, gated: bool = True) -> list[Hit]:
    """Every finding in ``sources``, with detect-secrets set up once. ``gated=False`` runs every
    plugin on every line (what the gate is compared with)."""
    sources = [s for s in sources if s.lines]
    if not sources:
        return []
    with _SCAN_LOCK, _imported() as ds, _quiet_detect_secrets():
        names = sorted(cls.__name__ for cls in ds.plugin_classes().values())
        used = [{"name": n} for n in names if detector(n).diff or detector(n).output]
        with ds.transient_settings({"plugins_used": used}):
            pinned = [_pinned(p) for p in ds.get_plugins()]
            plugins = [(p, _gate(p, ds) if gated else None) for p in pinned]
            hits: list[Hit] = []
            for source in sources:
                hits += _scan_source(source, plugins, ds)
    return hits


def _scan_source(source: ScanSource, plugins: Sequence[tuple[Any, Any]], ds: Any) -> list[Hit]:
    name = _OUTPUT_NAME if source.output else source.name
    provider_only = _provider_only(source.name, ds)
    chosen = []
    for plugin, gate in plugins:
        row = detector(type(plugin).__name__)
        if (row.output if source.output else row.diff) and not (provider_only and row.generic):
            chosen.append((plugin, gate))
    texts = [text.rstrip() for _, text in source.lines]
    joined = "\n".join(texts)
    starts = _line_starts(texts)
    readers: dict[int, list[Any]] = {}
    for plugin, gate in chosen:
        at = range(len(texts)) if gate is None else _touched(gate, joined, starts)
        for index in at:
            readers.setdefault(index, []).append(plugin)
    shown = source.shown or dict(source.lines)
    hits: list[Hit] = []
    for index in sorted(readers):
        line_no, line = source.lines[index][0], texts[index]
        context = _snippet(shown, line_no, line, ds)
        found = []
        for plugin in readers[index]:
            for secret in plugin.analyze_line(
                filename=name, line=line, line_number=line_no, context=context
            ):
                value = secret.secret_value
                if not plausible(type(plugin).__name__, str(value or "")):
                    continue
                if not ds.filtered(
                    ["secret"], filename=name, secret=value, plugin=plugin, line=line
                ):
                    found.append((plugin, secret))
        # The line's own filters (the pragma) after the plugins, not before as detect-secrets
        # does: the same verdict, paid only on the few lines where a plugin found something.
        if not found:
            continue
        allowlisted = ds.is_line_allowlisted(name, line, context)
        if allowlisted:
            found = [(p, f) for p, f in found if not detector(type(p).__name__).generic]
        elif ds.filtered(["line"], filename=name, line=line, context=context):
            continue
        for plugin, secret in found:
            if not allowlisted and ds.filtered(
                ["context"],
                filename=name,
                secret=secret.secret_value,
                plugin=plugin,
                line=line,
                context=context,
            ):
                continue
            kind = str(secret.type)
            if kind == PRIVATE_KEY_TYPE:
                values = private_key_body(texts, index)
            else:
                captured = str(secret.secret_value or "")
                values = completed_values(line, captured, getattr(plugin, "denylist", ()))
            hits.append(
                Hit(
                    source=source.name,
                    line=line_no,
                    type=kind,
                    plugin=type(plugin).__name__,
                    secret_hash=str(secret.secret_hash),
                    values=frozenset(values),
                    text=line.strip(),
                    allowlisted=allowlisted,
                )
            )
    return hits


def _pinned(plugin: Any) -> Any:
    """``plugin`` with our own patterns in place of its installed ones, where we have them
    (:mod:`secret_patterns`): the same detector, its matches only at a token's edges."""
    patterns = PATTERNS.get(type(plugin).__name__)
    if patterns is not None:
        plugin.denylist = patterns
    return plugin


def _provider_only(path: str, ds: Any) -> bool:
    base = path.rsplit("/", 1)[-1]
    return base in PROVIDER_ONLY_FILES or ds.is_lock_file(path) or ds.is_swagger_file(path)


def _line_starts(texts: Sequence[str]) -> list[int]:
    starts, at = [], 0
    for text in texts:
        starts.append(at)
        at += len(text) + 1
    return starts


def _touched(gate: Sequence[re.Pattern[str]], joined: str, starts: list[int]) -> set[int]:
    """The lines some match of ``gate`` lies on (all of them, when it spans several)."""
    lines: set[int] = set()
    for pattern in gate:
        for match in pattern.finditer(joined):
            first = bisect.bisect_right(starts, match.start()) - 1
            last = bisect.bisect_right(starts, max(match.end() - 1, match.start())) - 1
            lines.update(range(first, last + 1))
    return lines


def _gate(plugin: Any, ds: Any) -> list[re.Pattern[str]] | None:
    """The patterns a line must match for ``plugin`` to find anything on it, or None when they
    cannot be run over joined lines exactly (then the plugin reads every line)."""
    if isinstance(plugin, ds.RegexBasedDetector):
        patterns = list(plugin.denylist)
    elif isinstance(plugin, ds.KeywordDetector):
        # Every one of its patterns holds the keyword list itself (a test checks it).
        patterns = [re.compile("|".join(ds.KEYWORDS), re.IGNORECASE)]
    elif isinstance(plugin, ds.HighEntropyStringsPlugin):
        patterns = [plugin.regex]  # quoted strings; the entropy is judged afterwards
    else:
        return None
    if not all(_line_safe(p.pattern) for p in patterns):
        return None
    return [re.compile(p.pattern, p.flags | re.MULTILINE) for p in patterns]


def _line_safe(pattern: str) -> bool:
    for safe in _LINE_SAFE:
        pattern = pattern.replace(safe, "")
    pattern = _CLASS_LOOKAROUND.sub("", pattern)
    return not any(construct in pattern for construct in _LINE_UNSAFE)


def _snippet(shown: Mapping[int, str], line_no: int, line: str, ds: Any) -> Any:
    """detect-secrets' code snippet around a line: the lines the diff shows, blank elsewhere."""
    first = max(1, line_no - _CONTEXT)
    window = [shown.get(n, "") for n in range(first, line_no + _CONTEXT + 1)]
    window[line_no - first] = line
    return ds.CodeSnippet(snippet=window, start_line=first - 1, target_index=line_no - first)


class _DetectSecrets:
    """The parts of detect-secrets the scan uses, imported once, on the first scan."""

    def __init__(self) -> None:
        from detect_secrets.core import scan as core_scan
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.filters.allowlist import is_line_allowlisted
        from detect_secrets.filters.heuristic import is_lock_file, is_swagger_file
        from detect_secrets.plugins import keyword
        from detect_secrets.plugins.base import RegexBasedDetector
        from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
        from detect_secrets.settings import get_plugins, transient_settings
        from detect_secrets.util.code_snippet import CodeSnippet

        self.plugin_classes: Any = get_mapping_from_secret_type_to_class
        self.filtered = core_scan._is_filtered_out  # its own filter chain, by parameter
        self.is_line_allowlisted = is_line_allowlisted
        self.is_lock_file = is_lock_file
        self.is_swagger_file = is_swagger_file
        self.KeywordDetector = keyword.KeywordDetector
        self.KEYWORDS = keyword.DENYLIST
        self.RegexBasedDetector = RegexBasedDetector
        self.HighEntropyStringsPlugin = HighEntropyStringsPlugin
        self.get_plugins = get_plugins
        self.transient_settings = transient_settings
        self.CodeSnippet = CodeSnippet


_LOADED: list[_DetectSecrets] = []


@contextlib.contextmanager
def _imported() -> Iterator[_DetectSecrets]:
    if not _LOADED:
        before = warnings.showwarning
        loaded = _DetectSecrets()
        if warnings.showwarning is not before:
            # Importing detect-secrets turns on logging.captureWarnings for the whole process.
            logging.captureWarnings(False)
        _LOADED.append(loaded)
    yield _LOADED[0]


@contextlib.contextmanager
def _quiet_detect_secrets() -> Iterator[None]:
    """detect-secrets logs skipped secrets with their values at info level: silence it."""
    logger = logging.getLogger("detect-secrets")
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was
