"""A candidate's change as read back from its worktree: the only authority on what was written."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from assay.core.vocab import EntryType, FileChangeKind

_MODE = re.compile(r"[0-7]{6}")
_KIND_BITS = 0o170000
_TYPE_OF_KIND = {
    0o040000: EntryType.DIRECTORY,
    0o120000: EntryType.SYMLINK,
    0o160000: EntryType.SUBMODULE,
}


def entry_type(mode: str | None) -> EntryType | None:
    """The entry type of a git mode (``"100644"``, ``"120000"``…); None for no entry
    (``None``, ``"000000"``) or text that is no mode git writes. A regular file is executable
    when its owner's execute bit is set, as git itself decides (``100755``, old ``100775``)."""
    if mode is None or not _MODE.fullmatch(mode):
        return None
    value = int(mode, 8)
    kind = value & _KIND_BITS
    if kind == 0o100000:
        return EntryType.EXECUTABLE if value & 0o100 else EntryType.FILE
    return _TYPE_OF_KIND.get(kind)


class TypeChange(BaseModel):
    """A path whose entry type the change alters: a symlink replaced by a copy of its target,
    a file made executable, a link to a folder replaced by a folder (``directory``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    path: str
    before: EntryType
    after: EntryType

    @property
    def replaces_symlink(self) -> bool:
        """A symlink became something else: what the link pointed at is now a second copy."""
        return self.before is EntryType.SYMLINK and self.after is not EntryType.SYMLINK

    def describe(self) -> str:
        return f"{self.path} {self.before.value} → {self.after.value}"


def type_change_note(changes: Sequence[TypeChange]) -> str:
    """The lines put before a diff a judge reads: a unified diff shows a type change only as a
    deleted and an added file (or an ``old mode`` line), easy to miss. Empty without any."""
    if not changes:
        return ""
    listed = "".join(f"- {change.describe()}\n" for change in changes)
    return f"Type changes (read from git's file modes):\n{listed}\n"


class FileDelta(BaseModel):
    """One path the change touches. A rename is a ``created`` path with ``renamed_from`` set
    (plus the old path as ``deleted``), so kinds stay within the closed vocabulary."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    path: str
    kind: FileChangeKind
    renamed_from: str | None = None
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    added_lines: int = 0
    removed_lines: int = 0

    @property
    def mode_changed(self) -> bool:
        return (
            self.old_mode is not None
            and self.new_mode is not None
            and self.old_mode != self.new_mode
        )


class ChangeSet(BaseModel):
    """Everything a candidate changed relative to the base commit."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    base_commit: str
    files: list[FileDelta] = Field(default_factory=list)
    diff: str = Field(default="", description="unified diff text (binary files summarised)")

    @property
    def paths(self) -> list[str]:
        return sorted({f.path for f in self.files})

    @property
    def empty(self) -> bool:
        return not self.files

    def type_changes(self) -> list[TypeChange]:
        """Every path whose entry type differs between the base and the candidate, by path.

        A path git reports with both modes (status ``T``, a mode flip; a rename compares its
        old path's mode) compares them. A path that became a folder, or stopped being one, has
        no mode of its own: git reports the old entry deleted and entries created below it (or
        the reverse), read here as a change to or from ``directory``.
        """
        found: dict[str, TypeChange] = {}
        deleted: dict[str, EntryType] = {}
        created: dict[str, EntryType] = {}
        for delta in self.files:
            before, after = entry_type(delta.old_mode), entry_type(delta.new_mode)
            if delta.kind is FileChangeKind.DELETED:
                if before is not None:
                    deleted[delta.path] = before
                continue
            if delta.kind is FileChangeKind.CREATED and after is not None:
                created[delta.path] = after
            if before is not None and after is not None and before is not after:
                found[delta.path] = TypeChange(path=delta.path, before=before, after=after)
        folders_after, folders_before = _folders(created), _folders(deleted)
        for path, before in deleted.items():
            after = EntryType.DIRECTORY if path in folders_after else created.get(path)
            if after is not None and after is not before and path not in found:
                found[path] = TypeChange(path=path, before=before, after=after)
        for path, after in created.items():
            if path in folders_before and path not in found:
                found[path] = TypeChange(path=path, before=EntryType.DIRECTORY, after=after)
        return [found[path] for path in sorted(found)]

    def added_text(self) -> str:
        """The added lines of the diff (without the leading '+'), for secret scanning."""
        lines = []
        for line in self.diff.splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                lines.append(line[1:])
        return "\n".join(lines)


def _folders(paths: dict[str, EntryType]) -> set[str]:
    """Every folder holding one of ``paths`` (``a/b/c`` gives ``a`` and ``a/b``)."""
    folders: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(len(parts), 0, -1):
            folder = "/".join(parts[:depth])
            if folder in folders:
                break
            folders.add(folder)
    return folders
