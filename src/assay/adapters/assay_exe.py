"""Where the running ``assay`` lives, so a coder can call it back (``assay halt check …``).

The brief tells every agent to fire halts with ``assay halt check``. That works only if the
``assay`` that runs the dispatch is on the coder's PATH, and an operator who started
``.venv/bin/assay`` by its path has no such folder on PATH. So the folder of the running entry
point is put first on the coder's PATH: the same program, the same version, the same ledger.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

ENTRY_POINT = "assay"


def assay_bin_dir(argv0: str | None = None, executable: str | None = None) -> Path | None:
    """The folder holding the running ``assay`` script, or None when there is none.

    The entry point (``sys.argv[0]``) when it is an ``assay`` script; otherwise (``python -m``,
    a test runner driving the engine in-process) the ``bin`` folder of the interpreter's
    environment when an ``assay`` script is there. ``sys.executable`` is not resolved: in a
    venv it is ``.venv/bin/python``, a link to the base interpreter whose folder has no assay.
    """
    first = Path(sys.argv[0] if argv0 is None else argv0)
    if first.name == ENTRY_POINT:
        for candidate in (first.resolve(), first.absolute()):
            if _executable(candidate):
                return candidate.parent
    interpreter = executable if executable is not None else sys.executable
    if interpreter:
        beside = Path(interpreter).absolute().with_name(ENTRY_POINT)
        if _executable(beside):
            return beside.parent
    return None


def assay_venv_bins(
    argv0: str | None = None,
    executable: str | None = None,
    prefix: str | None = None,
    base_prefix: str | None = None,
) -> list[Path]:
    """The ``bin`` folders of the virtualenv assay runs from (its entry point's, its
    interpreter's), resolved; none when assay is not installed in a virtualenv (its folder is
    then shared with other tools: ``/usr/local/bin``, ``~/.local/bin``). A validator's PATH
    puts them last (:mod:`assay.adapters.repo_tools`): assay's own Python is not the project's.
    """
    candidates = [assay_bin_dir(argv0, executable)]
    inside = sys.prefix if prefix is None else prefix
    if inside != (sys.base_prefix if base_prefix is None else base_prefix):
        candidates.append(Path(inside) / "bin")
    found: list[Path] = []
    for folder in candidates:
        if folder is not None and (folder.parent / "pyvenv.cfg").is_file():
            found.append(folder.resolve())
    return list(dict.fromkeys(found))


def with_assay_on_path(env: Mapping[str, str], folder: Path | None = None) -> dict[str, str]:
    """``env`` with the running assay's folder first on PATH (unchanged when none is found)."""
    found = folder if folder is not None else assay_bin_dir()
    out = dict(env)
    if found is None:
        return out
    entries = [p for p in out.get("PATH", "").split(os.pathsep) if p]
    first = str(found)
    out["PATH"] = os.pathsep.join([first, *(p for p in entries if p != first)])
    return out


def _executable(path: Path) -> bool:
    try:
        return path.is_file() and os.access(path, os.X_OK)
    except OSError:
        return False
