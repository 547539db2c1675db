"""The search attributes that let a run's workflow be found in Temporal's UI and in
``temporal workflow list --query``: its task, its repository and its status, all Keyword.

``submit`` sets the task, the repository (when known) and ``queued`` at the start; the workflow
upserts the status as its run moves (``running``, then the task's status at its end). A
namespace must have them registered: ``assay dev-server`` registers them; a cluster where
they are not is told once how (:func:`unregistered_warning`) and its workflows start without
them (the workflow then upserts nothing: it knows by its start's attributes).
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

TASK_ID = SearchAttributeKey.for_keyword("AssayTaskId")
REPOSITORY = SearchAttributeKey.for_keyword("AssayRepository")
STATUS = SearchAttributeKey.for_keyword("AssayStatus")
KEYS = (TASK_ID, REPOSITORY, STATUS)
KIND = "Keyword"

QUEUED = "queued"  # submitted, no run open yet
RUNNING = "running"
NOT_RUNNABLE = "not_runnable"  # open found the task held, done or claimed: no run
# The workflow's status upserts: new commands, so a history recorded before them replays
# without them (workflow.patched).
STATUS_PATCH = "assay-status-search-attribute"


def at_start(task_id: str, repository: str | None = None) -> TypedSearchAttributes:
    """The attributes a workflow starts with: its task, its repository, ``queued``."""
    pairs: list[SearchAttributePair[str]] = [
        SearchAttributePair(TASK_ID, task_id),
        SearchAttributePair(STATUS, QUEUED),
    ]
    if repository:
        pairs.insert(1, SearchAttributePair(REPOSITORY, repository))
    return TypedSearchAttributes(pairs)


def dev_server_flags() -> list[str]:
    """``temporal server start-dev`` flags that register them in the namespaces it creates
    (a state made before them is not changed: :func:`create_flags` then)."""
    flags: list[str] = []
    for key in KEYS:
        flags += ["--search-attribute", f"{key.name}={KIND}"]
    return flags


def create_flags(names: list[str] | None = None) -> list[str]:
    """``temporal operator search-attribute create`` flags for ``names`` (default: all): a
    ``--type`` after each ``--name``, as that command pairs them."""
    flags: list[str] = []
    for name in names if names is not None else [key.name for key in KEYS]:
        flags += ["--name", name, "--type", KIND]
    return flags


def unregistered_warning(namespace: str, missing: list[str]) -> str:
    """What an operator is told once when the namespace lacks some of them."""
    flags = " ".join(create_flags(missing))
    return (
        f"the Temporal namespace {namespace!r} has no search attribute {', '.join(missing)}: "
        "the runs' workflows start without them (not found by task, repository or status in "
        "Temporal's UI); register them with `temporal operator search-attribute create "
        f"--namespace {namespace} {flags}`"
    )
