"""A ledger filled by real runs of the `assay` command (run in this process, as the unit tier
runs it), shared by the dashboard's tests.

One world per backend and session (the runs take a few seconds; every test only reads): a task
whose run was blocked on attempt 1 and passed on attempt 2 (merged), a task held by an operator,
a task whose coder fired a block halt (held, the halt FIRED in its state file), and a task
still queued. A test that writes must build its own world (``build_world``) or copy it.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assay.adapters.store.sql import Ledger
from support.postgres import create_database, drop_database
from support.repo import CHECK_TESTS, Repo, make_repo

ASSAY = Path(sys.executable).with_name("assay")
HALT_EVIDENCE = "the task needs a change to setup.cfg, outside src/"


@dataclass(frozen=True)
class World:
    """The repository, its ledger's URL, where its halt state files are, and what is in it."""

    repo: Repo
    url: str
    state_dir: Path
    done_task: str
    pass_run: str
    held_task: str
    halted_task: str
    halt_run: str
    queued_task: str

    def ledger(self) -> Ledger:
        return Ledger(self.url)

    @property
    def halt_evidence(self) -> str:
        """What the halting run's coder gave as its halt's evidence."""
        return HALT_EVIDENCE

    @property
    def check_command(self) -> str:
        """The quick validator command of the world's contracts (run in a seat)."""
        return CHECK_COMMAND

    @property
    def backend(self) -> str:
        return "postgresql" if self.url.startswith("postgresql") else "sqlite"


def _ok(done: Any, *expect: int) -> Any:
    assert done.returncode in (expect or (0,)), done.stderr
    return done


CHECK_COMMAND = CHECK_TESTS


def _contract(repo: Repo, name: str, task: str, steps: list[str], land: str) -> Path:
    scripts = "\n".join(f'    - {{script: "{step}"}}' for step in steps)
    return repo.contract(
        name,
        f"""task: {task}
anchors: [src/slug.py]
scope: {{allow: ["src/**"]}}
coder:
  kind: replay
  steps:
{scripts}
validators:
  - {{id: tests, kind: command, run: "{CHECK_COMMAND}"}}
land: {land}
""",
    )


def build_world(root: Path, url: str | None = None) -> World:
    """Fill a ledger with the four tasks through `assay run` / `task add` / `task hold` (run
    in this process: the web tests read the ledger, they do not test these commands);
    ``url``: a PostgreSQL ledger (else SQLite under the repository's ``.assay``)."""
    repo = make_repo(root)
    env: Any = {"ASSAY_DATABASE_URL": url} if url else {}
    put = [repo.put(f"{name}.py", "src/slug.py") for name in ("wrong", "fixed")]
    contract = _contract(repo, "merge.yaml", "Make slugify keep digits.", put, "merge")
    passed = json.loads(_ok(repo.main("run", "--contract", str(contract), "--json", **env)).stdout)

    later = _contract(repo, "later.yaml", "Make slugify keep digits.", put[1:], "branch")
    added = _ok(repo.main("task", "add", "--contract", str(later), "--json", **env))
    held = json.loads(added.stdout)["id"]
    _ok(repo.main("task", "hold", held, "--reason", "waiting for the API freeze", **env))

    fire = (
        f'{ASSAY} halt check --dispatch-id \\"$ASSAY_DISPATCH_ID\\" --condition halt-scope-breach '
        f"--fire --evidence '{HALT_EVIDENCE}'"
    )
    halting = repo.contract(
        "halt.yaml",
        f"""task: Rename the package in setup.cfg.
scope: {{allow: ["src/**"]}}
coder: {{kind: replay, steps: [{{script: "{fire}"}}]}}
validators: [{{id: tests, kind: command, run: "{CHECK_COMMAND}"}}]
land: merge
""",
    )
    halted = json.loads(
        _ok(repo.main("run", "--contract", str(halting), "--json", **env), 3).stdout
    )

    queued = _ok(repo.main("task", "add", "--contract", str(later), "--json", **env))
    return World(
        repo=repo,
        url=url or f"sqlite:///{repo.root / '.assay' / 'assay.db'}",
        state_dir=repo.root / ".assay" / "halt-state",
        done_task=passed["task_id"],
        pass_run=passed["run_id"],
        held_task=held,
        halted_task=halted["task_id"],
        halt_run=halted["run_id"],
        queued_task=json.loads(queued.stdout)["id"],
    )


@pytest.fixture(scope="session")
def sqlite_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory.mktemp("world-sqlite"))


@pytest.fixture(scope="session")
def postgres_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = create_database()
    try:
        yield build_world(tmp_path_factory.mktemp("world-postgres"), url)
    finally:
        drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest) -> World:
    """The shared world on each backend in turn (read it only)."""
    name = "sqlite_world" if request.param == "sqlite" else "postgres_world"
    found: World = request.getfixturevalue(name)
    return found


@pytest.fixture
def world_copy(sqlite_world: World, tmp_path: Path) -> World:
    """A private copy of the SQLite world (its repository, ledger and state files), for a
    test that writes."""
    target = tmp_path / "copy"
    shutil.copytree(sqlite_world.repo.root.parent, target, symlinks=True)
    repo = Repo(root=target / "repo", fixes=target / "fixes")
    return World(
        repo=repo,
        url=f"sqlite:///{repo.root / '.assay' / 'assay.db'}",
        state_dir=repo.root / ".assay" / "halt-state",
        done_task=sqlite_world.done_task,
        pass_run=sqlite_world.pass_run,
        held_task=sqlite_world.held_task,
        halted_task=sqlite_world.halted_task,
        halt_run=sqlite_world.halt_run,
        queued_task=sqlite_world.queued_task,
    )
