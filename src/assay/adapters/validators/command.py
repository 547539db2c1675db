"""The ``command`` validator: a test or lint command's exit code is the verdict.

Exit 0 passes; anything else blocks (or only warns, when the contract says ``on_fail: warn``).
A command that does not finish in time, or cannot be started, reached no verdict: that is
``error=True``, never a pass (and, ``on_fail: warn``, only a warning: severity ``warn``).
When the machine fails it (its log hits the file-size limit, the disk is full)
:class:`EnvironmentFault` is raised: the attempt's environment error, refunded by the engine,
not a verdict on the candidate.

Findings are what the engine compares between attempts to see that recovery is stuck, so they
are made stable: the failing test ids when the output has pytest's ``FAILED``/``ERROR`` lines,
else the last lines of output with timings, addresses and the worktree's path normalised away.
"""

from __future__ import annotations

import re
from pathlib import Path

from assay.adapters.process import (
    SHELL,
    SHELL_NOT_EXECUTABLE,
    SHELL_NOT_FOUND,
    EnvironmentFault,
    ProcessResult,
    run_process,
)
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.core.results import ValidatorResult
from assay.core.vocab import OnFail, Severity

DEFAULT_TIMEOUT = 600.0
JUSTIFICATION_TAIL_CHARS = 2000
MAX_FINDINGS = 20
TAIL_FINDING_LINES = 5

# pytest's short test summary: "FAILED tests/x.py::test_y - AssertionError: ..."
_PYTEST_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S.*?)(?: - .*)?$")
_NOISE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x?"),
    (re.compile(r"\b\d+:\d{2}:\d{2}(?:\.\d+)?\b"), "?:??:??"),
    (
        re.compile(r"\b\d+(?:\.\d+)?\s*(?:ms|s|sec|secs|seconds?|minutes?)\b", re.IGNORECASE),
        "?s",
    ),
    (re.compile(r"\bpid[ =:]?\d+\b", re.IGNORECASE), "pid ?"),
]
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class CommandValidator:
    """Runs the validator's ``run`` via ``/bin/sh -c`` in the candidate's worktree."""

    kind = "command"

    def validate(self, context: ValidationContext) -> ValidationOutcome:
        settings = context.settings
        validator_id = str(settings.get("id") or "command")
        run = settings.get("run")
        advisory = str(settings.get("on_fail") or OnFail.BLOCK) == OnFail.WARN
        if not run:
            return _errored(
                validator_id, "no command to run: set `run` on this validator", advisory
            )
        timeout = float(settings.get("timeout_seconds") or DEFAULT_TIMEOUT)
        log_path = context.log_dir / f"validator-{_SAFE_NAME.sub('_', validator_id)}.log"
        try:
            ran = run_process(
                [SHELL, "-c", str(run)],
                cwd=context.worktree,
                env=context.env,
                timeout=timeout,
                log_path=log_path,
                sandbox=context.sandbox,
            )
        except EnvironmentFault:  # the machine, not the command: the engine refunds it
            raise
        except OSError as exc:
            return _errored(validator_id, f"`{run}` could not be started: {exc}", advisory)
        return ValidationOutcome(
            result=judge_process(
                ran, validator_id, str(run), context.worktree, advisory, timeout=timeout
            )
        )


def judge_process(
    ran: ProcessResult,
    validator_id: str,
    run: str,
    worktree: Path,
    advisory: bool,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> ValidatorResult:
    """The verdict of one finished (or timed-out: killed at ``timeout`` seconds) validator
    process."""
    tail = normalise_paths(ran.tail(JUSTIFICATION_TAIL_CHARS), worktree)
    failed = Severity.WARN if advisory else Severity.BLOCK
    if ran.timed_out:
        return ValidatorResult(
            validator_id=validator_id,
            severity=failed,
            error=True,
            justification=(
                f"`{run}` did not finish in {timeout:g} s (its `timeout_seconds`) and was "
                f"killed; output tail:\n{tail}"
            ),
            findings=["timed out"],
            advisory=advisory,
        )
    if ran.exit_code == 0:
        return ValidatorResult(
            validator_id=validator_id,
            severity=Severity.PASS,
            justification=f"`{run}` exited 0",
            advisory=advisory,
        )
    if ran.exit_code in (SHELL_NOT_FOUND, SHELL_NOT_EXECUTABLE):
        return ValidatorResult(
            validator_id=validator_id,
            severity=failed,
            error=True,
            justification=(
                f"`{run}` could not run its command (exit {ran.exit_code}); install the tool "
                f"or fix `run`:\n{tail}"
            ),
            findings=[f"exit {ran.exit_code}"],
            advisory=advisory,
        )
    return ValidatorResult(
        validator_id=validator_id,
        severity=failed,
        justification=f"`{run}` exited {ran.exit_code}; output tail:\n{tail}",
        findings=stable_findings(ran.stdout + "\n" + ran.stderr, worktree),
        advisory=advisory,
    )


def stable_findings(output: str, worktree: Path | None = None) -> list[str]:
    """What failed, in a form that is identical for identical failures across runs."""
    text = normalise_paths(output, worktree) if worktree is not None else output
    lines = [line.rstrip() for line in text.splitlines()]
    failed: list[str] = []
    for line in lines:
        match = _PYTEST_SUMMARY.match(line)
        if match and match.group(2).strip() and not match.group(2).startswith("-"):
            item = strip_noise(f"{match.group(1)} {match.group(2).strip()}")
            if item not in failed:
                failed.append(item)
    if failed:
        return failed[:MAX_FINDINGS]
    kept = [strip_noise(line).strip() for line in lines if line.strip()]
    kept = [line for line in kept if line and not set(line) <= set("=-_*~. ")]
    return kept[-TAIL_FINDING_LINES:]


def strip_noise(line: str) -> str:
    for pattern, replacement in _NOISE:
        line = pattern.sub(replacement, line)
    return line


def normalise_paths(text: str, worktree: Path | None) -> str:
    """Replace the worktree's absolute path (it differs per run and seat) with ``.``."""
    if worktree is None:
        return text
    for form in {str(worktree.resolve()), str(worktree)}:
        text = text.replace(form + "/", "./").replace(form, ".")
    return text


def _errored(validator_id: str, why: str, advisory: bool) -> ValidationOutcome:
    return ValidationOutcome(
        result=ValidatorResult(
            validator_id=validator_id,
            severity=Severity.WARN if advisory else Severity.BLOCK,
            error=True,
            justification=why,
            findings=[why],
            advisory=advisory,
        )
    )
