"""The worker's build id: a hash of the source the workflow's determinism depends on.

Temporal records the build id of the worker that completed each workflow task, so an
operator can tell which code a workflow ran on and whether workers of two codes serve one
queue mid-upgrade. The id covers the workflow module and every module of the package it
imports, transitively (the graph, the effect boundary, the pure core they decide with); a
change anywhere else (an activity, the CLI, an adapter) leaves it as it was. No worker
versioning rule is asked for: a cluster without them serves every build alike.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]  # the ``assay`` folder
WORKFLOW_MODULE = "assay.engine.temporal.workflow"
PREFIX = "assay-"
DIGITS = 16


def build_id(package: Path = PACKAGE, root: str = WORKFLOW_MODULE) -> str:
    """``assay-`` and the first hex digits of the SHA-256 of those modules' paths and bytes."""
    digest = hashlib.sha256()
    for path in workflow_sources(package, root):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return PREFIX + digest.hexdigest()[:DIGITS]


def workflow_sources(package: Path = PACKAGE, root: str = WORKFLOW_MODULE) -> list[Path]:
    """The files of ``root`` and of every module of the package it imports, transitively
    (any import in the file: one under TYPE_CHECKING or in a function may run too)."""
    top = root.split(".", 1)[0]
    found: dict[str, Path] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = _module_file(package, top, name)
        if path is None:  # a name inside a module (``from m import Name``), or not ours
            continue
        found[name] = path
        todo.extend(_imported(path, name, top))
    return sorted(found.values())


def _module_file(package: Path, top: str, name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] != top:
        return None
    base = package.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path: Path, name: str, top: str) -> list[str]:
    """The module names ``path`` imports: each ``from m import a`` gives ``m`` and ``m.a``
    (``a`` may be a submodule); relative imports resolved against ``name``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*anchor, source] if source else anchor)
            names.append(source)
            names.extend(f"{source}.{alias.name}" for alias in node.names)
    return [n for n in names if n == top or n.startswith(f"{top}.")]
