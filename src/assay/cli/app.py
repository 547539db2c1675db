"""The typer application behind ``assay``, built from the table in :mod:`assay.cli.commands`.

Only the invoked command's module is imported (``build_app(only)``); the whole tree is built
for the shell's tab-time completion call.
"""

from __future__ import annotations

from importlib import import_module

import typer

from assay.cli.commands import COMMANDS, HELP_FLAGS, OPTIONS, SUMMARY, VERSION_FLAGS, Kind
from assay.cli.workspace import WholeSummaries


def build_app(only: str | None = None) -> typer.Typer:
    """The whole command tree, or only command ``only`` (to skip importing the others)."""
    app = typer.Typer(
        cls=WholeSummaries,
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
            sub = getattr(import_module(entry.module), entry.attribute)
            app.add_typer(sub, name=entry.name, help=entry.summary)
        elif entry.kind is Kind.COMMAND:
            function = getattr(import_module(entry.module), entry.attribute)
            app.command(name=entry.name)(function)
        else:
            _add_halt(app)

    @app.callback(invoke_without_command=True)
    def _root(
        ctx: typer.Context,
        version: bool = typer.Option(False, *VERSION_FLAGS, help=dict(OPTIONS)[VERSION_FLAGS]),
    ) -> None:
        """Run AI coding agents on real repositories and tell the truth about what happened."""
        if version:
            from assay import __version__

            typer.echo(f"assay {__version__}")
            raise typer.Exit(0)
        if ctx.invoked_subcommand is None:
            typer.echo(ctx.get_help())
            raise typer.Exit(2)

    return app


def _add_halt(app: typer.Typer) -> None:
    # argparse parses ``halt``'s own arguments (see assay.cli.halt); typer only passes them on.
    from assay.cli import halt
    from assay.cli.completion import HaltCommand

    @app.command(
        name="halt",
        cls=HaltCommand,
        help=halt.HELP,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
    def _halt(ctx: typer.Context) -> None:
        raise typer.Exit(halt.run(ctx.args))
