"""The ``secrets`` check: no new credential in what the coder added or printed.

detect-secrets scans the lines the change adds and the coder's captured output, in one pass
(:mod:`secret_scan`). A finding is an exposure only when the credential is new
(:mod:`secret_exposure`): one the base commit already holds, anywhere, or that its
``.secrets.baseline`` lists, is not; nor is a line marked ``# pragma: allowlist secret``. A new
credential found by a provider's detector (AWS, GitHub, private keys, ... :mod:`secret_rules`),
or the exact value of a credential-like variable of the validator's environment, blocks and
asks the engine to fire ``halt-secret-exposure``; one found by a generic detector (keyword,
entropy, credentials in a URL) warns, unless the contract says ``secrets: strict``. What is
reported names the file, the line and the secret's type, never its value.

The values of exposures and warnings travel to the engine in ``ValidationOutcome.secrets``
(never in the text of the verdict), so it can redact them from the files it keeps
(:mod:`assay.adapters.redact`). Values already in the base commit are not redacted: they are in
the repository anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from assay.adapters import git
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.adapters.validators.secret_exposure import (
    Baseline,
    Judgement,
    SecretFinding,
    judge,
    read_baseline,
    values_in_base,
)
from assay.adapters.validators.secret_rules import ENV_VALUE_PREFIX
from assay.adapters.validators.secret_scan import OUTPUT_SOURCE, Hit, ScanSource, scan
from assay.core.results import ValidatorResult
from assay.core.vocab import CanonicalHalt, FileChangeKind, SecretsMode, Severity

__all__ = ["OUTPUT_SOURCE", "SecretFinding", "SecretsValidator", "added_lines"]

MAX_NAMED = 20
_CREDENTIAL_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_MIN_KNOWN_VALUE = 12
MAX_BINARY_BYTES = 4 << 20
_TEXT_RUN = re.compile(rb"[\x20-\x7e\t]{8,}")  # printable ASCII, as `strings` would show
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class SecretsValidator:
    """Blocks a change (and fires ``halt-secret-exposure``) when a new credential is exposed;
    warns when a generic detector finds a possible one."""

    kind = "secrets"

    def validate(self, context: ValidationContext) -> ValidationOutcome:
        settings = context.settings
        validator_id = str(settings.get("id") or "secrets")
        strict = str(settings.get("mode") or SecretsMode.STANDARD) == SecretsMode.STRICT
        sources = diff_sources(context.change.diff)
        sources += [
            ScanSource(path, lines)
            for path, lines in sorted(binary_lines(_repo(context), context).items())
        ]
        added = sum(len(s.lines) for s in sources)
        output = list(enumerate(context.captured_output.splitlines(), start=1))
        sources.append(ScanSource(OUTPUT_SOURCE, output))
        try:
            hits = scan(sources)
        except Exception as exc:  # a scanner fault is no verdict, and never a pass
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.BLOCK,
                    error=True,
                    justification=f"the secret scan failed ({type(exc).__name__})",
                )
            )
        hits += known_value_hits(context.env, sources)
        baseline, in_base = Baseline(), set[str]()
        if hits:
            base = context.change.base_commit
            baseline = read_baseline(_repo(context), base)
            in_base = values_in_base(_repo(context), base, hits)
        verdict = judge(hits, in_base=in_base, baseline=baseline, strict=strict)
        scanned = f"{added} added line(s) and {len(output)} line(s) of coder output"
        return _outcome(validator_id, verdict, scanned, _notes(verdict, baseline))


def _outcome(validator_id: str, verdict: Judgement, scanned: str, notes: str) -> ValidationOutcome:
    secrets = tuple(sorted(verdict.values, key=lambda v: (v.type, v.value)))
    findings = [str(f) for f in sorted(verdict.blocking + verdict.warning)]
    possible = ""
    if verdict.warning:
        possible = (
            f"possible credential(s) found by generic detectors: {_named(verdict.warning)} "
            "(a warning; `secrets: strict` blocks them)"
        )
    if verdict.blocking:
        evidence = f"a credential is exposed: {_named(verdict.blocking)}"
        return ValidationOutcome(
            result=ValidatorResult(
                validator_id=validator_id,
                severity=Severity.BLOCK,
                justification="; ".join(filter(None, [evidence, possible])) + notes,
                findings=findings,
            ),
            fire=CanonicalHalt.SECRET_EXPOSURE,
            evidence=evidence,
            secrets=secrets,
        )
    if verdict.warning:
        return ValidationOutcome(
            result=ValidatorResult(
                validator_id=validator_id,
                severity=Severity.WARN,
                advisory=True,  # a warning by rule: it never counts against the consensus
                justification=possible + notes,
                findings=findings,
            ),
            secrets=secrets,
        )
    return ValidationOutcome(
        result=ValidatorResult(
            validator_id=validator_id,
            severity=Severity.PASS,
            justification=f"no new credential in {scanned}{notes}",
        )
    )


def _named(findings: Sequence[SecretFinding]) -> str:
    named = "; ".join(str(f) for f in findings[:MAX_NAMED])
    more = len(findings) - MAX_NAMED
    return named + (f" (and {more} more)" if more > 0 else "")


def _notes(verdict: Judgement, baseline: Baseline) -> str:
    """What was found but is no exposure, and a baseline that could not be used."""
    old = []
    if verdict.in_base:
        old.append(f"{verdict.in_base} already in the base commit")
    if verdict.in_baseline:
        old.append(f"{verdict.in_baseline} listed in its .secrets.baseline")
    notes = f" ({' and '.join(old)}: not exposures)" if old else ""
    if baseline.problem:
        notes += f"; {baseline.problem}"
    return notes


def _repo(context: ValidationContext) -> Path:
    """Where the base and the candidate are read from: the engine's repository of them."""
    return context.repo if context.repo is not None else context.worktree


