"""The environment variables that point git at another repository than the one named with
``-C``, in a module that imports nothing: the git adapter and the task commands' quick path
(which must not import the adapter) strip the same ones, so both find the same repository."""

from __future__ import annotations

LOCATION_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
)
