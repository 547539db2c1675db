"""The ``scope`` check: the change may touch only what the contract allows.

Patterns are gitignore-style (``src/**``, ``*.md``, ``!src/vendored/**``), matched with
pathspec. Every path the change touches counts, including the old path of a rename: moving a
protected file away is touching it. A path outside ``allow`` or inside ``protect`` blocks and
asks the engine to fire ``halt-scope-breach`` with the offending paths as evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pathspec

from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.core.changes import ChangeSet
from assay.core.results import ValidatorResult
from assay.core.vocab import CanonicalHalt, Severity

DEFAULT_ALLOW: tuple[str, ...] = ("**",)
MAX_NAMED_PATHS = 20


class ScopeValidator:
    """Matches every touched path against ``settings.allow`` and ``settings.protect``."""

    kind = "scope"

    def validate(self, context: ValidationContext) -> ValidationOutcome:
        validator_id = str(context.settings.get("id") or "scope")
        try:
            allow = _spec(context.settings.get("allow"), DEFAULT_ALLOW)
            protect = _spec(context.settings.get("protect"), ())
        except (ValueError, TypeError) as exc:
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.BLOCK,
                    error=True,
                    justification=f"the scope patterns are not valid: {exc}",
                )
            )
        paths = touched_paths(context.change)
        outside = [p for p in paths if not allow.match_file(p)]
        protected = [p for p in paths if protect.match_file(p)]
        if not outside and not protected:
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.PASS,
                    justification=f"all {len(paths)} touched path(s) are in scope",
                )
            )
        findings = [f"outside scope.allow: {p}" for p in outside]
        findings += [f"inside scope.protect: {p}" for p in protected]
        parts = []
        if outside:
            parts.append(f"outside scope.allow: {_names(outside)}")
        if protected:
            parts.append(f"inside scope.protect: {_names(protected)}")
        evidence = "the change touches paths " + "; ".join(parts)
        return ValidationOutcome(
            result=ValidatorResult(
                validator_id=validator_id,
                severity=Severity.BLOCK,
                justification=evidence,
                findings=findings,
            ),
            fire=CanonicalHalt.SCOPE_BREACH,
            evidence=evidence,
        )


def touched_paths(change: ChangeSet) -> list[str]:
    """Every path the change touches, old rename paths included, sorted and unique."""
    paths = {f.path for f in change.files}
    paths |= {f.renamed_from for f in change.files if f.renamed_from}
    return sorted(paths)


def _spec(value: Any, default: Iterable[str]) -> pathspec.GitIgnoreSpec:
    if value is None:
        patterns = list(default)
    elif isinstance(value, str):
        patterns = [value]
    elif isinstance(value, list | tuple):
        patterns = [str(p) for p in value]
    else:
        raise TypeError(f"expected a list of patterns, got {type(value).__name__}")
    return pathspec.GitIgnoreSpec.from_lines(patterns)


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:MAX_NAMED_PATHS])
    more = len(paths) - MAX_NAMED_PATHS
    return f"{shown} (and {more} more)" if more > 0 else shown
