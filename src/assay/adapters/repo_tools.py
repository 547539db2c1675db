"""The PATH a command validator runs with: the repository's own tools first, assay's last.

A validator checks the project with the project's tools: ``python3 -m pytest`` must be the
project's Python (its virtualenv, with its dependencies), never the Python assay itself runs
on. The rule (the README's "Validators"):

1. the repository's tool folders that exist, in the order of :data:`REPO_TOOL_FOLDERS`, each
   resolved (a ``.venv`` that links to a virtualenv elsewhere counts, and the path is the one
   a sandbox shows);
2. then the PATH the validator would have had (the operator's, or the contract's ``env:
   PATH``), in its order;
3. except the ``bin`` folder of the virtualenv assay runs from, which goes last when it was
   there (an activated assay virtualenv): it is never added, and never ahead of another tool.
   When it is also one of the repository's folders (assay installed in the project's
   ``.venv``), rule 1 puts it first.

A command validator runs in a fresh checkout, where no ``.venv`` is (it is not in git): the
folders are the user's repository's. The sandbox hides that repository, so
:func:`repo_tool_roots` names what a validator's sandbox shows of it, read-only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from assay.adapters.assay_exe import assay_venv_bins

# The repository's own tool folders, first on a validator's PATH in this order: a virtualenv
# (``python -m venv .venv`` as uv, poetry's in-project setting and most guides name it, or
# ``venv``) and npm's local binaries.
REPO_TOOL_FOLDERS: tuple[str, ...] = (".venv/bin", "venv/bin", "node_modules/.bin")


def repo_tool_folders(repo: Path) -> list[Path]:
    """The folders of :data:`REPO_TOOL_FOLDERS` that exist in ``repo``, resolved."""
    found: list[Path] = []
    for name in REPO_TOOL_FOLDERS:
        folder = repo / name
        try:
            if folder.is_dir():
                found.append(folder.resolve())
        except OSError:  # unreadable, a link loop: not a folder of tools
            continue
    return list(dict.fromkeys(found))


def repo_tool_roots(repo: Path) -> list[Path]:
    """What a sandbox must show for the repository's tool folders to work: each virtualenv
    whole (its ``bin`` runs its ``lib``), ``node_modules`` whole (``.bin`` holds links into
    it)."""
    return list(dict.fromkeys(folder.parent for folder in repo_tool_folders(repo)))


def validator_path(path: str, repo: Path, assay_folders: Sequence[Path] | None = None) -> str:
    """``path`` with the repository's tool folders first and assay's virtualenv last (the
    module's rule); ``assay_folders`` default to :func:`assay_venv_bins`."""
    own = [str(p) for p in (assay_venv_bins() if assay_folders is None else assay_folders)]
    first = [str(folder) for folder in repo_tool_folders(repo)]
    rest: list[str] = []
    last: list[str] = []
    for entry in path.split(os.pathsep):
        if not entry:
            continue
        real = os.path.realpath(entry) if os.path.isabs(entry) else entry
        if entry in first or real in first:
            continue
        (last if real in own else rest).append(entry)
    return os.pathsep.join(dict.fromkeys([*first, *rest, *last]))


def with_repo_tools(
    env: Mapping[str, str], repo: Path, assay_folders: Sequence[Path] | None = None
) -> dict[str, str]:
    """``env`` with its PATH made by :func:`validator_path`."""
    out = dict(env)
    out["PATH"] = validator_path(out.get("PATH", os.defpath), repo, assay_folders)
    return out
