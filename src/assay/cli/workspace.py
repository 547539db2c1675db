"""Where a command works: the repository, its ``.assay`` home, the ledger, task contracts.

``ASSAY_HOME`` moves the home; ``ASSAY_DATABASE_URL`` moves the ledger (e.g. to PostgreSQL).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import typer

from assay.adapters import git
from assay.adapters.store import halt_files
from assay.adapters.store.connect import DATABASE_URL_ENV, HOME_ENV
from assay.adapters.store.sql import Ledger
from assay.core.contract import Contract

EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_HELD = 3
EXIT_INTERNAL = 4


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """A clear one-line error on stderr and a documented exit code; never a traceback."""
    typer.echo(f"assay: {message}", err=True)
    raise typer.Exit(code)


@dataclass
class Workspace:
    repo: Path
    home: Path

    @classmethod
    def find(cls, start: Path | None = None) -> Workspace:
        here = (start or Path.cwd()).absolute()
        try:
            repo = git.repo_root(here)
        except git.GitError:
            fail(f"{here} is not inside a git repository (assay works on a repository)")
        configured = os.environ.get(HOME_ENV)
        home = Path(configured).absolute() if configured else repo / ".assay"
        home.mkdir(parents=True, exist_ok=True)
        return cls(repo=repo, home=home)

    def ledger(self) -> Ledger:
        url = os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{self.home / 'assay.db'}"
        try:
            return Ledger.open(url)
        except Exception as exc:  # a broken or unreachable database is the operator's to fix
            fail(f"cannot open the ledger at {url}: {exc}", EXIT_INTERNAL)

    def contract_path(self, task_id: str) -> Path:
        return self.home / "tasks" / f"{task_id}.contract.json"

    def save_contract(self, task_id: str, contract: Contract) -> None:
        path = self.contract_path(task_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        halt_files.write_json_atomic(path, contract.model_dump(mode="json"))

    def load_contract(self, task_id: str) -> Contract:
        path = self.contract_path(task_id)
        try:
            return Contract.model_validate(json.loads(path.read_text()))
        except FileNotFoundError:
            fail(f"task {task_id} has no stored contract at {path}", EXIT_INTERNAL)


def command_group() -> typer.Typer:
    """A typer sub-app with assay's conventions: -h, no completion, plain help text."""
    return typer.Typer(
        context_settings={"help_option_names": ["-h", "--help"]},
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )


def print_json(document: object) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
