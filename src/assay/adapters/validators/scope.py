"""The ``scope`` check: the change may touch only what the contract allows.

Patterns are gitignore-style (``src/**``, ``*.md``, ``!src/vendored/**``), matched with
pathspec. Every path the change touches counts, including the old path of a rename: moving a
protected file away is touching it. A path outside ``allow`` or inside ``protect`` blocks and
asks the engine to fire ``halt-scope-breach`` with the offending paths as evidence.

A symlink is a path that can reach further than itself: one the change adds or changes whose
target resolves outside the tree (an absolute target, ``..`` that climbs out, a chain through
other links, a ``.git`` folder) is a breach too. Targets are read from git's blobs and resolved
against the candidate's own links (:mod:`assay.core.links`), never followed on this machine.
A link that already pointed out of the tree in the base commit, untouched, is not the change's.

Some paths are a breach by rule, whatever ``allow`` and ``protect`` say
(:mod:`assay.core.forbidden`): ``.assay/`` (where the ledger lives), anything named ``.git``
at any depth, and a nested repository (a gitlink) the base does not have.

A symlink the change replaces by a regular file (or a folder) is a breach as well, unless the
contract sets ``scope.allow_type_changes``: a bulk ``sed -i`` writes a copy of the target in the
link's place, and the two then drift apart silently. Other type changes (an executable bit, a
file made a link) are listed in the payload, not judged here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pathspec

from assay.adapters import git_links
from assay.adapters.git import GitError
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.core.changes import ChangeSet, TypeChange
from assay.core.contract import DEFAULT_PROTECT
from assay.core.forbidden import ASSAY_HOME, ForbiddenPath, forbidden_paths, gitlinks_in
from assay.core.links import escape_reason
from assay.core.results import ValidatorResult
from assay.core.vocab import CanonicalHalt, Severity

DEFAULT_ALLOW: tuple[str, ...] = ("**",)
LINK_MODE = "120000"
MAX_NAMED_PATHS = 20


class ScopeValidator:
    """Matches every touched path against ``settings.allow`` and ``settings.protect``."""

    kind = "scope"

    def validate(self, context: ValidationContext) -> ValidationOutcome:
        validator_id = str(context.settings.get("id") or "scope")
        try:
            allow = _spec(context.settings.get("allow"), DEFAULT_ALLOW)
            protect = _spec(context.settings.get("protect"), DEFAULT_PROTECT)
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
        try:
            homes = [str(h) for h in context.settings.get("assay_homes") or [ASSAY_HOME]]
            forbidden = forbidden_by_rule(_repo(context), context.change, homes)
            escaping = escaping_links(context.repo, context.revision, context.change)
        except (GitError, OSError, ValueError) as exc:
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.BLOCK,
                    error=True,
                    justification=f"the candidate's links could not be read: {exc}",
                )
            )
        links_replaced = replaced_links(context.change)
        allow_types = allowed_type_changes(context.settings)
        replaced = [] if allow_types else links_replaced
        if not forbidden and not outside and not protected and not escaping and not replaced:
            allowed = [c.describe() for c in links_replaced]
            also = f" (type changes allowed: {_names(allowed)})" if allowed else ""
            return ValidationOutcome(
                result=ValidatorResult(
                    validator_id=validator_id,
                    severity=Severity.PASS,
                    justification=f"all {len(paths)} touched path(s) are in scope{also}",
                )
            )
        findings = [f"forbidden by rule: {f.describe()}" for f in forbidden]
        findings += [f"outside scope.allow: {p}" for p in outside]
        findings += [f"inside scope.protect: {p}" for p in protected]
        findings += [f"symlink out of the tree: {p} {why}" for p, why in escaping]
        findings += [f"symlink replaced: {c.describe()}" for c in replaced]
        parts = []
        if outside:
            parts.append(f"outside scope.allow: {_names(outside)}")
        if protected:
            parts.append(f"inside scope.protect: {_names(protected)}")
        clauses = []
        if forbidden:
            clauses.append(f"forbidden by rule: {_names([f.describe() for f in forbidden])}")
        if parts:
            clauses.append("the change touches paths " + "; ".join(parts))
        if escaping:
            shown = [f"{p} {why}" for p, why in escaping]
            clauses.append(f"the change adds a symlink out of the tree: {_names(shown)}")
        if replaced:
            shown = [c.describe() for c in replaced]
            clauses.append(
                f"the change replaces a symlink: {_names(shown)} "
                "(scope.allow_type_changes: true allows it)"
            )
        evidence = "; ".join(clauses)
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


def _repo(context: ValidationContext) -> Path:
    """Where the base is read from: the engine's repository of the base and the candidate."""
    return context.repo if context.repo is not None else context.worktree


def forbidden_by_rule(
    repo: Path, change: ChangeSet, homes: Sequence[str] = (ASSAY_HOME,)
) -> list[ForbiddenPath]:
    """The paths of the change no candidate may carry (:mod:`assay.core.forbidden`). Git is
    read only when the change leaves a gitlink, to ask whether the base has it there."""
    links = gitlinks_in(change.files)
    base_links = git_links.gitlinks_at(repo, change.base_commit, links) if links else set()
    return forbidden_paths(change.files, base_links, homes)


def allowed_type_changes(settings: Mapping[str, Any]) -> bool:
    """The contract's ``scope.allow_type_changes``; only a true boolean allows them."""
    return settings.get("allow_type_changes") is True


def replaced_links(change: ChangeSet) -> list[TypeChange]:
    """The symlinks the change replaces by something else (a regular copy, a folder)."""
    return [c for c in change.type_changes() if c.replaces_symlink]


def escaping_links(
    repo: Path | None, revision: str | None, change: ChangeSet
) -> list[tuple[str, str]]:
    """(path, why) of each symlink of the candidate (``revision`` in the engine-owned ``repo``)
    that resolves outside the tree because of the change. Git is read only when the change
    touches a symlink: links resolve through links, so a change without one leaves every
    link's destination as it was."""
    touched = {f.path for f in change.files if LINK_MODE in (f.old_mode, f.new_mode)} | {
        f.renamed_from for f in change.files if f.renamed_from and f.new_mode == LINK_MODE
    }
    if not touched:
        return []
    if repo is None or revision is None:
        raise ValueError("no candidate revision to read its symlinks from")
    links = git_links.symlinks_at(repo, revision)
    before = git_links.symlinks_at(repo, change.base_commit)
    escaping = []
    for path in sorted(links):
        why = escape_reason(path, links)
        if why is None:
            continue
        already = links[path] == before.get(path) and escape_reason(path, before) is not None
        if path in touched or not already:
            escaping.append((path, why))
    return escaping


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
