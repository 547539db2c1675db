"""Type changes read from a ChangeSet: git's modes as entry types, a symlink replaced by a copy,
a flipped executable bit, a path that became a folder; the parser of modes never raises and
agrees with git's own rule, and the type changes found equal those of the two trees."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.core.changes import ChangeSet, FileDelta, TypeChange, entry_type, type_change_note
from assay.core.vocab import EntryType, FileChangeKind

FILE, EXE, LINK, SUB = "100644", "100755", "120000", "160000"
MODES = {
    FILE: EntryType.FILE,
    EXE: EntryType.EXECUTABLE,
    LINK: EntryType.SYMLINK,
    SUB: EntryType.SUBMODULE,
}


def delta(path: str, kind: FileChangeKind, old: str | None, new: str | None) -> FileDelta:
    return FileDelta(path=path, kind=kind, old_mode=old, new_mode=new)


def changes(*files: FileDelta) -> ChangeSet:
    return ChangeSet(base_commit="b" * 40, files=list(files))


def test_git_modes_are_entry_types() -> None:
    assert {mode: entry_type(mode) for mode in MODES} == MODES
    assert entry_type("040000") is EntryType.DIRECTORY
    assert entry_type("100664") is EntryType.FILE  # an old group-writable file mode
    assert entry_type("100775") is EntryType.EXECUTABLE
    for nothing in (None, "000000", "", "644", "1006440", "10064a", "020000", "+10644"):
        assert entry_type(nothing) is None, nothing


def test_a_symlink_replaced_by_a_copy_of_its_target_is_a_type_change() -> None:
    change = changes(delta("lib/x.py", FileChangeKind.MODIFIED, LINK, FILE))
    assert change.type_changes() == [
        TypeChange(path="lib/x.py", before=EntryType.SYMLINK, after=EntryType.FILE)
    ]
    (found,) = change.type_changes()
    assert found.replaces_symlink
    assert found.describe() == "lib/x.py symlink → file"


def test_an_executable_bit_both_ways_and_a_file_made_a_link() -> None:
    change = changes(
        delta("run.sh", FileChangeKind.MODIFIED, FILE, EXE),
        delta("bin/tool", FileChangeKind.MODIFIED, EXE, FILE),
        delta("alias", FileChangeKind.MODIFIED, FILE, LINK),
        delta("vendor/lib", FileChangeKind.MODIFIED, SUB, FILE),
    )
    found = {c.path: (c.before, c.after) for c in change.type_changes()}
    assert found == {
        "run.sh": (EntryType.FILE, EntryType.EXECUTABLE),
        "bin/tool": (EntryType.EXECUTABLE, EntryType.FILE),
        "alias": (EntryType.FILE, EntryType.SYMLINK),
        "vendor/lib": (EntryType.SUBMODULE, EntryType.FILE),
    }
    assert [c.path for c in change.type_changes()] == sorted(found)
    assert not any(c.replaces_symlink for c in change.type_changes())


def test_edits_creations_and_deletions_are_no_type_change() -> None:
    change = changes(
        delta("a.py", FileChangeKind.MODIFIED, FILE, FILE),
        delta("link", FileChangeKind.MODIFIED, LINK, LINK),  # a link retargeted
        delta("new.py", FileChangeKind.CREATED, None, FILE),
        delta("gone", FileChangeKind.DELETED, LINK, None),
        delta("pkg/a.py", FileChangeKind.CREATED, None, FILE),  # pkg/ never was anything else
    )
    assert change.type_changes() == []


def test_a_link_to_a_folder_replaced_by_a_copy_of_the_folder() -> None:
    change = changes(
        delta("pkglink", FileChangeKind.DELETED, LINK, None),
        delta("pkglink/a.py", FileChangeKind.CREATED, None, FILE),
        delta("pkglink/sub/b.py", FileChangeKind.CREATED, None, FILE),
    )
    assert change.type_changes() == [
        TypeChange(path="pkglink", before=EntryType.SYMLINK, after=EntryType.DIRECTORY)
    ]
    assert change.type_changes()[0].replaces_symlink


def test_a_folder_replaced_by_a_link_or_a_file() -> None:
    change = changes(
        delta("pkg", FileChangeKind.CREATED, None, LINK),
        delta("pkg/a.py", FileChangeKind.DELETED, FILE, None),
        delta("docs", FileChangeKind.CREATED, None, FILE),
        delta("docs/x/y.md", FileChangeKind.DELETED, FILE, None),
    )
    assert [(c.path, c.before, c.after) for c in change.type_changes()] == [
        ("docs", EntryType.DIRECTORY, EntryType.FILE),
        ("pkg", EntryType.DIRECTORY, EntryType.SYMLINK),
    ]


def test_a_renamed_path_compares_its_old_mode() -> None:
    change = changes(
        FileDelta(
            path="b.sh",
            kind=FileChangeKind.CREATED,
            renamed_from="a.sh",
            old_mode=FILE,
            new_mode=EXE,
        ),
        delta("a.sh", FileChangeKind.DELETED, FILE, None),
    )
    assert [c.describe() for c in change.type_changes()] == ["b.sh file → executable"]


def test_the_judges_note_lists_each_type_change_and_is_empty_without_any() -> None:
    assert type_change_note([]) == ""
    note = type_change_note(
        [
            TypeChange(path="lib/x.py", before=EntryType.SYMLINK, after=EntryType.FILE),
            TypeChange(path="run.sh", before=EntryType.FILE, after=EntryType.EXECUTABLE),
        ]
    )
    assert note.rstrip("\n").splitlines() == [
        "Type changes (read from git's file modes):",
        "- lib/x.py symlink → file",
        "- run.sh file → executable",
    ]
    assert note.endswith("\n\n")  # the diff that follows stays apart


# --- properties ------------------------------------------------------------------------------


@given(st.text(max_size=12))
def test_entry_type_of_any_text_is_a_type_or_none(text: str) -> None:
    assert entry_type(text) is None or isinstance(entry_type(text), EntryType)


@given(st.integers(min_value=0, max_value=0o777777))
def test_entry_type_follows_the_mode_bits(value: int) -> None:
    mode = f"{value:06o}"
    kind, found = value & 0o170000, entry_type(mode)
    if kind == 0o100000:
        assert found is (EntryType.EXECUTABLE if value & 0o100 else EntryType.FILE)
    elif kind in (0o040000, 0o120000, 0o160000):
        assert found is {0o040000: EntryType.DIRECTORY, 0o120000: EntryType.SYMLINK}.get(
            kind, EntryType.SUBMODULE
        )
    else:
        assert found is None


NAMES = st.sampled_from(["a", "b", "c"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map("/".join)


def _tree(entries: dict[str, str]) -> dict[str, str]:
    """A well-formed tree: no path is both an entry and a folder of another entry."""
    paths = sorted(entries, key=len)
    kept: dict[str, str] = {}
    for path in paths:
        parts = path.split("/")
        if any("/".join(parts[:n]) in kept for n in range(1, len(parts))):
            continue
        kept[path] = entries[path]
    return kept


TREES = st.dictionaries(PATHS, st.sampled_from(list(MODES)), max_size=6).map(_tree)


def _git_diff(base: dict[str, str], after: dict[str, str]) -> ChangeSet:
    """What ``git diff --raw`` (no rename detection) reports between two trees."""
    files = []
    for path in sorted(set(base) | set(after)):
        old, new = base.get(path), after.get(path)
        if old == new:
            continue  # contents are not modelled: an unchanged mode may still be an edit
        if old is None:
            files.append(delta(path, FileChangeKind.CREATED, None, new))
        elif new is None:
            files.append(delta(path, FileChangeKind.DELETED, old, None))
        else:
            files.append(delta(path, FileChangeKind.MODIFIED, old, new))
    return changes(*files)


def _types(tree: dict[str, str]) -> dict[str, EntryType]:
    found = {path: MODES[mode] for path, mode in tree.items()}
    for path in tree:
        parts = path.split("/")
        for n in range(1, len(parts)):
            found["/".join(parts[:n])] = EntryType.DIRECTORY
    return found


@settings(max_examples=300)
@given(TREES, TREES)
def test_the_type_changes_found_are_exactly_those_of_the_two_trees(
    base: dict[str, str], after: dict[str, str]
) -> None:
    before_types, after_types = _types(base), _types(after)
    expected = {
        path: (before_types[path], after_types[path])
        for path in set(before_types) & set(after_types)
        if before_types[path] is not after_types[path]
    }
    found = _git_diff(base, after).type_changes()
    assert {c.path: (c.before, c.after) for c in found} == expected
    assert [c.path for c in found] == sorted(expected)
