"""detect-secrets over a whole change in one pass, streamed.

detect-secrets is set up once per scan (one settings set-up for the whole change: its settings
are a process-wide singleton, so scans take turns) and fed the lines themselves: no file is
written. Each line goes through what ``scan_file`` does with it: every plugin's
``analyze_line`` with the file's name (so the keyword detector's file-type rules apply), then
detect-secrets' own filters, the ``# pragma: allowlist secret`` one among them (on the line, or
``pragma: allowlist nextline secret`` on the line above, which the diff's context shows). Its
file transformers (YAML, INI re-parsing) are not used: they need the whole file. The provider
detectors use our own patterns (:mod:`secret_patterns`).

The sources are streams of lines (:class:`Stream`): a source is read in chunks, in bounded
memory, by :mod:`secret_reader`; :class:`ScanSource` holds a few lines in memory.

Speed: each plugin has a gate (:mod:`secret_gate`): its needles and value shapes
(:mod:`secret_patterns`), then its patterns run once over a chunk's lines joined; the plugin
reads only the lines a match touched. That is exact: the patterns are compiled again with
``re.MULTILINE`` (so ``^`` and ``$`` still mean a line's ends), and a plugin whose patterns
could behave differently across a line end (a negative lookaround other than ``(?!\\w)`` or
one of a single character class without a line end in it, ``\\A``, ``\\Z``, atomic groups,
possessive repeats) reads every line. Tests compare both ways on a corpus. The entropy plugins'
gate asks for quoted strings long enough, and random enough, to pass their entropy limit.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.adapters.validators.secret_diff import Lines
from assay.adapters.validators.secret_gate import Gate, line_starts, touched
from assay.adapters.validators.secret_patterns import NEEDLES, PATTERNS, SHAPES
from assay.adapters.validators.secret_reader import Hit, Plugin, Scanned, Source, read
from assay.adapters.validators.secret_rules import PROVIDER_ONLY_FILES, detector

__all__ = [
    "OUTPUT_SOURCE",
    "Hit",
    "Lines",
    "ScanSource",
    "Scanned",
    "Stream",
    "scan",
    "scan_streams",
]

OUTPUT_SOURCE = "coder output"
_OUTPUT_NAME = "coder-output.log"  # the file name detect-secrets' rules see for the output
# Constructs a joined text may read differently from a single line (see the module doc).
_LINE_UNSAFE = ("(?!", "(?<!", "\\A", "\\Z", "(?>", "*+", "++", "?+", "}+")
_LINE_SAFE = ("(?!\\w)", "(?<!\\w)")  # \w never matches a line end
# A negative lookaround of one character class that holds no line end: before a line's first
# character a joined text has "\n", which the class does not match, as nothing would.
_CLASS_LOOKAROUND = re.compile(r"\(\?<?!\[(?!\^)(?:[^\]\\]|\\[-\\\]./+_dw])+\]\)")
_LEADING_LOOKBEHIND = re.compile(r"\A\(\?<!\[(?:[^\]\\]|\\.)+\]\)")

_SCAN_LOCK = threading.Lock()

# The names the tests (and older callers) use for the gate's helpers.
_line_starts = line_starts
_touched = touched


@dataclass(frozen=True)
class ScanSource:
    """Lines to scan from one file of the change, or from the coder's output, in memory."""

    name: str  # the path in the change, or OUTPUT_SOURCE
    lines: Sequence[tuple[int, str]]  # (line number, text): the new lines
    # Every line the diff shows (context lines too), for the pragma on the line above.
    shown: Mapping[int, str] = field(default_factory=dict)

    def stream(self) -> Stream:
        added = dict(self.lines)
        numbers = sorted(set(added) | set(self.shown))
        lines = Lines.of(
            (n, added[n], True) if n in added else (n, self.shown[n], False) for n in numbers
        )
        return Stream(self.name, [lines])


@dataclass(frozen=True)
class Stream:
    """The lines of one source, read once, in order."""

    name: str  # the path in the change, or OUTPUT_SOURCE
    batches: Iterable[Lines]
    # The file's text in the base, read only when a hunk starts inside a private key.
    base_lines: Callable[[], Sequence[str] | None] | None = None

    @property
    def output(self) -> bool:
        return self.name == OUTPUT_SOURCE


def scan(sources: Sequence[ScanSource], *, gated: bool = True) -> list[Hit]:
    """Every finding in ``sources``, with detect-secrets set up once. ``gated=False`` runs every
    plugin on every line (what the gate is compared with)."""
    return scan_streams([s.stream() for s in sources if s.lines], gated=gated).hits


