"""Where a task belongs: the repository it was queued in (its id, :mod:`assay.adapters.
repo_identity`) and the branch it targets; and the refusal of a command that would run a task
of another repository here (exit 2, nothing changed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from assay.cli.workspace import EXIT_USAGE, fail

if TYPE_CHECKING:
    from assay.core.tasks import Task


def placement(repo: Path) -> tuple[str | None, str | None]:
    """(the repository id, the branch checked out) of ``repo``: what a task queued there
    records."""
    from assay.adapters.repo_identity import current_target_branch, repository_id

    return repository_id(repo), current_target_branch(repo)


def elsewhere_message(task: Task, here: str | None) -> str:
    """Why ``task`` does not run in the repository ``here``."""
    shown_here = here if here is not None else "a repository with no id"
    return (
        f"task {task.id} belongs to the repository {task.repository}, not to this one "
        f"({shown_here}): run it from a clone of {task.repository} (a worker there runs it); "
        "nothing was changed"
    )


def refuse_other_repository(task: Task, repo: Path) -> None:
    """Exit 2, the task untouched, when ``task`` is another repository's than ``repo``'s."""
    if task.repository is None:  # queued before tasks kept it: it runs anywhere
        return
    from assay.adapters.repo_identity import repository_id

    here = repository_id(repo)
    if task.belongs_elsewhere(here):
        fail(elsewhere_message(task, here), EXIT_USAGE)
