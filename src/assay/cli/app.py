"""The typer application behind ``assay`` (everything except the ``halt`` fast path)."""

from __future__ import annotations

from importlib import import_module

import typer

from assay.cli import halt

# Command groups: name -> (module, attribute, one-line help), imported only when used.
GROUPS: dict[str, tuple[str, str, str]] = {
    "task": ("assay.cli.tasks", "app", "Queue tasks, list them, show, hold, release, cancel."),
    "ledger": ("assay.cli.ledger", "app", "A task's counters, derived from the ledger."),
    "payload": ("assay.cli.payload", "app", "The halt payload: its JSON Schema, a run's payload."),
    "contract": ("assay.cli.contract", "app", "Write a contract template; check a contract."),
}
# Single commands: name -> (module, function).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("assay.cli.run", "run"),
    "serve": ("assay.cli.serve", "serve"),
    "brief": ("assay.cli.brief", "brief"),
    "gc": ("assay.cli.gc", "gc"),
    "worker": ("assay.cli.worker", "worker"),
    "dev-server": ("assay.cli.dev_server", "dev_server"),
}


def build_app(only: str | None = None) -> typer.Typer:
    """The whole command tree, or only group ``only`` (to skip importing the others)."""
    app = typer.Typer(
        name="assay",
        help="Run AI coding agents on real repositories and tell the truth about what happened.",
        context_settings={"help_option_names": ["-h", "--help"]},
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )
    for name, (module, attribute, help_text) in GROUPS.items():
        if only is not None and name != only:
            continue
        app.add_typer(getattr(import_module(module), attribute), name=name, help=help_text)
    for name, (module, function) in COMMANDS.items():
        if only is not None and name != only:
            continue
        app.command(name=name)(getattr(import_module(module), function))

    @app.callback(invoke_without_command=True)
    def _root(
        ctx: typer.Context,
        version: bool = typer.Option(False, "--version", help="Print the version and exit."),
    ) -> None:
        """Run AI coding agents on real repositories and tell the truth about what happened."""
        if version:
            from assay import __version__

            typer.echo(f"assay {__version__}")
            raise typer.Exit(0)
        if ctx.invoked_subcommand is None:
            typer.echo(ctx.get_help())
            raise typer.Exit(2)

    @app.command(
        name="halt",
        help=halt.HELP,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
    def _halt(ctx: typer.Context) -> None:
        raise typer.Exit(halt.run(ctx.args))

    return app
