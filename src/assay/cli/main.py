"""Entry point of the ``assay`` command.

``assay halt …`` runs inside a coder's turn, so it is routed before typer is even imported
(see :mod:`assay.cli.halt`); every other command goes through the typer app in
:mod:`assay.cli.app`, which imports each command group only when it is invoked.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "halt":
        from assay.cli import halt

        sys.exit(halt.run(args[1:]))

    from assay.cli.app import COMMANDS, GROUPS, build_app

    first = args[0] if args else None
    only = first if first in GROUPS or first in COMMANDS else None
    try:
        build_app(only)(args=args, prog_name="assay", standalone_mode=True)
    except Exception as exc:  # a bug or a broken environment: one line, exit 4, never a traceback
        if os.environ.get("ASSAY_DEBUG"):
            raise
        from assay.cli.failures import database_error, describe

        known = database_error(exc)  # the operator's to fix: one line, no traceback hint
        hint = "" if known else "\n(set ASSAY_DEBUG=1 to see the traceback)"
        sys.stderr.write(f"assay: {known or describe(exc)}{hint}\n")
        sys.exit(4)


if __name__ == "__main__":
    main()
