"""``assay completion bash|zsh|fish``: print the script that gives ``assay`` tab completion.

The script calls ``assay`` back at every tab with ``_ASSAY_COMPLETE=complete_<shell>`` set
(and the words typed so far in ``COMP_WORDS``/``COMP_CWORD`` for bash, ``_TYPER_COMPLETE_ARGS``
for zsh and fish); :mod:`assay.cli.main` then builds the whole command tree and lets click's
shell-completion classes (typer's subclasses of them, registered by :func:`register_shells`)
answer with the matching subcommands and options.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from typer._click import Context
    from typer._click.shell_completion import CompletionItem

    from assay.adapters.store.quick_read import Names

PROG = "assay"
COMPLETE_ENV = "_ASSAY_COMPLETE"  # click: _<PROG>_COMPLETE


class Shell(StrEnum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


def coder_kinds(incomplete: str) -> list[str]:
    """What ``--coder`` may name (replay needs its steps, so a contract file)."""
    from assay.cli.coder_flags import FLAG_KINDS

    return [kind.value for kind in FLAG_KINDS if kind.value.startswith(incomplete)]


def task_ids(incomplete: str) -> list[tuple[str, str]]:
    """The ledger's task ids, newest first, each with its status and title."""
    from assay.adapters.store.quick_read import Names

    return _names(Names.TASKS, incomplete)


def run_ids(incomplete: str) -> list[tuple[str, str]]:
    """The ledger's run ids, newest first, each with its status and task."""
    from assay.adapters.store.quick_read import Names

    return _names(Names.RUNS, incomplete)


def _names(table: Names, incomplete: str) -> list[tuple[str, str]]:
    """Read-only, on the standard library: a tab never creates ``.assay/`` or a ledger,
    never migrates one, and never waits on a locked one. A ledger on a database server
    (``ASSAY_DATABASE_URL``) is not read at a tab; nothing is offered then."""
    from assay.adapters.store.quick_read import NotQuick
    from assay.cli.task_views import quick_ledger
    from assay.core.text import printable

    try:
        found = quick_ledger()
        rows = found[0].names(table) if found is not None else []
    except (NotQuick, OSError):
        return []
    return [
        (name, " ".join(printable(about).split())[:80])
        for name, about in rows
        if name.startswith(incomplete) and name.isprintable() and " " not in name
    ]


TaskId = Annotated[
    str, typer.Argument(help="The task's id (see `assay task list`).", autocompletion=task_ids)
]
RunId = Annotated[
    str, typer.Argument(help="The run's id (see `assay task show`).", autocompletion=run_ids)
]


def halt_words(args: list[str], incomplete: str) -> list[str]:
    """What may follow ``assay halt`` and ``args``: a subcommand, then its options not given
    yet, and after ``--condition`` the canonical halts (a file name, the shell's own
    completion, after any other option that takes a value)."""
    from assay.cli.halt import options_by_command
    from assay.core.vocab import CanonicalHalt

    table = options_by_command()
    chosen = next((word for word in args if word in table), None)
    if chosen is None:
        words = list(table)
    elif args and args[-1] == "--condition":
        words = [halt.value for halt in CanonicalHalt]
    elif args and args[-1] == "--dispatch-id" and chosen != "arm":  # arm names a new one
        words = _dispatch_ids(args)
    elif args and table[chosen].get(args[-1]):
        words = []
    else:
        words = [option for option in table[chosen] if option not in args]
    return [word for word in words if word.startswith(incomplete)]


def _dispatch_ids(args: list[str]) -> list[str]:
    """The dispatches whose state files are in the state folder ``args`` name (else the
    default one), newest first."""
    from assay.adapters.store.halt_files import resolve_state_dir, valid_dispatch_id

    given = args.index("--state-dir") + 1 if "--state-dir" in args else None
    folder = resolve_state_dir(args[given] if given is not None and given < len(args) else None)
    try:
        files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return []
    return [f.stem for f in files if valid_dispatch_id(f.stem)]


class HaltCommand(TyperCommand):
    """``assay halt``: its own argparse parser reads its words, and completes them here."""

    def shell_complete(self, ctx: Context, incomplete: str) -> list[CompletionItem]:
        from typer._click.shell_completion import CompletionItem

        return [CompletionItem(word) for word in halt_words(list(ctx.args), incomplete)]


def register_shells() -> None:
    """Register the bash, zsh and fish completion classes with click (the app is built with
    ``add_completion=False``, which skips that, so ``--install-completion`` is not offered)."""
    from typer._completion_classes import completion_init

    completion_init()


def script(shell: Shell) -> str:
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_ENV, shell=shell.value)


def completion(
    shell: Annotated[Shell, typer.Argument(help="The shell: bash, zsh or fish.")],
) -> None:
    """Print the shell completion script for bash, zsh or fish.

    bash: eval "$(assay completion bash)" (e.g. in ~/.bashrc); zsh: the same in ~/.zshrc
    after compinit; fish: assay completion fish | source
    (or > ~/.config/fish/completions/assay.fish).
    """
    typer.echo(script(shell))
