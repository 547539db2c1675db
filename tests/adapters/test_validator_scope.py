"""The scope check: gitignore-style patterns over every touched path, renames included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.adapters.validators import get_validator
from assay.adapters.validators.base import ValidationContext, ValidationOutcome
from assay.adapters.validators.scope import ScopeValidator
from assay.core.changes import ChangeSet, FileDelta
from assay.core.vocab import CanonicalHalt, FileChangeKind, Severity

ALLOW = ["src/**", "tests/**"]
PROTECT = [".github/**", "src/vendored/**"]


def _change(*files: FileDelta) -> ChangeSet:
    return ChangeSet(base_commit="0" * 40, files=list(files))


def _modified(path: str) -> FileDelta:
    return FileDelta(path=path, kind=FileChangeKind.MODIFIED)


def _check(change: ChangeSet, **settings: Any) -> ValidationOutcome:
    context = ValidationContext(
        worktree=Path("/nonexistent"),
        change=change,
        task="t",
        env={},
        settings=settings,
        log_dir=Path("/nonexistent/logs"),
    )
    return ScopeValidator().validate(context)


def test_paths_inside_allow_pass() -> None:
    outcome = _check(
        _change(_modified("src/slug.py"), _modified("tests/test_slug.py")),
        allow=ALLOW,
        protect=PROTECT,
    )
    assert outcome.result.severity is Severity.PASS
    assert outcome.fire is None and outcome.evidence is None


def test_a_path_outside_allow_blocks_and_fires_scope_breach() -> None:
    outcome = _check(_change(_modified("src/slug.py"), _modified("setup.cfg")), allow=ALLOW)
    assert outcome.result.severity is Severity.BLOCK and not outcome.result.error
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH
    assert outcome.evidence is not None and "setup.cfg" in outcome.evidence
    assert "src/slug.py" not in outcome.evidence
    assert outcome.result.findings == ["outside scope.allow: setup.cfg"]


def test_a_protected_path_blocks_even_when_allowed() -> None:
    outcome = _check(_change(_modified("src/vendored/lib.py")), allow=ALLOW, protect=PROTECT)
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH
    assert outcome.result.findings == ["inside scope.protect: src/vendored/lib.py"]


def test_the_old_path_of_a_rename_counts() -> None:
    moved = FileDelta(
        path="src/ci.yml", kind=FileChangeKind.CREATED, renamed_from=".github/workflows/ci.yml"
    )
    outcome = _check(_change(moved), allow=["**"], protect=PROTECT)
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH
    assert outcome.evidence is not None and ".github/workflows/ci.yml" in outcome.evidence


def test_deleting_a_protected_file_is_touching_it() -> None:
    gone = FileDelta(path=".github/CODEOWNERS", kind=FileChangeKind.DELETED)
    assert _check(_change(gone), protect=PROTECT).fire is CanonicalHalt.SCOPE_BREACH


def test_defaults_allow_everything() -> None:
    outcome = _check(_change(_modified("anything/at/all.txt"), _modified(".hidden")))
    assert outcome.result.severity is Severity.PASS


def test_gitignore_semantics_negation_and_basename_patterns() -> None:
    allow = ["src/**", "*.md", "!src/generated/**"]
    ok = _check(_change(_modified("docs/guide/intro.md"), _modified("src/a/b.py")), allow=allow)
    assert ok.result.severity is Severity.PASS
    bad = _check(_change(_modified("src/generated/x.py")), allow=allow)
    assert bad.result.findings == ["outside scope.allow: src/generated/x.py"]


def test_an_empty_change_passes() -> None:
    assert _check(_change(), allow=["src/**"]).result.severity is Severity.PASS


def test_evidence_names_every_offending_path_both_ways() -> None:
    outcome = _check(
        _change(_modified("README"), _modified("Makefile"), _modified(".github/x.yml")),
        allow=["src/**", ".github/**"],
        protect=[".github/**"],
    )
    assert outcome.evidence == (
        "the change touches paths outside scope.allow: Makefile, README; "
        "inside scope.protect: .github/x.yml"
    )


def test_malformed_settings_are_an_error_not_a_pass() -> None:
    outcome = _check(_change(_modified("src/a.py")), allow=42)
    assert outcome.result.error and outcome.fire is None


def test_registry_returns_the_scope_validator() -> None:
    assert isinstance(get_validator("scope"), ScopeValidator)
