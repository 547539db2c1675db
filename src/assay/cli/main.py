"""Entry point of the ``assay`` command.

Command groups are imported only when invoked: ``assay halt check`` runs inside a coder's turn
and must not pay for the database, the engine or rich.
"""

from __future__ import annotations

import sys
from importlib import import_module

import typer

# name -> (module, attribute, one-line help)
GROUPS: dict[str, tuple[str, str, str]] = {
    "halt": ("assay.cli.halt", "app", "Arm, check, fire, attest and re-arm a dispatch's halts."),
}

CONTEXT = {"help_option_names": ["-h", "--help"]}


def build_app(only: str | None = None) -> typer.Typer:
    app = typer.Typer(
        name="assay",
        help="Run AI coding agents on real repositories and tell the truth about what happened.",
        context_settings=CONTEXT,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )
    for name, (module, attribute, help_text) in GROUPS.items():
        if only is not None and name != only:
            continue
        group = getattr(import_module(module), attribute)
        app.add_typer(group, name=name, help=help_text)

    @app.callback()
    def _root() -> None:
        """Run AI coding agents on real repositories and tell the truth about what happened."""

    return app


def main() -> None:
    first = sys.argv[1] if len(sys.argv) > 1 else None
    app = build_app(first if first in GROUPS else None)
    app(prog_name="assay")


if __name__ == "__main__":
    main()
