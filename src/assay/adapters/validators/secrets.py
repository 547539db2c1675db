"""The ``secrets`` check: no new credential in what the coder added or printed.

detect-secrets scans the lines the change adds and the coder's captured output, in one pass
(:mod:`secret_scan`), streamed: the diff may be read line by line from git
(``ValidationContext.diff_lines``), so a huge change is never held whole. A finding is an
exposure only when the credential is new (:mod:`secret_exposure`): one the base commit already
holds, anywhere, or that its ``.secrets.baseline`` lists, is not; nor is a line marked
``# pragma: allowlist secret``. A private key counts by its body: a regenerated key whose
header line did not change is a new key. A new credential found by a provider's detector (AWS,
GitHub, private keys, ... :mod:`secret_rules`), or the exact value of a credential-like
variable of the validator's environment, blocks and asks the engine to fire
``halt-secret-exposure``; one found by a generic detector (keyword, entropy, credentials in a
URL) warns, unless the contract says ``secrets: strict``. What is
reported names the file, the line and the secret's type, never its value.

The values of exposures and warnings travel to the engine in ``ValidationOutcome.secrets``
(never in the text of the verdict), so it can redact them from the files it keeps
(:mod:`assay.adapters.redact`). Values already in the base commit are not redacted: they are in
the repository anyway.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path

from assay.adapters import git
from assay.adapters.validators import secret_reader
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.adapters.validators.secret_diff import added_lines, diff_files, split_lines
from assay.adapters.validators.secret_exposure import (
    Baseline,
    Judgement,
    SecretFinding,
    judge,
    read_baseline,
    values_in_base,
)
from assay.adapters.validators.secret_reader import MAX_LINE_CHARS, Scanned
from assay.adapters.validators.secret_scan import OUTPUT_SOURCE, ScanSource, Stream, scan_streams
from assay.core.results import ValidatorResult
from assay.core.vocab import CanonicalHalt, FileChangeKind, SecretsMode, Severity

__all__ = ["OUTPUT_SOURCE", "SecretFinding", "SecretsValidator", "added_lines"]

MAX_NAMED = 20
_CREDENTIAL_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_MIN_KNOWN_VALUE = 12
MAX_BINARY_BYTES = 4 << 20  # a base blob read whole, to know which text runs it had already
MAX_BINARY_TEXT = 64 << 20  # the text runs of one binary file the scan reads at most
MAX_RUN_CHARS = 1 << 20
RUN_OVERLAP = 4096
_TEXT_BYTES = bytes(range(0x20, 0x7F)) + b"\t"  # what a text run is made of
_TEXT_RUN = re.compile(rb"[\x20-\x7e\t]{8,}")  # printable ASCII, as `strings` would show
MAX_BASE_BYTES = 4 << 20


class SecretsValidator:
    """Blocks a change (and fires ``halt-secret-exposure``) when a new credential is exposed;
    warns when a generic detector finds a possible one."""

    kind = "secrets"

    def validate(self, context: ValidationContext) -> ValidationOutcome:
        settings = context.settings
        validator_id = str(settings.get("id") or "secrets")
        strict = str(settings.get("mode") or SecretsMode.STANDARD) == SecretsMode.STRICT
        output = ScanSource(
            OUTPUT_SOURCE, list(enumerate(context.captured_output.splitlines(), start=1))
        )
        try:
            binary = [
                ScanSource(path, lines).stream()
                for path, lines in sorted(binary_lines(_repo(context), context).items())
            ]
            streams = chain(_diff_streams(context), binary, [output.stream()])
            scanned = scan_streams(streams, known=credential_values(context.env))
        except TooMuchToScan as exc:  # not scanned whole: no verdict, and never a pass
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.BLOCK,
                    error=True,
                    justification=f"the secret scan could not read the whole change: {exc}",
                )
            )
        except Exception as exc:  # a scanner fault is no verdict, and never a pass
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.BLOCK,
                    error=True,
                    justification=f"the secret scan failed ({type(exc).__name__})",
                )
            )
        hits = scanned.hits
        baseline, in_base = Baseline(), set[str]()
        if hits:
            base = context.change.base_commit
            baseline = read_baseline(_repo(context), base)
            in_base = values_in_base(_repo(context), base, hits)
        verdict = judge(hits, in_base=in_base, baseline=baseline, strict=strict)
        added = scanned.added - len(output.lines)
        scanned_text = f"{added} added line(s) and {len(output.lines)} line(s) of coder output"
        if scanned.windowed:
            scanned_text += (
                f" ({scanned.windowed} line(s) longer than {MAX_LINE_CHARS} characters read in "
                "overlapping windows)"
            )
        limits = _limits(scanned)
        unjudged = scanned.overflow or (strict and scanned.generic_skipped > 0)
        if unjudged and not verdict.blocking:
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.BLOCK,
                    error=True,
                    justification=f"the secret scan could not judge the whole change{limits}",
                )
            )
        return _outcome(validator_id, verdict, scanned_text, _notes(verdict, baseline) + limits)


def _limits(scanned: Scanned) -> str:
    """What the scan's bounds left unread or unjudged, said (empty: nothing)."""
    said = ""
    if scanned.generic_skipped:
        said += (
            f"; the generic detectors stopped after {secret_reader.GENERIC_BUDGET} characters: "
            f"{scanned.generic_skipped} line(s) they would have read were not"
        )
    if scanned.overflow:
        most = secret_reader.MAX_HITS
        said += f"; more than {most} possible credentials: only the first were judged"
    return said


