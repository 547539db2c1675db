"""The ``secrets`` check: no credential in what the coder added or printed.

detect-secrets scans the diff's added lines (file by file, so its file-type rules apply) and
the coder's captured output. A finding blocks and asks the engine to fire
``halt-secret-exposure``. What is reported names the file, the line and the secret's type,
never its value: the value must not reach the payload, the ledger or a log.

False positives hold a task for a human, so the plugin sets are chosen to keep them down:
hex high-entropy strings (hashes, digests, commit ids) and public IP addresses are not
credentials; captured output (JSON event streams full of random-looking ids) is scanned only
with the detectors that recognise a credential by its format. Besides detect-secrets, the
exact values of credential-like variables in the validator's environment are looked for.

The values found travel to the engine in ``ValidationOutcome.secrets`` (never in the text of
the verdict), so it can redact them from the files it keeps (:mod:`assay.adapters.redact`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import stat
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from assay.adapters import git
from assay.adapters.validators.base import DetectedSecret, ValidationContext, ValidationOutcome
from assay.adapters.validators.secret_values import (
    PRIVATE_KEY_TYPE,
    completed_values,
    private_key_body,
)
from assay.core.changes import ChangeSet
from assay.core.results import ValidatorResult
from assay.core.vocab import CanonicalHalt, FileChangeKind, Severity

OUTPUT_SOURCE = "coder output"
MAX_NAMED = 20
# Not credentials, and frequent in ordinary code.
DIFF_EXCLUDED_PLUGINS: frozenset[str] = frozenset({"HexHighEntropyString", "IPPublicDetector"})
# Output is scanned with format detectors only (AWS, GitHub, Slack, private keys, JWT, ...).
OUTPUT_EXCLUDED_PLUGINS: frozenset[str] = DIFF_EXCLUDED_PLUGINS | {
    "Base64HighEntropyString",
    "KeywordDetector",
}
_CREDENTIAL_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_MIN_KNOWN_VALUE = 12
MAX_BINARY_BYTES = 4 << 20
_TEXT_RUN = re.compile(rb"[\x20-\x7e\t]{8,}")  # printable ASCII, as `strings` would show
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")

# detect-secrets keeps its settings in a process-wide singleton: one scan at a time.
_SCAN_LOCK = threading.Lock()


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


class SecretsValidator:
    """Blocks a change (and fires ``halt-secret-exposure``) when a credential is exposed."""

    kind = "secrets"

    def validate(self, context: ValidationContext) -> ValidationOutcome:
        validator_id = str(context.settings.get("id") or "secrets")
        added = added_lines(context.change.diff)
        added.update(binary_lines(context.worktree, context.change))
        output_lines = list(enumerate(context.captured_output.splitlines(), start=1))
        values: set[DetectedSecret] = set()
        try:
            found = set(scan_with_detect_secrets(added, output_lines, values))
        except Exception as exc:  # a scanner fault is no verdict, and never a pass
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.BLOCK,
                    error=True,
                    justification=f"the secret scan failed ({type(exc).__name__})",
                )
            )
        found |= set(scan_known_values(context.env, added, output_lines, values))
        findings = sorted(found)
        if not findings:
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.PASS,
                    justification=(
                        f"no credential in {sum(len(v) for v in added.values())} added line(s) "
                        f"or {len(output_lines)} line(s) of coder output"
                    ),
                )
            )
        named = "; ".join(str(f) for f in findings[:MAX_NAMED])
        more = len(findings) - MAX_NAMED
        evidence = f"a credential is exposed: {named}" + (f" (and {more} more)" if more > 0 else "")
        return ValidationOutcome(
            result=ValidatorResult(
                validator_id=validator_id,
                severity=Severity.BLOCK,
                justification=evidence,
                findings=[str(f) for f in findings],
            ),
            fire=CanonicalHalt.SECRET_EXPOSURE,
            evidence=evidence,
            secrets=tuple(sorted(values, key=lambda v: (v.type, v.value))),
        )


def binary_lines(worktree: Path, change: ChangeSet) -> dict[str, list[tuple[int, str]]]:
    """The text runs of each file the diff shows only as "Binary files differ", less those
    already in the base: a ``.gitattributes`` saying ``-diff`` (or one NUL byte) must not hide
    a credential from the scan. Regular files up to ``MAX_BINARY_BYTES`` only."""
    files: dict[str, list[tuple[int, str]]] = {}
    for delta in change.files:
        if not delta.binary or delta.kind is FileChangeKind.DELETED:
            continue
        runs = _text_runs(_read_regular(worktree / delta.path))
        if not runs:
            continue
        base = git.read_file_at(worktree, change.base_commit, delta.path) or ""
        known = set(_text_runs(base.encode("utf-8", "replace")))
        files[delta.path] = [(n, run) for n, run in enumerate(runs, 1) if run not in known]
    return files


def _read_regular(path: Path) -> bytes:
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BINARY_BYTES:
            return b""
        return path.read_bytes()
    except OSError:
        return b""


def _text_runs(data: bytes) -> list[str]:
    return [run.decode("ascii") for run in _TEXT_RUN.findall(data)]


def added_lines(diff: str) -> dict[str, list[tuple[int, str]]]:
    """The added lines of a unified diff, per new path, with their line numbers in the new file.

    Hunk line counts are followed exactly, so an added line that itself begins with ``++`` is
    not mistaken for a file header.
    """
    files: dict[str, list[tuple[int, str]]] = {}
    path: str | None = None
    old_left = new_left = 0
    line_no = 0
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            old_left = new_left = 0
        if old_left > 0 or new_left > 0:
            if line.startswith("+"):
                if path is not None:
                    files.setdefault(path, []).append((line_no, line[1:]))
                line_no += 1
                new_left -= 1
            elif line.startswith("-"):
                old_left -= 1
            elif line.startswith("\\"):
                pass  # "\ No newline at end of file"
            else:
                line_no += 1
                old_left -= 1
                new_left -= 1
            continue
        if line.startswith("+++ "):
            target = line[4:].split("\t")[0]
            path = None if target == "/dev/null" else _strip_prefix(_unquote(target))
        elif match := _HUNK.match(line):
            old_left = int(match.group(1)) if match.group(1) is not None else 1
            line_no = int(match.group(2))
            new_left = int(match.group(3)) if match.group(3) is not None else 1
    return files


def scan_with_detect_secrets(
    added: Mapping[str, Sequence[tuple[int, str]]],
    output: Sequence[tuple[int, str]],
    values: set[DetectedSecret] | None = None,
) -> Iterator[SecretFinding]:
    """Run detect-secrets in-process over the added lines and the output. The findings say
    where; the values found go only into ``values``, for redaction."""
    before = warnings.showwarning
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import transient_settings

    if warnings.showwarning is not before:
        # Importing detect-secrets turns on logging.captureWarnings for the whole process.
        logging.captureWarnings(False)
    from detect_secrets.filters.heuristic import is_non_text_file

    def scanned_name(path: str) -> str:
        # Its file-type rules, but never its skip by extension: text in `x.png` is text.
        name = PurePosixPath(path).name or "file"
        return f"{name}.txt" if is_non_text_file(name) else name

    jobs: list[tuple[str, str, Sequence[tuple[int, str]], frozenset[str]]] = [
        (path, scanned_name(path), lines, DIFF_EXCLUDED_PLUGINS)
        for path, lines in sorted(added.items())
        if lines
    ]
    if output:
        jobs.append((OUTPUT_SOURCE, "coder-output.log", output, OUTPUT_EXCLUDED_PLUGINS))
    if not jobs:
        return
    results: list[SecretFinding] = []
    with _SCAN_LOCK, _quiet_detect_secrets(), tempfile.TemporaryDirectory() as tmp:
        by_type: dict[str, type] = dict(get_mapping_from_secret_type_to_class())
        names = [cls.__name__ for cls in by_type.values()]
        for index, (source, name, lines, excluded) in enumerate(jobs):
            folder = Path(tmp) / str(index)
            folder.mkdir()
            target = folder / name
            target.write_text("\n".join(text for _, text in lines) + "\n", encoding="utf-8")
            plugins = [{"name": n} for n in sorted(names) if n not in excluded]
            texts = [text for _, text in lines]
            with transient_settings({"plugins_used": plugins}):
                for secret in scan_file(str(target)):
                    at = secret.line_number - 1
                    line = lines[at][0] if 0 <= at < len(lines) else secret.line_number
                    results.append(SecretFinding(source, line, str(secret.type)))
                    if values is not None and 0 <= at < len(lines):
                        found = _values_of(secret, texts, at, by_type.get(str(secret.type)))
                        values.update(DetectedSecret(str(secret.type), v) for v in found)
    yield from results


def _values_of(secret: Any, lines: Sequence[str], at: int, plugin: type | None) -> set[str]:
    """The whole credential behind a detect-secrets finding on ``lines[at]``."""
    if str(secret.type) == PRIVATE_KEY_TYPE:
        return private_key_body(lines, at)
    captured = getattr(secret, "secret_value", None)
    if not captured:
        return set()
    return completed_values(lines[at], str(captured), getattr(plugin, "denylist", ()))


def scan_known_values(
    env: Mapping[str, str],
    added: Mapping[str, Sequence[tuple[int, str]]],
    output: Sequence[tuple[int, str]],
    values: set[DetectedSecret] | None = None,
) -> Iterator[SecretFinding]:
    """The exact value of a credential-like variable of the environment, wherever it appears."""
    known = {
        name: value
        for name, value in env.items()
        if _CREDENTIAL_NAME.search(name)
        and len(value) >= _MIN_KNOWN_VALUE
        and not value.startswith(("/", "~", "$"))
        and not any(c.isspace() for c in value)
    }
    if not known:
        return
    sources: list[tuple[str, Sequence[tuple[int, str]]]] = [*sorted(added.items())]
    sources.append((OUTPUT_SOURCE, output))
    for source, lines in sources:
        for line_no, text in lines:
            for name, value in sorted(known.items()):
                if value in text:
                    if values is not None:
                        values.add(DetectedSecret(name, value))
                    yield SecretFinding(source, line_no, f"value of the variable {name}")


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


def _strip_prefix(path: str) -> str:
    return path[2:] if path.startswith(("b/", "a/")) else path


def _unquote(path: str) -> str:
    """git quotes unusual paths ("a/caf\\303\\251.txt"); undo its C-style escapes."""
    if len(path) >= 2 and path.startswith('"') and path.endswith('"'):
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1", "replace").decode("utf-8", "replace")
    return path
