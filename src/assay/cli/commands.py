"""The table of ``assay``'s commands: the one place a command is named, summarised and found.

:mod:`assay.cli.main` reads it to choose the command (and imports only that command's module):
``halt`` is parsed by its own argparse parser, every other command by the typer app
:mod:`assay.cli.app` builds from this table. The top-level help and the version are rendered
here, once, for both: :mod:`assay.cli.main` prints them before typer (which builds every
parameter with pydantic) is imported, and the typer root renders its own help and version
with the same functions. A test checks each summary here against the first paragraph of that
command's own help, so the two never drift.

Standard library only: this module is imported on every start.
"""

from __future__ import annotations

from enum import StrEnum

TYPE_CHECKING = False  # typing itself is an import the fast answers do without
if TYPE_CHECKING:
    from typing import Any

SUMMARY = "Run AI coding agents on real repositories and tell the truth about what happened."
WIDTH = 78


class Kind(StrEnum):
    COMMAND = "command"  # a single typer command: ``attribute`` is its function
    GROUP = "group"  # a typer sub-app: ``attribute`` is the ``typer.Typer``
    ARGPARSE = "argparse"  # ``attribute`` is ``run(argv) -> exit code`` on its own parser


class Command:
    """One command: where it lives and its one-line summary. (A plain class: a dataclass
    would import ``inspect`` and the tokenizer on every start.)"""

    __slots__ = ("attribute", "early", "kind", "module", "name", "summary")

    def __init__(
        self,
        name: str,
        module: str,
        attribute: str,
        kind: Kind,
        summary: str,
        early: str | None = None,
    ) -> None:
        self.name = name
        self.module = module
        self.attribute = attribute
        self.kind = kind
        self.summary = summary  # the first paragraph of the command's help, on one line
        # A module whose ``main(argv) -> exit code | None`` is offered the command before
        # typer is built, for what it can answer on the standard library (None: typer's).
        self.early = early

    def __repr__(self) -> str:
        return f"Command({self.name!r}, {self.module!r}, {self.attribute!r}, {self.kind!r})"

    def load(self) -> Any:
        """What ``attribute`` names in ``module``: importing the module is the command's cost."""
        return getattr(module(self.module), self.attribute)


def module(name: str) -> Any:
    """The module ``name``, imported. ``__import__`` rather than ``importlib.import_module``:
    ``importlib`` (and ``warnings``, which it imports) would be two more imports on every
    start, ``assay halt check``'s included."""
    import sys

    __import__(name)
    return sys.modules[name]


COMMANDS: tuple[Command, ...] = (
    Command(
        "run",
        "assay.cli.run",
        "run",
        Kind.COMMAND,
        "Run a task now: coders in seat repositories, validators decide, the task is settled.",
    ),
    Command(
        "serve",
        "assay.cli.serve",
        "serve",
        Kind.COMMAND,
        "Run queued (and failed, runnable) tasks, N at a time; interrupted runs are closed first.",
    ),
    Command(
        "brief",
        "assay.cli.brief",
        "brief",
        Kind.COMMAND,
        "Print the brief a coder is given: the task, the scope, every armed halt with the "
        "exact command that fires it, the report file and the NO CHANGE NEEDED protocol.",
    ),
    Command(
        "gc",
        "assay.cli.gc",
        "gc",
        Kind.COMMAND,
        "Remove what closed runs left behind once they are older than --older-than (7 days).",
    ),
    Command(
        "worker",
        "assay.cli.worker",
        "worker",
        Kind.COMMAND,
        "Serve runs from Temporal: open runs from the shared queue, hold their seats here.",
    ),
    Command(
        "dev-server",
        "assay.cli.dev_server",
        "dev_server",
        Kind.COMMAND,
        "Run Temporal's development server until SIGINT / SIGTERM, its state under "
        ".assay/temporal.",
    ),
    Command(
        "schema",
        "assay.cli.schema",
        "schema",
        Kind.COMMAND,
        "Print the JSON Schema of every command's --json output (one $defs entry per output).",
    ),
    Command(
        "completion",
        "assay.cli.completion",
        "completion",
        Kind.COMMAND,
        "Print the shell completion script for bash, zsh or fish.",
    ),
    Command(
        "halt",
        "assay.cli.halt",
        "run",
        Kind.ARGPARSE,
        "Arm, check, fire, attest and re-arm a dispatch's halts (exit 0 ok, 1 halt/failure, "
        "2 usage).",
    ),
    Command(
        "usage",
        "assay.cli.usage",
        "usage",
        Kind.COMMAND,
        "Tokens and money spent per task, coder, model or day; costs nobody reported are "
        "counted apart, never as $0.",
    ),
    Command(
        "logs",
        "assay.cli.logs",
        "logs",
        Kind.COMMAND,
        "A run's logs: list them (name, role, attempt, seat, size, cut or not), or print one.",
    ),
    Command(
        "task",
        "assay.cli.tasks",
        "app",
        Kind.GROUP,
        "Queue tasks, list them, show, hold, release, cancel, delete, prune.",
        early="assay.cli.task_list",
    ),
    Command(
        "ledger",
        "assay.cli.ledger",
        "app",
        Kind.GROUP,
        "A task's counters and what its runs spent, derived from the ledger.",
    ),
    Command(
        "payload",
        "assay.cli.payload",
        "app",
        Kind.GROUP,
        "The halt payload: its JSON Schema, a run's payload.",
    ),
    Command(
        "contract",
        "assay.cli.contract",
        "app",
        Kind.GROUP,
        "Write a contract template; check a contract.",
    ),
    Command(
        "token",
        "assay.cli.web_tokens",
        "app",
        Kind.GROUP,
        "The dashboard's login tokens: add one (printed once), list them, remove one.",
    ),
)
BY_NAME: dict[str, Command] = {c.name: c for c in COMMANDS}

# The root's own options: (flags, help), shown by the help and declared on the typer root.
VERSION_FLAGS = ("-V", "--version")
HELP_FLAGS = ("-h", "--help")
JSON_FLAG = "--json"  # beside --version: {"version": "…"}
OPTIONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (VERSION_FLAGS, "Print the version and exit (with --json: as JSON)."),
    (HELP_FLAGS, "Show this message and exit."),
)


def version_text(*, as_json: bool = False) -> str:
    """What ``assay --version`` prints (``{"version": …}`` with ``--json``)."""
    from assay import __version__

    if as_json:
        import json

        return json.dumps({"version": __version__}) + "\n"
    return f"assay {__version__}\n"


def top_level_help() -> str:
    """What ``assay --help`` prints: every command with its whole one-line summary."""
    import textwrap

    lines = ["Usage: assay [OPTIONS] COMMAND [ARGS]...", ""]
    lines += textwrap.wrap(SUMMARY, WIDTH, initial_indent="  ", subsequent_indent="  ")
    lines += ["", "Options:"]
    lines += _columns([(", ".join(flags), text) for flags, text in OPTIONS])
    lines += ["", "Commands:"]
    lines += _columns([(c.name, c.summary) for c in COMMANDS])
    lines += ["", "Run 'assay COMMAND --help' for a command's options."]
    return "\n".join(lines) + "\n"


def _columns(rows: list[tuple[str, str]]) -> list[str]:
    """Two columns, the second wrapped under itself (click's layout, never truncated)."""
    import textwrap

    left = max(len(term) for term, _ in rows) + 4
    out = []
    for term, text in rows:
        wrapped = textwrap.wrap(text, WIDTH - left) or [""]
        out.append(f"  {term.ljust(left - 2)}{wrapped[0]}")
        out += [" " * left + more for more in wrapped[1:]]
    return out