def _diff_streams(context: ValidationContext) -> Iterator[Stream]:
    """One stream per file of the change's diff, read from ``context.diff_lines`` when given."""
    lines = context.diff_lines() if context.diff_lines is not None else None
    diff = lines if lines is not None else split_lines(context.change.diff)
    for file in diff_files(diff):
        base_lines = None
        if file.base_path is not None:
            base_lines = _base_reader(_repo(context), context.change.base_commit, file.base_path)
        yield Stream(file.path, file.batches, base_lines)


def _base_reader(repo: Path, commit: str, path: str) -> Callable[[], Sequence[str] | None]:
    """The lines of ``path`` in the base, read on the first call (files up to
    ``MAX_BASE_BYTES``: a key file is small; a larger one is not looked into)."""
    cache: list[Sequence[str] | None] = []

    def lines() -> Sequence[str] | None:
        if not cache:
            try:
                data = git.read_blob(repo, commit, path, MAX_BASE_BYTES)
            except git.GitError:
                data = None
            text = None if data is None else data.decode("utf-8", "replace")
            cache.append(None if text is None else text.split("\n"))
        return cache[0]

    return lines


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


class TooMuchToScan(Exception):
    """A binary file holds more text than the scan reads: no verdict, never a pass."""


def binary_lines(repo: Path, context: ValidationContext) -> dict[str, list[tuple[int, str]]]:
    """The text runs of each file the diff shows only as "Binary files differ", less those
    already in the base: a ``.gitattributes`` saying ``-diff`` (or one NUL byte) must not hide
    a credential from the scan. Each blob is streamed from the candidate's commit (``HEAD`` of
    ``repo`` when none is named), whatever its size; one holding more than
    ``MAX_BINARY_TEXT`` characters of text is :class:`TooMuchToScan`."""
    change = context.change
    revision = context.revision or "HEAD"
    files: dict[str, list[tuple[int, str]]] = {}
    for delta in change.files:
        if not delta.binary or delta.kind is FileChangeKind.DELETED:
            continue
        runs = list(_streamed_runs(git.stream_blob(repo, revision, delta.path), delta.path))
        if not runs:
            continue
        base = git.read_blob(repo, change.base_commit, delta.path, MAX_BINARY_BYTES) or b""
        known = set(_text_runs(base))
        files[delta.path] = [(n, run) for n, run in enumerate(runs, 1) if run not in known]
    return files


def _streamed_runs(chunks: Iterable[bytes], path: str) -> Iterator[str]:
    """The text runs of a blob read chunk by chunk: a run cut by a chunk's end is joined, and
    one longer than ``MAX_RUN_CHARS`` comes in pieces that overlap by ``RUN_OVERLAP``."""
    carry = b""
    total = 0
    for chunk in chunks:
        data = carry + chunk
        cut = len(data.rstrip(_TEXT_BYTES))  # the run still open at the chunk's end waits
        whole, carry = data[:cut], data[cut:]
        for run in _TEXT_RUN.findall(whole):
            total += len(run)
            yield run.decode("ascii")
        while len(carry) > MAX_RUN_CHARS:
            total += MAX_RUN_CHARS
            yield carry[:MAX_RUN_CHARS].decode("ascii")
            carry = carry[MAX_RUN_CHARS - RUN_OVERLAP :]
        if total > MAX_BINARY_TEXT:
            raise TooMuchToScan(f"{path} holds more than {MAX_BINARY_TEXT:,} characters of text")
    for run in _TEXT_RUN.findall(carry):
        yield run.decode("ascii")


def _text_runs(data: bytes) -> list[str]:
    return [run.decode("ascii") for run in _TEXT_RUN.findall(data)]


def credential_values(env: Mapping[str, str]) -> dict[str, str]:
    """The values of the environment's credential-like variables, by name: each is looked for,
    exactly, wherever the scan reads."""
    return {
        name: value
        for name, value in env.items()
        if _CREDENTIAL_NAME.search(name)
        and len(value) >= _MIN_KNOWN_VALUE
        and not value.startswith(("/", "~", "$"))
        and not any(c.isspace() for c in value)
    }
