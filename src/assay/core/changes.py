"""A candidate's change as read back from its worktree: the only authority on what was written."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from assay.core.vocab import FileChangeKind


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

    def added_text(self) -> str:
        """The added lines of the diff (without the leading '+'), for secret scanning."""
        lines = []
        for line in self.diff.splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                lines.append(line[1:])
        return "\n".join(lines)
