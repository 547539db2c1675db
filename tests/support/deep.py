"""Trees deeper than a recursive walk can go, for the tests of what assay does with them.

pytest removes old temporary folders with ``shutil.rmtree``, which is recursive in Python
3.11: a tree 1,100 deep left in one crashes every later session's clean-up. So every test
that makes one removes it itself (:func:`remove_deep`, GNU ``rm``, which has no depth limit),
whatever the test's outcome.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def deep_tree(root: Path, depth: int, *, name: str = "d", every: int = 100) -> None:
    """``root/d/d/…`` ``depth`` folders deep, a file every ``every`` levels and at the bottom;
    made relative to an open folder, so no path is ever longer than one name."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
            if level % every == 0 or level == depth - 1:
                os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)


def remove_deep(path: Path) -> None:
    """Remove ``path`` whatever its depth (read-only folders, immutable files included)."""
    if not os.path.lexists(path):
        return
    subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True, check=False)
    subprocess.run(["chmod", "-R", "u+rwx", str(path)], capture_output=True, check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)
