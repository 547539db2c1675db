"""One real run of the replay coder that writes the right fix over ``src/slug.py``, judged by
a shell command: what tests of the executor's side effects (landing, logs, PATH) share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract, parse_contract
from assay.core.tasks import Task
from assay.engine.local.runner import RunReport, run_task
from support.repo import Repo


def fixed_contract(repo: Repo, check: str, *, land: str, sandbox: str = "none") -> Contract:
    """The fix as the replay coder's one step; ``check`` the one command validator."""
    return parse_contract(
        f"""task: Make slugify keep digits.
scope: {{allow: ["src/**"]}}
coder:
  kind: replay
  steps:
    - {{script: "{repo.put("fixed.py", "src/slug.py")}"}}
validators:
  - {{id: check, kind: command, run: "{check}"}}
sandbox: {sandbox}
land: {land}
"""
    )


def home_ledger(root: Path) -> Ledger:
    """The SQLite ledger of the repository at ``root``, in its ``.assay``."""
    home = root / ".assay"
    home.mkdir(exist_ok=True)
    return Ledger.open(f"sqlite:///{home / 'assay.db'}")


def run_fixed(
    repo: Repo,
    check: str,
    *,
    land: str,
    root: Path | None = None,
    sandbox: str = "none",
    ledger: Ledger | None = None,
    env: Mapping[str, str] | None = None,
    origin: str | None = None,
) -> RunReport:
    """Run task ``t1`` under :func:`fixed_contract` in the repository at ``root`` (default:
    ``repo``'s own), its ledger there unless one is given."""
    where = root or repo.root
    contract = fixed_contract(repo, check, land=land, sandbox=sandbox)
    ledger = ledger or home_ledger(where)
    task = Task.new(id="t1", title="t", instruction=contract.task, now=datetime.now(UTC))
    ledger.add_task(task)
    return run_task(
        repo=where,
        home=where / ".assay",
        ledger=ledger,
        task=task,
        contract=contract,
        env=env if env is not None else os.environ,
        origin=origin,
    )
