"""Entry point of the ``assay`` command: choose the command from the table, run only it.

The table in :mod:`assay.cli.commands` names every command and the module it lives in. What
must answer at once is answered from it before typer is imported (typer builds every
parameter with pydantic): ``assay --version`` / ``-V`` (``--json`` too), ``assay --help`` /
``-h`` and bare ``assay``. A command on its own argparse parser (``assay halt …``, which runs
inside a coder's turn) is run directly; a command with an ``early`` module (``assay task
list``: :mod:`assay.cli.task_list`) is offered to it first, for what it can answer on the
standard library. Every other command goes through the typer app in :mod:`assay.cli.app`,
which imports only the chosen command's module.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

# Set by the shell's completion script when it asks for completions (assay.cli.completion).
COMPLETE_ENV = "_ASSAY_COMPLETE"


def main(argv: Sequence[str] | None = None) -> None:
    try:
        _main(argv)
    except SystemExit as done:
        # As the process itself (no argv: the `assay` command), never when called in-process.
        if argv is None and "temporalio" in sys.modules:
            _exit_now(done.code)
        raise


def _exit_now(code: object) -> None:
    """Exit with ``code`` past the interpreter's finalization. The Temporal SDK's native
    threads outlive a command that loaded it; a finalizing interpreter they call back into
    aborts ("Fatal Python error: PyGILState_Release", exit 134) after the command's own
    answer and exit code (seen after a refused TLS connection). Everything the command
    wrote is flushed first; it keeps no state an exit handler would have to save."""
    if code is not None and not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    if "logging" in sys.modules:
        import logging

        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or its reader went away
            stream.flush()
    os._exit(code or 0)


def _main(argv: Sequence[str] | None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    completing = bool(os.environ.get(COMPLETE_ENV))
    if not completing:
        _answer_at_once(args)
    from assay.cli.commands import BY_NAME, Kind

    chosen = BY_NAME.get(args[0]) if args else None
    if chosen is not None and chosen.kind is Kind.ARGPARSE:
        sys.exit(chosen.load()(args[1:]))
    try:
        if chosen is not None and chosen.early is not None and not completing:
            from assay.cli.commands import module

            code = module(chosen.early).main(args)
            if code is not None:
                sys.exit(code)
        # A completion call builds the whole tree: the word being completed may be any command.
        _typer(args, None if chosen is None or completing else chosen.name, completing)
    except Exception as exc:  # a bug or a broken environment: one line, exit 4, never a traceback
        if os.environ.get("ASSAY_DEBUG"):
            raise
        from assay.cli.extras import missing_extra

        needed_by = f"assay {args[0]}" if args and not args[0].startswith("-") else "assay"
        missing = missing_extra(exc, needed_by)  # an optional part not installed: the hint
        if missing is not None:
            sys.stderr.write(f"assay: {missing}\n")
            sys.exit(2)
        from assay.cli.failures import database_error, describe

        known = database_error(exc)  # the operator's to fix: one line, no traceback hint
        hint = "" if known else "\n(set ASSAY_DEBUG=1 to see the traceback)"
        sys.stderr.write(f"assay: {known or describe(exc)}{hint}\n")
        sys.exit(4)


def _typer(args: list[str], only: str | None, completing: bool) -> None:
    from assay.cli.app import build_app

    app = build_app(only)
    if completing:
        from assay.cli.completion import register_shells

        register_shells()
    app(args=args, prog_name="assay", standalone_mode=True)


def _answer_at_once(args: list[str]) -> None:
    """Print the version or the top-level help and exit, if that is all ``args`` ask for."""
    if len(args) > 2:
        return
    from assay.cli.commands import HELP_FLAGS, JSON_FLAG, VERSION_FLAGS, top_level_help

    if not args:  # like click's no_args_is_help: the help on stderr, exit 2
        sys.stderr.write(top_level_help())
        sys.exit(2)
    rest = [a for a in args if a != JSON_FLAG]
    if len(rest) == 1 and rest[0] in VERSION_FLAGS:
        from assay.cli.commands import version_text

        sys.stdout.write(version_text(as_json=len(rest) < len(args)))
        sys.exit(0)
    if args == rest and len(args) == 1 and args[0] in HELP_FLAGS:
        sys.stdout.write(top_level_help())
        sys.exit(0)


if __name__ == "__main__":
    main()
