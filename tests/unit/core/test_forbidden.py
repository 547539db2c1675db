"""Paths no candidate may carry: `.assay/`, anything named `.git`, a gitlink the base lacks."""

from __future__ import annotations

import pytest

from assay.core.changes import FileDelta
from assay.core.forbidden import (
    ForbiddenPath,
    ForbiddenRule,
    forbidden_paths,
    gitlinks_in,
    is_assay_home,
    names_git_dir,
)
from assay.core.vocab import FileChangeKind

GITLINK = "160000"


def _added(path: str, mode: str = "100644", renamed_from: str | None = None) -> FileDelta:
    return FileDelta(
        path=path, kind=FileChangeKind.CREATED, new_mode=mode, renamed_from=renamed_from
    )


def _rules(*files: FileDelta, base_gitlinks: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    return [(f.path, f.rule.value) for f in forbidden_paths(files, base_gitlinks)]


@pytest.mark.parametrize(
    "path",
    [
        ".assay",
        ".assay/assay.db-journal",
        ".assay/runs/x/payload.json",
        ".ASSAY/assay.db",
        ".Assay/x",
        ".assay./x",
        ".assay /x",
    ],
)
def test_anything_in_assays_own_folder_is_forbidden(path: str) -> None:
    assert is_assay_home(path)
    assert _rules(_added(path)) == [(path, "assay-home")]


@pytest.mark.parametrize("path", ["src/.assay/x", ".assayx/y", "assay/x", "x.assay", "a/.assay"])
def test_assay_elsewhere_is_an_ordinary_name(path: str) -> None:
    assert not is_assay_home(path)
    assert _rules(_added(path)) == []


@pytest.mark.parametrize(
    "path",
    [
        ".git",
        ".git/config",
        "sub/.git/hooks/pre-commit",
        "a/b/c/.git",
        ".GIT/config",
        "x/.Git/HEAD",
        "y/.git./config",
        "y/.git  /config",
        ".g\u200cit/config",
        ".\ufeffgit",
    ],
)
def test_a_component_named_git_at_any_depth_in_any_case_is_forbidden(path: str) -> None:
    assert names_git_dir(path)
    assert _rules(_added(path)) == [(path, "git-dir")]


@pytest.mark.parametrize(
    "path",
    [
        ".gitignore",
        ".github/workflows/ci.yml",
        "git/x",
        "a.git/b",
        ".gitmodules",
        "..git",
        "x/.git-blame-ignore-revs",
    ],
)
def test_names_that_only_look_like_git_are_fine(path: str) -> None:
    assert not names_git_dir(path)
    assert _rules(_added(path)) == []


def test_a_deleted_or_renamed_away_path_counts_too() -> None:
    gone = FileDelta(path=".assay/ledger.yaml", kind=FileChangeKind.DELETED, old_mode="100644")
    moved = _added("notes.txt", renamed_from="sub/.GIT/config")
    assert _rules(gone, moved) == [
        (".assay/ledger.yaml", "assay-home"),
        ("sub/.GIT/config", "git-dir"),
    ]


def test_a_new_gitlink_is_forbidden_one_the_base_has_is_not() -> None:
    nested = _added("vendor/lib", GITLINK)
    moved_pointer = FileDelta(
        path="third/party", kind=FileChangeKind.MODIFIED, old_mode=GITLINK, new_mode=GITLINK
    )
    assert gitlinks_in([nested, moved_pointer, _added("a.txt")]) == ["third/party", "vendor/lib"]
    assert _rules(nested, moved_pointer, base_gitlinks=frozenset({"third/party"})) == [
        ("vendor/lib", "gitlink")
    ]
    # A file the base had, made a nested repository: the base has no gitlink there.
    made = FileDelta(
        path="a.txt", kind=FileChangeKind.MODIFIED, old_mode="100644", new_mode=GITLINK
    )
    assert _rules(made) == [("a.txt", "gitlink")]
    # A gitlink removed is the base's going away, not a nested repository added.
    removed = FileDelta(path="third/party", kind=FileChangeKind.DELETED, old_mode=GITLINK)
    assert _rules(removed, base_gitlinks=frozenset({"third/party"})) == []


def test_each_path_breaking_two_rules_is_named_for_each() -> None:
    found = forbidden_paths([_added(".assay/.git", GITLINK)], frozenset())
    assert [f.rule for f in found] == [
        ForbiddenRule.ASSAY_HOME,
        ForbiddenRule.GIT_DIR,
        ForbiddenRule.GITLINK,
    ]
    assert found[0] == ForbiddenPath(".assay/.git", ForbiddenRule.ASSAY_HOME)
    assert found[0].describe() == ".assay/.git (assay's own folder .assay/, where the ledger lives)"
