"""The typer application behind ``assay``, built from the table in :mod:`assay.cli.commands`.

Only the invoked command's module is imported (``build_app(only)``); the whole tree is built
for the shell's tab-time completion call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from assay.cli.commands import (
    COMMANDS,
    HELP_FLAGS,
    OPTIONS,
    SUMMARY,
    VERSION_FLAGS,
    Kind,
    top_level_help,
    version_text,
)
from assay.cli.workspace import WholeSummaries

if TYPE_CHECKING:
    from typer._click import Context


class _Root(WholeSummaries):
    """The root's help is the table's (:func:`top_level_help`), whichever path prints it."""

    def get_help(self, ctx: Context) -> str:
        return top_level_help().removesuffix("\n")  # click's echo adds the newline


def build_app(only: str | None = None) -> typer.Typer:
    """The whole command tree, or only command ``only`` (to skip importing the others)."""
    app = typer.Typer(
        cls=_Root,
        name="assay",
        help=SUMMARY,
        context_settings={"help_option_names": list(HELP_FLAGS)},
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )
    for entry in COMMANDS:
        if only is not None and entry.name != only:
            continue
        if entry.kind is Kind.GROUP:
            app.add_typer(entry.load(), name=entry.name, help=entry.summary)
        elif entry.kind is Kind.COMMAND:
            app.command(name=entry.name)(entry.load())
        else:
            _add_argparse(app, entry.name, entry.summary, entry.load())

    @app.callback(invoke_without_command=True)
    def _root(
        ctx: typer.Context,
        version: bool = typer.Option(False, *VERSION_FLAGS, help=dict(OPTIONS)[VERSION_FLAGS]),
    ) -> None:
        """Run AI coding agents on real repositories and tell the truth about what happened."""
        if version:
            typer.echo(version_text(), nl=False)
            raise typer.Exit(0)
        if ctx.invoked_subcommand is None:
            typer.echo(ctx.get_help())
            raise typer.Exit(2)

    return app


def _add_argparse(
    app: typer.Typer, name: str, summary: str, run: Callable[[list[str]], int]
) -> None:
    # The command's own argparse parser reads its arguments; typer only passes them on (and
    # lists it in the help). `halt` is the one such command: HaltCommand completes its words.
    from assay.cli.completion import HaltCommand

    @app.command(
        name=name,
        cls=HaltCommand,
        help=summary,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
    def _passed_on(ctx: typer.Context) -> None:
        raise typer.Exit(run(list(ctx.args)))
