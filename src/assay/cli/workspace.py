"""Where a command works: the repository, its ``.assay`` home, the ledger, task contracts.

A task's contract is kept in the ledger with the task (:mod:`assay.adapters.store.contracts`).

``ASSAY_HOME`` moves the home; ``ASSAY_DATABASE_URL`` moves the ledger (e.g. to PostgreSQL).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from typer.core import TyperGroup

from assay.adapters.store.names import DATABASE_URL_ENV, DEFAULT_HOME, HOME_ENV

if TYPE_CHECKING:  # imported where used: a command that never opens the ledger never pays
    from typer._click import Context, HelpFormatter

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


def refuse_secret_env(contract: Contract) -> None:
    """A contract that would hand one of assay's own secrets (the ledger's URL or password,
    the dashboard's token, the Temporal API key) to a coder, validator or judge is refused,
    exit 2, before anything runs."""
    import os

    from assay.adapters.envpolicy import contract_leak

    problem = contract_leak(contract, os.environ)
    if problem is not None:
        fail(f"the contract cannot run: {problem}")


def refuse_unrunnable(
    contract: Contract, *, landing: bool = True, workspace: Workspace | None = None
) -> None:
    """A contract this machine cannot run as set (a coder's or judge's program not installed or
    hidden by the sandbox, an API key not set, a validator's program missing; with
    ``landing``, a ``land: merge`` into a checkout with uncommitted changes) is refused, exit 2,
    one line per problem, before anything is written: no task, no run."""
    from assay.adapters.preflight import advisory_problems, check
    from assay.core.text import printable

    workspace = workspace or Workspace.find(require_commit=True)
    problems = check(contract, repo=workspace.repo, home=workspace.home, landing=landing)
    if not problems:  # a warn-only check that cannot run only warns, in the run as here
        for advice in advisory_problems(contract, repo=workspace.repo, home=workspace.home):
            typer.echo(
                f"assay: warning: {printable(advice)} (on_fail: warn: the run goes on, this "
                "check only warns)",
                err=True,
            )
    for problem in problems:
        typer.echo(f"assay: {printable(problem)}", err=True)
    if problems:
        raise typer.Exit(EXIT_USAGE)


@dataclass
class Workspace:
    repo: Path
    home: Path
    # False: a folder outside any repository, for a command that only reads and writes the
    # shared ledger (``serve --temporal``): nothing is made there.
    repository: bool = True
    _ledger: Ledger | None = field(default=None, init=False, repr=False, compare=False)
    _home_made: bool = field(default=False, init=False, repr=False, compare=False)

    @classmethod
    def find(cls, start: Path | None = None, *, require_commit: bool = False) -> Workspace:
        """The workspace of the repository around ``start``; ``require_commit``: refuse a
        repository with no commits, which a run cannot start from. Nothing is created here: the
        home is made by the first write (:meth:`ledger`, :meth:`make_home`)."""
        from assay.adapters import git

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
        home = Path(configured).absolute() if configured else repo / DEFAULT_HOME
        return cls(repo=repo, home=home)

    @classmethod
    def shared(cls) -> Workspace:
        """Where a command that only talks to the shared ledger runs: the repository around
        here, else this folder, outside any repository (its home ``ASSAY_HOME`` or
        ``./.assay``, never made: a PostgreSQL ledger needs none)."""
        from assay.adapters import git

        here = Path.cwd().absolute()
        try:
            git.repo_root(here)
        except git.GitError:
            configured = os.environ.get(HOME_ENV)
            home = Path(configured).absolute() if configured else here / DEFAULT_HOME
            return cls(repo=here, home=home, repository=False)
        return cls.find(here)

    def make_home(self) -> Path:
        """Create the home (and hide it from ``git status``): for a command that writes."""
        from assay.adapters.home import make_home

        try:
            made = make_home(self.repo, self.home)
        except OSError as exc:
            fail(f"cannot create {self.home}: {exc.strerror or exc}", EXIT_INTERNAL)
        self._home_made = True
        return made

    def ledger(self) -> Ledger:
        """The workspace's ledger, opened (and migrated) once and shared by every caller; the
        home is created first (a new ledger lives there). For a command that writes: one that
        only reads takes :meth:`existing_ledger`."""
        if not self._home_made and self.repository:
            self.make_home()
        return self._open_ledger()

    def _open_ledger(self) -> Ledger:
        if self._ledger is not None:
            return self._ledger
        from assay.adapters.store.sql import Ledger

        url = os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{self.home / 'assay.db'}"
        try:
            self._ledger = Ledger.open(url)
        except Exception as exc:  # a broken or unreachable database is the operator's to fix
            from assay.cli.failures import database_error
            from assay.core.text import address_shown

            detail = database_error(exc) or " ".join(str(exc).split())
            fail(f"cannot open the ledger at {address_shown(url)}: {detail}", EXIT_INTERNAL)
        return self._ledger

    def existing_ledger(self) -> Ledger | None:
        """The workspace's ledger when there is one; None when it is a SQLite file not created
        yet (nothing has been queued or run here), which a command that only reads leaves so."""
        if not os.environ.get(DATABASE_URL_ENV) and not (self.home / "assay.db").is_file():
            return None
        return self._open_ledger()

    def load_contract(self, task_id: str) -> Contract:
        """The task's stored contract, from the ledger (or, for a task an older assay queued,
        its file under the home); exit 4 with one line when there is none or it is unreadable."""
        from assay.adapters.store.contracts import ContractUnavailable, load_task_contract

        try:
            return load_task_contract(self._open_ledger(), task_id, home=self.home)
        except ContractUnavailable as exc:
            if exc.cause is None:
                fail(str(exc), EXIT_INTERNAL)
            fail(
                f"task {task_id}: its stored contract {exc.where} is unreadable: "
                f"{one_line(exc.cause)}",
                EXIT_INTERNAL,
            )


def command_group() -> typer.Typer:
    """A typer sub-app with assay's conventions: -h, no completion, plain help text, each
    subcommand listed with its whole summary."""
    return typer.Typer(
        cls=WholeSummaries,
        context_settings={"help_option_names": ["-h", "--help"]},
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )


class WholeSummaries(TyperGroup):
    """A group whose help lists each subcommand with the whole first paragraph of its help,
    wrapped, as ``assay --help`` does (click cuts it to the width left, ending in "...")."""

    def invoke(self, ctx: Context) -> object:
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            # typer checks a choice with pydantic, whose message begins "Value error, ":
            # the user reads only what is wrong ("'nope' is not one of 'merge', ...").
            exc.message = exc.message.removeprefix("Value error, ")
            raise

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, summary(command.short_help or command.help)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def summary(text: str | None) -> str:
    """The first paragraph of a command's help, on one line."""
    return " ".join((text or "").split("\n\n")[0].split())


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
