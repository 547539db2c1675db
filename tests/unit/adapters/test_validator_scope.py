"""The scope check: gitignore-style patterns over every touched path, renames included."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.repo import git
from support.seat_repo import candidate_change

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


def test_defaults_protect_github() -> None:
    outcome = _check(_change(_modified(".github/workflows/ci.yml")))
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH
    assert outcome.result.findings == ["inside scope.protect: .github/workflows/ci.yml"]
    assert _check(_change(_modified(".github/x")), protect=[]).result.severity is Severity.PASS


# --- symlinks, read from a real candidate ---------------------------------------------------


def _repo(tmp_path: Path, links: dict[str, str] | None = None) -> tuple[Path, str]:
    root = tmp_path / "seat"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    for path, target in (links or {}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).symlink_to(target)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root, git(root, "rev-parse", "HEAD")


def _candidate(root: Path, base: str, **settings: Any) -> ValidationOutcome:
    change, commit = candidate_change(root, base)
    context = ValidationContext(
        worktree=root,
        change=change,
        task="t",
        env={},
        settings=settings,
        log_dir=root / "logs",
        repo=root,
        revision=commit,
    )
    return ScopeValidator().validate(context)


def _link(root: Path, path: str, target: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    if (root / path).is_symlink() or (root / path).exists():
        (root / path).unlink()
    (root / path).symlink_to(target)


@pytest.mark.parametrize(
    ("links", "why"),
    [
        ({"leak": "/etc/passwd"}, "leak points to the absolute path /etc/passwd"),
        ({"up": "../../.."}, "up points to ../../.., outside the tree"),
        ({"src/deep/up": "../../../x"}, "src/deep/up points to ../../../x, outside the tree"),
        ({"d/parent": "..", "hop": "d/parent/.."}, "hop points to d/parent/.., outside the tree"),
    ],
)
def test_an_added_symlink_out_of_the_tree_is_a_breach(
    tmp_path: Path, links: dict[str, str], why: str
) -> None:
    root, base = _repo(tmp_path)
    for path, target in links.items():
        _link(root, path, target)
    outcome = _candidate(root, base)
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH and not outcome.result.error
    assert outcome.result.findings == [f"symlink out of the tree: {why}"]
    assert outcome.evidence == f"the change adds a symlink out of the tree: {why}"


def test_the_link_target_is_read_from_git_never_followed(tmp_path: Path) -> None:
    # The target exists on this machine and is a directory holding files: still a breach.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    root, base = _repo(tmp_path)
    _link(root, "src/x", "../../outside/secret")
    outcome = _candidate(root, base)
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH


def test_a_link_to_a_file_inside_the_tree_passes(tmp_path: Path) -> None:
    root, base = _repo(tmp_path)
    _link(root, "src/b.py", "a.py")
    _link(root, "docs/a", "../src/a.py")
    _link(root, "dangling", "src/nothing")
    outcome = _candidate(root, base)
    assert outcome.result.severity is Severity.PASS, outcome.result.findings


def test_changing_an_inside_link_to_point_out_is_a_breach(tmp_path: Path) -> None:
    root, base = _repo(tmp_path, {"src/b.py": "a.py"})
    _link(root, "src/b.py", "../../../../etc/shadow")
    assert _candidate(root, base).fire is CanonicalHalt.SCOPE_BREACH


def test_a_file_turned_into_a_link_out_is_a_breach(tmp_path: Path) -> None:
    root, base = _repo(tmp_path)
    _link(root, "src/a.py", "/etc/passwd")
    assert _candidate(root, base).fire is CanonicalHalt.SCOPE_BREACH


def test_an_untouched_link_that_newly_escapes_through_a_changed_one_is_a_breach(
    tmp_path: Path,
) -> None:
    # base: old -> via/x with via -> src (inside); the change re-points via to ..
    root, base = _repo(tmp_path, {"via": "src", "old": "via/a.py"})
    _link(root, "via", "..")
    outcome = _candidate(root, base)
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH
    assert {f.split(":")[1].split()[0] for f in outcome.result.findings} == {"via", "old"}


def test_a_link_already_out_of_the_tree_in_the_base_is_not_the_changes(tmp_path: Path) -> None:
    root, base = _repo(tmp_path, {"sys": "/usr/share"})
    _link(root, "src/b.py", "a.py")  # the change touches a link, so links are read
    assert _candidate(root, base).result.severity is Severity.PASS


def test_a_renamed_link_out_of_the_tree_is_the_changes(tmp_path: Path) -> None:
    root, base = _repo(tmp_path, {"sys": "/usr/share"})
    git(root, "mv", "sys", "src/sys")
    assert _candidate(root, base).fire is CanonicalHalt.SCOPE_BREACH


def test_an_unreadable_candidate_is_an_error_not_a_pass(tmp_path: Path) -> None:
    link = FileDelta(path="l", kind=FileChangeKind.CREATED, new_mode="120000")
    outcome = _check(_change(link))  # /nonexistent: git cannot read it
    assert outcome.result.error and outcome.result.severity is Severity.BLOCK


# --- type changes ---------------------------------------------------------------------------


def _sed(root: Path, *paths: str) -> None:
    """``sed -i`` as a bulk edit runs it: each link is replaced by an edited copy of its target."""
    subprocess.run(["sed", "-i", "s/1/2/", *paths], cwd=root, check=True)


def test_a_symlink_sed_replaced_by_a_copy_is_a_breach(tmp_path: Path) -> None:
    root, base = _repo(tmp_path, {"src/b.py": "a.py"})
    _sed(root, "src/a.py", "src/b.py")
    assert not (root / "src" / "b.py").is_symlink()
    outcome = _candidate(root, base)
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH and not outcome.result.error
    assert outcome.result.findings == ["symlink replaced: src/b.py symlink → file"]
    assert outcome.evidence == (
        "the change replaces a symlink: src/b.py symlink → file "
        "(scope.allow_type_changes: true allows it)"
    )


def test_allow_type_changes_lets_a_replaced_symlink_pass_and_says_so(tmp_path: Path) -> None:
    root, base = _repo(tmp_path, {"src/b.py": "a.py"})
    _sed(root, "src/b.py")
    outcome = _candidate(root, base, allow_type_changes=True)
    assert outcome.result.severity is Severity.PASS and outcome.fire is None
    assert outcome.result.justification == (
        "all 1 touched path(s) are in scope (type changes allowed: src/b.py symlink → file)"
    )
    # Only a true boolean allows them (the contract refuses anything else; a caller may not).
    assert _candidate(root, base, allow_type_changes="true").fire is CanonicalHalt.SCOPE_BREACH


def test_a_link_to_a_folder_replaced_by_a_copy_of_the_folder_is_a_breach(tmp_path: Path) -> None:
    root, base = _repo(tmp_path, {"lib": "src"})
    (root / "lib").unlink()
    shutil.copytree(root / "src", root / "lib")
    outcome = _candidate(root, base, allow=["**"])
    assert outcome.result.findings == ["symlink replaced: lib symlink → directory"]


def test_other_type_changes_are_not_a_breach(tmp_path: Path) -> None:
    root, base = _repo(tmp_path)
    (root / "src" / "a.py").chmod(0o755)
    (root / "src" / "c.py").write_text("y = 1\n")
    git(root, "add", "src/c.py")
    git(root, "commit", "-q", "-m", "c")
    base = git(root, "rev-parse", "HEAD")
    _link(root, "src/c.py", "a.py")  # a file made a link inside the tree
    outcome = _candidate(root, base)
    assert outcome.result.severity is Severity.PASS, outcome.result.findings
    assert [c.describe() for c in candidate_change(root, base)[0].type_changes()] == [
        "src/a.py file → executable",
        "src/c.py file → symlink",
    ]


# --- paths forbidden by rule, whatever the contract says --------------------------------------


@pytest.mark.parametrize(
    "path", [".assay/assay.db-journal", ".ASSAY/assay.db", "sub/.git/config", "a/.Git/hooks/x"]
)
def test_a_forbidden_path_is_a_breach_even_when_everything_is_allowed(path: str) -> None:
    added = FileDelta(path=path, kind=FileChangeKind.CREATED, new_mode="100644")
    outcome = _check(_change(_modified("src/a.py"), added), allow=["**"], protect=[])
    assert outcome.result.severity is Severity.BLOCK and not outcome.result.error
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH
    assert outcome.evidence is not None
    assert outcome.evidence.startswith(f"forbidden by rule: {path} (")
    assert len(outcome.result.findings) == 1
    assert outcome.result.findings[0].startswith(f"forbidden by rule: {path} (")
    assert "src/a.py" not in outcome.evidence


def _base_with_gitlink(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose base tree holds a gitlink at ``vendor/lib`` (a submodule entry)."""
    root, _ = _repo(tmp_path)
    pointer = git(root, "rev-parse", "HEAD")
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{pointer},vendor/lib")
    git(root, "commit", "-q", "-m", "a submodule")
    return root, git(root, "rev-parse", "HEAD")


