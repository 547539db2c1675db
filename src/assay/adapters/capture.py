"""The host's side of a capture: run the collector in the seat's sandbox, read what it left.

The collector (:mod:`assay.adapters.collector`) runs after every process of the coder has
ended, as a script with the interpreter isolated (``-I -S``: no ``PYTHON*`` variable, no
site folder, no ``usercustomize`` of the seat's home, nothing of the seat on ``sys.path``).
It writes only ``out_dir``, a folder the host makes fresh for it. Its manifest is then read
without following links and with a size limit, and every field is checked: the collector is
assay's own, but what it read was the coder's. A timeout or a crash is a :class:`Capture`
with ``error``, never an exception (only a machine fault, such as bwrap missing, is raised:
:class:`~assay.adapters.process.EnvironmentFault`).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.adapters import collector
from assay.adapters.process import run_process
from assay.adapters.report_file import read_report_file
from assay.adapters.sandbox_spec import SandboxSpec
from assay.adapters.seats import remove_tree

MiB = 1024 * 1024
CAPTURE_TIMEOUT_SECONDS = 600.0
_TAIL_CHARS = 1000
_MAX_COUNT = 10**12
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class CaptureLimits:
    """A candidate's budgets, checked inside the sandbox before anything is hashed."""

    max_files: int = 20_000  # new files
    max_bytes: int = 100 * MiB  # new and size-changed files together
    max_file_bytes: int = 10 * MiB  # one file, unless the base has it at that size
    max_depth: int = 64  # path components

    def __post_init__(self) -> None:
        for name in ("max_files", "max_bytes", "max_file_bytes", "max_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, not {value!r}")


@dataclass(frozen=True)
class Capture:
    """What the collector made of a seat. ``tree`` and ``pack`` are set only when it
    succeeded (``over_budget`` and ``error`` both None); the pack holds the objects of
    ``commit`` (the tree on ``base_commit``) that the base does not have."""

    base_commit: str
    tree: str | None = None
    commit: str | None = None
    pack: Path | None = None
    ignored: tuple[str, ...] = ()
    ignored_count: int = 0
    forbidden: tuple[str, ...] = ()
    specials: tuple[str, ...] = ()
    over_budget: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.tree is not None and self.over_budget is None and self.error is None


def collector_args(
    worktree: Path, base_commit: str, stores: Sequence[Path], out_dir: Path, limits: CaptureLimits
) -> str:
    """The collector's one argument: what it captures, where, within which budgets (JSON)."""
    return json.dumps(
        {
            "worktree": str(worktree),
            "base": base_commit,
            "stores": [str(store) for store in stores],
            "out_dir": str(out_dir),
            "limits": {
                "max_files": limits.max_files,
                "max_bytes": limits.max_bytes,
                "max_file_bytes": limits.max_file_bytes,
                "max_depth": limits.max_depth,
            },
        }
    )


def capture_seat(
    *,
    worktree: Path,
    base_commit: str,
    stores: Sequence[Path],
    out_dir: Path,
    limits: CaptureLimits = CaptureLimits(),
    sandbox: SandboxSpec | None,
    env: Mapping[str, str],
    timeout: float = CAPTURE_TIMEOUT_SECONDS,
) -> Capture:
    """Run the collector on ``worktree`` and read its result.

    ``out_dir`` is made afresh (whatever was there is removed); the sandbox must let the
    collector write it and read ``worktree`` and ``stores``. Its log goes beside it
    (``<out_dir>.log``), where the collector cannot write. ``sandbox=None`` (or mode ``none``)
    runs it unconfined: the operator's explicit opt-out.
    """
    if not _OID.fullmatch(base_commit):
        raise ValueError(f"not a full commit id: {base_commit!r}")
    remove_tree(out_dir)
    out_dir.mkdir(parents=True, mode=0o700)
    args = collector_args(worktree, base_commit, stores, out_dir, limits)
    argv = [sys.executable, "-I", "-S", collector.__file__, args]
    try:
        done = run_process(
            argv,
            cwd=out_dir,
            env=env,
            timeout=timeout,
            log_path=out_dir.with_name(out_dir.name + ".log"),
            sandbox=sandbox,
        )
    except (FileNotFoundError, PermissionError) as exc:
        return _failed(base_commit, f"the collector could not start: {exc}")
    if done.timed_out:
        return _failed(base_commit, f"the collector timed out after {timeout:g} s")
    if done.exit_code != 0:
        tail = done.tail(_TAIL_CHARS) or "no output"
        return _failed(base_commit, f"the collector failed (exit {done.exit_code}): {tail}")
    return read_manifest(out_dir, base_commit)


def read_manifest(out_dir: Path, base_commit: str) -> Capture:
    """The collector's result in ``out_dir``, every field checked; a manifest that is missing,
    a link, too big or malformed is a :class:`Capture` with ``error``."""
    read = read_report_file(out_dir / collector.MANIFEST, out_dir.resolve())
    if read.data is None:
        why = (read.warning or "it is missing").removeprefix("coder report discarded: ")
        return _failed(base_commit, f"the collector's manifest is unusable: {why}")
    try:
        raw = json.loads(read.data)
        return _checked(raw, out_dir, base_commit)
    except (ValueError, TypeError, KeyError) as exc:
        return _failed(base_commit, f"the collector's manifest is invalid: {exc}")


def _checked(raw: Any, out_dir: Path, base_commit: str) -> Capture:
    if not isinstance(raw, dict):
        raise TypeError("not an object")
    over_budget = _message(raw["over_budget"], "over_budget")
    error = _message(raw["error"], "error")
    ignored = _paths(raw["ignored"], "ignored")
    count = raw["ignored_count"]
    if isinstance(count, bool) or not isinstance(count, int) or not len(ignored) <= count:
        raise ValueError(f"ignored_count is {count!r}")
    if count > _MAX_COUNT:
        raise ValueError(f"ignored_count is {count!r}")
    tree = _oid(raw["tree"], base_commit, "tree")
    commit = _oid(raw["commit"], base_commit, "commit")
    pack = None
    if over_budget is None and error is None:
        if tree is None or commit is None:
            raise ValueError("it names no tree and no reason")
        pack = out_dir / collector.PACK
        try:
            mode = os.lstat(pack).st_mode
        except OSError as exc:
            raise ValueError(f"its pack cannot be found ({exc.strerror})") from None
        if not stat.S_ISREG(mode):
            raise ValueError("its pack is not a regular file")
    elif tree is not None or commit is not None:
        raise ValueError("it names a tree although the capture stopped")
    return Capture(
        base_commit=base_commit,
        tree=tree,
        commit=commit,
        pack=pack,
        ignored=ignored,
        ignored_count=count,
        forbidden=_paths(raw["forbidden"], "forbidden"),
        specials=_paths(raw["specials"], "specials"),
        over_budget=over_budget,
        error=error,
    )


def _oid(value: Any, base_commit: str, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != len(base_commit) or not _OID.fullmatch(value):
        raise ValueError(f"{name} is not an object id")
    return value


def _message(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > collector.MESSAGE_CHARS:
        raise ValueError(f"{name} is not a short text")
    return value


def _paths(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > collector.LISTED:
        raise ValueError(f"{name} is not a list of at most {collector.LISTED} paths")
    for path in value:
        if not isinstance(path, str) or not path or len(path) > collector.SHOWN_CHARS:
            raise ValueError(f"{name} holds something that is no path")
    return tuple(value)


def _failed(base_commit: str, why: str) -> Capture:
    return Capture(base_commit=base_commit, error=why)