def binary_lines(repo: Path, context: ValidationContext) -> dict[str, list[tuple[int, str]]]:
    """The text runs of each file the diff shows only as "Binary files differ", less those
    already in the base: a ``.gitattributes`` saying ``-diff`` (or one NUL byte) must not hide
    a credential from the scan. Blobs up to ``MAX_BINARY_BYTES`` only, read from the
    candidate's commit (``HEAD`` of ``repo`` when none is named)."""
    change = context.change
    revision = context.revision or "HEAD"
    files: dict[str, list[tuple[int, str]]] = {}
    for delta in change.files:
        if not delta.binary or delta.kind is FileChangeKind.DELETED:
            continue
        runs = _text_runs(git.read_blob(repo, revision, delta.path, MAX_BINARY_BYTES) or b"")
        if not runs:
            continue
        base = git.read_file_at(repo, change.base_commit, delta.path) or ""
        known = set(_text_runs(base.encode("utf-8", "replace")))
        files[delta.path] = [(n, run) for n, run in enumerate(runs, 1) if run not in known]
    return files


def _text_runs(data: bytes) -> list[str]:
    return [run.decode("ascii") for run in _TEXT_RUN.findall(data)]


def diff_sources(diff: str) -> list[ScanSource]:
    """One scan source per file of a unified diff: its added lines, and every line the diff
    shows of the new file (for the pragma on the line above an added one)."""
    return [ScanSource(path, added, shown) for path, (added, shown) in sorted(_parse(diff).items())]


def added_lines(diff: str) -> dict[str, list[tuple[int, str]]]:
    """The added lines of a unified diff, per new path, with their line numbers in the new file."""
    return {path: added for path, (added, _) in _parse(diff).items() if added}


def _parse(diff: str) -> dict[str, tuple[list[tuple[int, str]], dict[int, str]]]:
    """Per new path: its added lines and every line shown of the new file, by line number.

    Hunk line counts are followed exactly, so an added line that itself begins with ``++`` is
    not mistaken for a file header.
    """
    files: dict[str, tuple[list[tuple[int, str]], dict[int, str]]] = {}
    current: tuple[list[tuple[int, str]], dict[int, str]] | None = None
    old_left = new_left = 0
    line_no = 0
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            old_left = new_left = 0
        if old_left > 0 or new_left > 0:
            if line.startswith("+"):
                if current is not None:
                    current[0].append((line_no, line[1:]))
                    current[1][line_no] = line[1:]
                line_no += 1
                new_left -= 1
            elif line.startswith("-"):
                old_left -= 1
            elif line.startswith("\\"):
                pass  # "\ No newline at end of file"
            else:
                if current is not None:
                    current[1][line_no] = line[1:]
                line_no += 1
                old_left -= 1
                new_left -= 1
            continue
        if line.startswith("+++ "):
            target = line[4:].split("\t")[0]
            path = None if target == "/dev/null" else _strip_prefix(_unquote(target))
            current = None if path is None else files.setdefault(path, ([], {}))
        elif match := _HUNK.match(line):
            old_left = int(match.group(1)) if match.group(1) is not None else 1
            line_no = int(match.group(2))
            new_left = int(match.group(3)) if match.group(3) is not None else 1
    return files


def known_value_hits(env: Mapping[str, str], sources: Sequence[ScanSource]) -> list[Hit]:
    """The exact value of a credential-like variable of the environment, wherever it appears."""
    return list(_known_value_hits(env, sources))


def _known_value_hits(env: Mapping[str, str], sources: Sequence[ScanSource]) -> Iterator[Hit]:
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
    for source in sources:
        for line_no, text in source.lines:
            for name, value in sorted(known.items()):
                if value in text:
                    kind = f"{ENV_VALUE_PREFIX}{name}"
                    yield Hit(source.name, line_no, kind, "environment", "", frozenset({value}))


def _strip_prefix(path: str) -> str:
    return path[2:] if path.startswith(("b/", "a/")) else path


def _unquote(path: str) -> str:
    """git quotes unusual paths ("a/caf\\303\\251.txt"); undo its C-style escapes."""
    if len(path) >= 2 and path.startswith('"') and path.endswith('"'):
        raw = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1", "replace").decode("utf-8", "replace")
    return path
