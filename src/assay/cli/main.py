"""Entry point of the ``assay`` command.

What must answer at once is answered before typer is imported (typer builds every parameter
with pydantic): ``assay --version`` / ``-V``, ``assay --help`` / ``-h`` and bare ``assay``
from the table in :mod:`assay.cli.commands`, and ``assay halt …``, which runs inside a coder's
turn (see :mod:`assay.cli.halt`). Every other command goes through the typer app in
:mod:`assay.cli.app`, which imports only the invoked command's module.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# Set by the shell's completion script when it asks for completions (assay.cli.completion).
COMPLETE_ENV = "_ASSAY_COMPLETE"


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    completing = bool(os.environ.get(COMPLETE_ENV))
    if not completing:
        _answer_at_once(args)
    if args and args[0] == "halt":
        from assay.cli import halt

        sys.exit(halt.run(args[1:]))

    from assay.cli.commands import BY_NAME

    first = args[0] if args else None
    # A completion call builds the whole tree: the word being completed may be any command.
    only = first if first in BY_NAME and not completing else None
    try:
        from assay.cli.app import build_app

        app = build_app(only)
        if completing:
            from assay.cli.completion import register_shells

            register_shells()
        app(args=args, prog_name="assay", standalone_mode=True)
    except Exception as exc:  # a bug or a broken environment: one line, exit 4, never a traceback
        if os.environ.get("ASSAY_DEBUG"):
            raise
        from assay.cli.failures import database_error, describe

        known = database_error(exc)  # the operator's to fix: one line, no traceback hint
        hint = "" if known else "\n(set ASSAY_DEBUG=1 to see the traceback)"
        sys.stderr.write(f"assay: {known or describe(exc)}{hint}\n")
        sys.exit(4)


def _answer_at_once(args: list[str]) -> None:
    """Print the version or the top-level help and exit, if that is all ``args`` ask for."""
    if len(args) > 1:
        return
    if not args:  # like click's no_args_is_help: the help on stderr, exit 2
        from assay.cli.commands import top_level_help

        sys.stderr.write(top_level_help())
        sys.exit(2)
    from assay.cli.commands import HELP_FLAGS, VERSION_FLAGS

    if args[0] in VERSION_FLAGS:
        from assay import __version__

        sys.stdout.write(f"assay {__version__}\n")
        sys.exit(0)
    if args[0] in HELP_FLAGS:
        from assay.cli.commands import top_level_help

        sys.stdout.write(top_level_help())
        sys.exit(0)


if __name__ == "__main__":
    main()
