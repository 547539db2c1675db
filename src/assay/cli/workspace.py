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
    from assay.core.text import printable

    typer.echo(f"assay: {printable(message)}", err=True)
    raise typer.Exit(code)


def refuse_unconfinable(contract: Contract) -> None:
    """A contract that asks for the bwrap sandbox on a machine where bwrap is missing (or
    cannot create a sandbox) is refused, exit 2: it never runs unconfined by surprise."""
    from assay.adapters.sandbox import bwrap_problem
    from assay.core.vocab import SandboxMode

    if contract.sandbox is not SandboxMode.BWRAP:
        return
    problem = bwrap_problem()
    if problem is not None:
        fail(f"{problem} (on the command line: --sandbox none)")


@dataclass
class Workspace:
    repo: Path
    home: Path

    @classmethod
    def find(cls, start: Path | None = None, *, require_commit: bool = False) -> Workspace:
        """The workspace of the repository around ``start``; ``require_commit``: refuse (before
        creating anything) a repository with no commits, which a run cannot start from."""
        here = (start or Path.cwd()).absolute()
        try:
            repo = git.repo_root(here)
        except git.GitError:
            fail(f"{here} is not inside a git repository (assay works on a repository)")
        if require_commit:
            try:
                git.head_commit(repo)
            except git.GitError as exc:
                why = exc.stderr.strip().splitlines()[-1:] or [str(exc)]
                fail(f"cannot run in {repo}: {why[0]} (commit something first)")
        configured = os.environ.get(HOME_ENV)
        home = Path(configured).absolute() if configured else repo / ".assay"
        home.mkdir(parents=True, exist_ok=True)
        return cls(repo=repo, home=home)

    def ledger(self) -> Ledger:
        url = os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{self.home / 'assay.db'}"
        try:
            return Ledger.open(url)
        except Exception as exc:  # a broken or unreachable database is the operator's to fix
            from assay.cli.failures import database_error

            detail = database_error(exc) or " ".join(str(exc).split())
            fail(f"cannot open the ledger at {url}: {detail}", EXIT_INTERNAL)

    def contract_path(self, task_id: str) -> Path:
        return self.home / "tasks" / f"{task_id}.contract.json"

    def create_contract(self, task_id: str, contract: Contract) -> bool:
        """Store a new task's contract, never over an existing file (False: the id is taken).

        Written whole beside it, then hard-linked into place, which fails if the name exists.
        """
        path = self.contract_path(task_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.{os.getpid()}.new")
        # Only what was set: a default is not a setting the operator chose, so reading it
        # back never warns that a coder ignores it.
        halt_files.write_json_atomic(staged, contract.model_dump(mode="json", exclude_unset=True))
        try:
            os.link(staged, path)
        except FileExistsError:
            return False
        finally:
            staged.unlink(missing_ok=True)
        return True

    def remove_contract(self, task_id: str) -> None:
        self.contract_path(task_id).unlink(missing_ok=True)

    def load_contract(self, task_id: str) -> Contract:
        path = self.contract_path(task_id)
        from pydantic import ValidationError

        try:
            return Contract.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            fail(f"task {task_id} has no stored contract at {path}", EXIT_INTERNAL)
        except (OSError, ValueError, ValidationError) as exc:
            fail(
                f"task {task_id}: its stored contract {path} is unreadable: {one_line(exc)}",
                EXIT_INTERNAL,
            )


def command_group() -> typer.Typer:
    """A typer sub-app with assay's conventions: -h, no completion, plain help text."""
    return typer.Typer(
        context_settings={"help_option_names": ["-h", "--help"]},
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )


def one_line(exc: Exception) -> str:
    """A pydantic validation error (or any error) as one line: each problem ``where: what``."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return " ".join(str(exc).split())
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return "; ".join(parts)


def print_json(document: object) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
