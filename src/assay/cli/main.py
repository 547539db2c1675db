"""Entry point of the ``assay`` command.

``assay halt …`` runs inside a coder's turn, so it is routed before typer is even imported
(see :mod:`assay.cli.halt`); every other command goes through the typer app in
:mod:`assay.cli.app`, which imports each command group only when it is invoked.
"""

from __future__ import annotations

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
    build_app(only)(args=args, prog_name="assay")


if __name__ == "__main__":
    main()