def _gitlink(path: str, kind: FileChangeKind, old: str | None) -> FileDelta:
    return FileDelta(path=path, kind=kind, old_mode=old, new_mode="160000")


def _check_in(root: Path, base: str, *files: FileDelta) -> ValidationOutcome:
    context = ValidationContext(
        worktree=root,
        change=ChangeSet(base_commit=base, files=list(files)),
        task="t",
        env={},
        settings={"allow": ["**"], "protect": []},
        log_dir=root / "logs",
    )
    return ScopeValidator().validate(context)


def test_a_gitlink_the_base_has_is_fine_a_new_one_is_a_breach(tmp_path: Path) -> None:
    root, base = _base_with_gitlink(tmp_path)
    moved = _gitlink("vendor/lib", FileChangeKind.MODIFIED, "160000")
    assert _check_in(root, base, moved).result.severity is Severity.PASS
    nested = _gitlink("vendor/other", FileChangeKind.CREATED, None)
    outcome = _check_in(root, base, moved, nested)
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH
    assert outcome.result.findings == [
        "forbidden by rule: vendor/other (a nested repository (a gitlink) the base does not have)"
    ]


def test_a_nested_repository_in_the_candidate_is_a_breach(tmp_path: Path) -> None:
    root, base = _repo(tmp_path)
    sub = root / "src" / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "x").write_text("x\n")
    git(sub, "add", "x")
    git(sub, "-c", "user.name=c", "-c", "user.email=c@x", "commit", "-q", "-m", "x")
    outcome = _candidate(root, base, allow=["**"], protect=[])
    assert outcome.fire is CanonicalHalt.SCOPE_BREACH
    assert outcome.evidence is not None and "forbidden by rule: src/sub (" in outcome.evidence