def scan_streams(
    streams: Iterable[Stream], *, known: Mapping[str, str] | None = None, gated: bool = True
) -> Scanned:
    """Every finding in ``streams`` (each read once), and how many lines were read. ``known``:
    exact values to find on new lines, by the name of the variable that holds each."""
    scanned = Scanned()
    with _SCAN_LOCK, _imported() as ds, _quiet_detect_secrets():
        names = sorted(cls.__name__ for cls in ds.plugin_classes().values())
        used = [{"name": n} for n in names if detector(n).diff or detector(n).output]
        with ds.transient_settings({"plugins_used": used}):
            pinned = [_pinned(p) for p in ds.get_plugins()]
            plugins = [Plugin(p, _gate(p, ds) if gated else None) for p in pinned]
            chosen: dict[tuple[bool, bool], list[Plugin]] = {}
            for stream in streams:
                kind = (stream.output, _provider_only(stream.name, ds))
                if kind not in chosen:
                    chosen[kind] = _chosen(plugins, output=kind[0], provider_only=kind[1])
                source = Source(
                    name=stream.name,
                    filename=_OUTPUT_NAME if stream.output else stream.name,
                    plugins=chosen[kind],
                    ds=ds,
                    known=dict(known or {}),
                    base_lines=stream.base_lines,
                )
                read(source, stream.batches, scanned)
    return scanned


def _chosen(plugins: Sequence[Plugin], *, output: bool, provider_only: bool) -> list[Plugin]:
    """The plugins that read the coder's output, or the lines of a file (of one only the
    providers' read)."""
    chosen = []
    for plugin in plugins:
        row = detector(plugin.name)
        if (row.output if output else row.diff) and not (provider_only and row.generic):
            chosen.append(plugin)
    return chosen


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


def _gate(plugin: Any, ds: Any) -> Gate | None:
    """What a line must hold for ``plugin`` to find anything on it, or None when its patterns
    cannot be run over joined lines exactly (then the plugin reads every line)."""
    check, lowered = None, False
    if isinstance(plugin, ds.RegexBasedDetector):
        patterns = list(plugin.denylist)
    elif isinstance(plugin, ds.KeywordDetector):
        # Every one of its patterns holds the keyword list itself (a test checks it), matched
        # in any case: lowercase keywords, read in the lowercased line.
        patterns = [re.compile("|".join(ds.KEYWORDS).lower())]
        lowered = True
    elif isinstance(plugin, ds.HighEntropyStringsPlugin):
        # Quoted strings, the entropy judged afterwards; a string of n characters holds at most
        # log2(n) bits a character, so a shorter one than this cannot pass the limit.
        least = math.floor(2**plugin.entropy_limit) + 1
        charset = re.escape(plugin.charset)
        patterns = [re.compile(rf"(['\"])([{charset}]{{{least},}})(\1)")]
        check = _entropy_check(plugin)
    else:
        return None
    if not all(_line_safe(p.pattern) for p in patterns):
        return None
    needles, folded = NEEDLES.get(type(plugin).__name__, ((), ()))
    shapes = SHAPES.get(type(plugin).__name__, ())
    # A leading lookbehind costs a try at every character; without it the gate matches a
    # superset of the lines (the plugin, reading them, still applies it).
    gate = [_LEADING_LOOKBEHIND.sub("", p.pattern, count=1) for p in patterns]
    return Gate(
        patterns=tuple(
            re.compile(g, p.flags | re.MULTILINE) for g, p in zip(gate, patterns, strict=True)
        ),
        needles=needles,
        folded=folded,
        shapes=tuple(re.compile(shape, re.MULTILINE) for shape in shapes),
        lowered=lowered,
        line_check=check,
    )


def _entropy_check(plugin: Any) -> Callable[[str], bool]:
    """Whether a line holds a quoted string the entropy plugin could report: its own regex, and
    Shannon entropy computed by counting (detect-secrets' own sums over its whole charset, 64
    counts a string), with a margin for the order of the sum."""
    regex: re.Pattern[str] = plugin.regex
    limit = float(plugin.entropy_limit) - 1e-9

    def passes(data: str) -> bool:
        if math.log2(len(set(data))) <= limit:  # n distinct characters: at most log2(n) bits
            return False
        size = len(data)
        return -sum(n / size * math.log(n / size, 2) for n in Counter(data).values()) > limit

    def check(line: str) -> bool:
        return any(passes(found[1]) for found in regex.findall(line) if found[1])

    return check


def _line_safe(pattern: str) -> bool:
    for safe in _LINE_SAFE:
        pattern = pattern.replace(safe, "")
    pattern = _CLASS_LOOKAROUND.sub("", pattern)
    return not any(construct in pattern for construct in _LINE_UNSAFE)


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


_LOAD_LOCK = threading.Lock()


def load() -> None:
    """Import detect-secrets' parts once (every scan needs them); a second caller waits for
    the first (:func:`assay.adapters.validators.load_secret_scan` runs it in a thread while
    a coder works)."""
    with _LOAD_LOCK:
        if _LOADED:
            return
        before = warnings.showwarning
        loaded = _DetectSecrets()
        if warnings.showwarning is not before:
            # Importing detect-secrets turns on logging.captureWarnings for the whole process.
            logging.captureWarnings(False)
        _LOADED.append(loaded)


@contextlib.contextmanager
def _imported() -> Iterator[_DetectSecrets]:
    load()
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
