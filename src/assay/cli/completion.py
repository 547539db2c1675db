"""``assay completion bash|zsh|fish``: print the script that gives ``assay`` tab completion.

The script calls ``assay`` back at every tab with ``_ASSAY_COMPLETE=complete_<shell>`` set
(and the words typed so far in ``COMP_WORDS``/``COMP_CWORD`` for bash, ``_TYPER_COMPLETE_ARGS``
for zsh and fish); :mod:`assay.cli.main` then builds the whole command tree and lets click's
shell-completion classes (typer's subclasses of them, registered by :func:`register_shells`)
answer with the matching subcommands and options.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

PROG = "assay"
COMPLETE_ENV = "_ASSAY_COMPLETE"  # click: _<PROG>_COMPLETE


class Shell(StrEnum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


def register_shells() -> None:
    """Register the bash, zsh and fish completion classes with click (the app is built with
    ``add_completion=False``, which skips that, so ``--install-completion`` is not offered)."""
    from typer._completion_classes import completion_init

    completion_init()


def script(shell: Shell) -> str:
    from typer.completion import get_completion_script

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
