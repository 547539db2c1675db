"""The one interface every validator adapter implements.

A validator looks at a candidate's fresh checkout (or its objects) and change and reaches a
verdict that does not depend on anything the coder said. ``error=True`` means it could not
reach one (never a pass). Engine-side checks (scope, secrets) may also ask the engine to fire
a canonical halt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from assay.adapters.coders.base import UsageMeter
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.changes import ChangeSet
from assay.core.quota import Quota
from assay.core.results import ValidatorResult
from assay.core.vocab import CanonicalHalt


@dataclass(frozen=True)
class ValidationContext:
    worktree: Path
    change: ChangeSet
    task: str  # the instruction, for judges
    env: Mapping[str, str]
    settings: Mapping[str, Any]  # this validator's contract block
    log_dir: Path
    captured_output: str = ""  # the coder's captured output, for the secret scan
    sandbox: SandboxSpec | None = None  # where a command validator runs (None: unconfined)
    # The engine-owned repository holding the base and the candidate, and the candidate's
    # commit there: what the scope and secret checks read git objects from (never the seat).
    repo: Path | None = None
    revision: str | None = None
    # The lines of ``change.diff`` (with or without their newline), read once, in order, for a
    # check that can stream them (the secret scan): a huge diff is then never held whole.
    # None: ``change.diff`` is read.
    diff_lines: Callable[[], Iterable[str]] | None = None
    # Where a model validator's every answer's usage goes as it arrives (None: nowhere).
    meter: UsageMeter | None = None


@dataclass(frozen=True)
class DetectedSecret:
    """A credential the secret scan found, held only so the engine can redact it from the files
    it keeps: its value is never in a repr, a finding, a log line or the payload."""

    type: str  # the detector's name ("AWS Access Key"): the redaction's label
    value: str = field(repr=False)


@dataclass(frozen=True)
class ValidationOutcome:
    result: ValidatorResult
    fire: CanonicalHalt | None = None  # a canonical halt the engine must fire
    evidence: str | None = None  # the evidence to fire it with (never a secret's value)
    quota: Quota | None = None  # a model judge lost to a rate or usage limit
    fault: str | None = None  # a model judge lost to a provider fault (5xx, 529, connection)
    # A model judge kept from running by a setting the operator controls (no key, a key
    # refused, an unknown model): the task is held with it, never retried.
    setting_error: str | None = None
    # What the secret scan found, for redaction only (never reported, never in a repr).
    secrets: tuple[DetectedSecret, ...] = field(default=(), repr=False)


class Validator(Protocol):
    kind: str

    def validate(self, context: ValidationContext) -> ValidationOutcome: ...


def only_warns(outcome: ValidationOutcome) -> ValidationOutcome:
    """``outcome`` of a validator that may only warn (``on_fail: warn``), whatever its adapter
    made of it: an advisory result, never ``block``; a judge's lost quota or provider fault is
    that warning, never a reason to end the run. A halt it fires (the run's spent budget)
    stays."""
    return replace(outcome, result=outcome.result.as_advisory(), quota=None, fault=None)


def could_not_run(result: ValidatorResult) -> str:
    """The run warning for an advisory validator that reached no verdict: which, and why."""
    lines = [line.strip() for line in result.justification.splitlines() if line.strip()]
    if lines:  # its first line says what happened ("...; output tail:"), its last one why
        lines[0] = lines[0].removesuffix(":").removesuffix("; output tail")
    why = ": ".join(dict.fromkeys(lines[:1] + lines[-1:]))[:300] or "no verdict"
    return f"validator {result.validator_id} could not run; on_fail: warn, so it only warns: {why}"
