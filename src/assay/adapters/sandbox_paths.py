"""Which paths a seat's sandbox hides and which the contract shows again: one answer for the
engine that builds each sandbox and the preflight that checks, before a run, what a program
inside it will see."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from assay.adapters.assay_secrets import secret_files
from assay.core.contract import Contract


def hidden_paths(repo_root: Path, home: Path, operator_env: Mapping[str, str]) -> tuple[Path, ...]:
    """The operator's home, the user's repository, assay's own folder (``home``: its ledger)
    and the files holding assay's own secrets, wherever they are (a Temporal client key under
    /etc would otherwise show through the read-only root)."""
    hidden = [repo_root, home]
    operator_home = operator_env.get("HOME", "").strip()
    if operator_home and Path(operator_home).is_absolute():
        hidden.insert(0, Path(operator_home))
    return unique([*hidden, *secret_files(operator_env)])


def declared_paths(
    contract: Contract,
    seat: int,
    *,
    repo_root: Path,
    home: Path,
    operator_env: Mapping[str, str],
) -> list[Path]:
    """Files and folders the contract's ``env:`` or the seat's coder ``args`` name by
    absolute path (a model registry, a CA bundle): the operator chose to hand them to the
    coder, so they are visible read-only even under a hidden folder; never the user's
    repository or assay's own folder."""
    found = []
    hidden = hidden_paths(repo_root, home, operator_env)
    args = [str(a) for a in contract.coder_for_seat(seat).args]
    for declared in [*contract.env.values(), *args]:
        value = declared
        if declared.startswith("$") and len(declared) > 1:
            value = operator_env.get(declared[1:], "")
        path = Path(value)
        if not path.is_absolute() or not path.exists():
            continue
        path = path.resolve()
        inside = [repo_root.resolve(), home.resolve()]
        if any(path == root or root in path.parents for root in inside):
            continue
        if any(path in (h, *h.parents) for h in hidden):
            continue  # naming a folder that holds a hidden one must not show it
        found.append(path)
    return found


def unique(paths: Sequence[Path]) -> tuple[Path, ...]:
    """``paths`` resolved, each once, in order."""
    found: list[Path] = []
    for path in paths:
        absolute = path.resolve()
        if absolute not in found:
            found.append(absolute)
    return tuple(found)
