"""Which findings are exposures: new credentials, not what the repository already holds.

A finding is no exposure when its credential is already in the base commit (the exact text of
its value, in any file, whatever the quoting or position around it), or when the base commit's
``.secrets.baseline`` (detect-secrets' own format) lists it: same path, same type, same
``hashed_secret``, whatever the line number. The baseline is read from the base commit, never
from the candidate: a coder could list its own key there. On a line marked ``# pragma:
allowlist secret`` a generic finding never reaches here; a provider's does, ``allowlisted``,
and when new it is a warning: the untrusted coder may have written the pragma beside its key.

An exposure blocks when its detector is a provider's (:mod:`secret_rules`) or the contract says
``secrets: strict``; a generic one otherwise only warns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assay.adapters import git
from assay.adapters.validators.base import DetectedSecret
from assay.adapters.validators.secret_rules import ENV_VALUE_PREFIX, detector
from assay.adapters.validators.secret_scan import OUTPUT_SOURCE, Hit

BASELINE_FILE = ".secrets.baseline"
MAX_BASELINE_BYTES = 16 << 20


@dataclass(frozen=True, order=True)
class SecretFinding:
    """Where a secret is and what kind it is. Deliberately no field for the value."""

    source: str  # a path in the change, or "coder output"
    line: int
    type: str

    def __str__(self) -> str:
        if self.source == OUTPUT_SOURCE:
            return f"{OUTPUT_SOURCE} line {self.line}: {self.type}"
        return f"{self.source}:{self.line}: {self.type}"


@dataclass(frozen=True)
class Baseline:
    """The ``(path, type, hashed_secret)`` entries of a ``.secrets.baseline``."""

    entries: frozenset[tuple[str, str, str]] = frozenset()
    problem: str | None = None  # why the file was not used, when it exists but cannot be read


@dataclass
class Judgement:
    blocking: list[SecretFinding] = field(default_factory=list)
    warning: list[SecretFinding] = field(default_factory=list)
    in_base: int = 0  # findings whose value the base commit already holds
    in_baseline: int = 0  # findings the base commit's .secrets.baseline lists
    values: set[DetectedSecret] = field(default_factory=set)  # exposures' and warnings'


def parse_baseline(text: str | None) -> Baseline:
    """A baseline's entries; an unreadable one is no entry at all (and says why)."""
    if text is None:
        return Baseline()
    try:
        results = json.loads(text).get("results", {})
        entries = frozenset(
            (str(path), str(entry["type"]), str(entry["hashed_secret"]))
            for path, listed in results.items()
            for entry in listed
        )
    except (ValueError, AttributeError, TypeError, KeyError) as exc:
        return Baseline(problem=f"{BASELINE_FILE} is not detect-secrets' format ({exc})")
    return Baseline(entries)


def read_baseline(repo: Path, commit: str) -> Baseline:
    """The ``.secrets.baseline`` of ``commit`` (the base), or none."""
    try:
        text = git.read_file_at(repo, commit, BASELINE_FILE)
    except git.GitError as exc:
        return Baseline(problem=f"{BASELINE_FILE} could not be read: {exc}")
    if text is not None and len(text) > MAX_BASELINE_BYTES:
        return Baseline(problem=f"{BASELINE_FILE} is larger than {MAX_BASELINE_BYTES} bytes")
    return parse_baseline(text)


def values_in_base(repo: Path, commit: str, hits: Iterable[Hit]) -> set[str]:
    """The values of ``hits`` the base commit's files hold. A base that cannot be searched
    holds none: every finding is then judged new (the check fails closed)."""
    try:
        return git.strings_at(repo, commit, {v for h in hits for v in _checked(h)})
    except git.GitError:
        return set()


def judge(hits: Sequence[Hit], *, in_base: set[str], baseline: Baseline, strict: bool) -> Judgement:
    """Sort ``hits`` into blocking exposures, warnings and what the repository already held."""
    verdict = Judgement()
    blocking: set[SecretFinding] = set()
    warning: set[SecretFinding] = set()
    for hit in hits:
        if (hit.source, hit.type, hit.secret_hash) in baseline.entries:
            verdict.in_baseline += 1
            continue
        checked = _checked(hit)
        if checked and checked <= in_base:
            verdict.in_base += 1
            continue
        kind = f"{hit.type} (allowlisted by a pragma)" if hit.allowlisted else hit.type
        finding = SecretFinding(hit.source, hit.line, kind)
        generic = not hit.type.startswith(ENV_VALUE_PREFIX) and detector(hit.plugin).generic
        generic = generic or hit.allowlisted
        (warning if generic and not strict else blocking).add(finding)
        label = hit.type.removeprefix(ENV_VALUE_PREFIX)
        verdict.values.update(DetectedSecret(label, v) for v in hit.values)
    verdict.blocking = sorted(blocking)
    verdict.warning = sorted(warning - blocking)
    return verdict


def _checked(hit: Hit) -> frozenset[str]:
    """What must be in the base for ``hit`` to be old: its values, or, when none could be
    taken (a key header without its body), the line itself."""
    return hit.values or frozenset({hit.text} if hit.text else ())
