"""Where a symlink of a tree points, worked out from the tree's own links, never the host's.

A tree is described by its symlinks only: ``{path: target}`` as git stores them (the blob of a
mode 120000 entry). Resolution follows the kernel's rules (a component that is a link is
replaced by its target, relative to the link's folder; ``..`` applies to what a link resolved
to, not to the text), so ``sub/here/..`` where ``sub/here -> ..`` is the tree's parent. Nothing
on the machine is looked at: a link to ``/etc/passwd`` is judged by its text.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

# The kernel gives up after 40 links in one lookup (ELOOP); so does this.
MAX_HOPS = 40
GIT_DIR = ".git"


def escape_reason(path: str, links: Mapping[str, str]) -> str | None:
    """Why the link at ``path`` resolves outside the tree (or into a ``.git`` folder), or None.

    ``links`` holds every symlink of the tree, ``path`` among them. A link that names a path
    that does not exist inside the tree is dangling, not an escape. A loop is reported: it
    cannot be resolved, and nobody should have to trust one.
    """
    target = links[path]
    if target.startswith("/"):
        return f"points to the absolute path {target}"
    resolved: list[str] = path.split("/")[:-1]
    pending: deque[str] = deque(target.split("/"))
    hops = 0
    while pending:
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return f"points to {target}, outside the tree"
            resolved.pop()
            continue
        if part.lower() == GIT_DIR:
            return f"points to {target}, inside a .git folder"
        here = "/".join([*resolved, part])
        inner = links.get(here)
        if inner is None:
            resolved.append(part)
            continue
        hops += 1
        if hops > MAX_HOPS:
            return f"points to {target}, through too many links (a loop)"
        if inner.startswith("/"):
            return f"points to {target}, through {here} -> {inner}, outside the tree"
        pending.extendleft(reversed(inner.split("/")))
    return None
