"""``assay token add | list | remove``: the dashboard's named tokens.

The tokens live in the operator's config folder (``$ASSAY_CONFIG_DIR``, else
``$XDG_CONFIG_HOME/assay``, else ``~/.config/assay``), as hashes: a token's secret is printed
once, by ``add``, and is nowhere else. The name is what the ledger records as who acted.
Exit 0 done; 2 a bad name, a name taken, no such token, or a token file that cannot be used.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from assay.cli.workspace import command_group, fail, print_json

app = command_group()

JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
NameArgument = Annotated[
    str,
    typer.Argument(
        metavar="NAME",
        help="1-40 letters, digits, '.', '_' or '-' (recorded as who acted, e.g. alice).",
        show_default=False,
    ),
]


@app.command()
def add(name: NameArgument, json_output: JsonFlag = False) -> None:
    """Make a dashboard token NAME and print it, once: only its hash is kept.

    The token goes to stdout (a note to stderr); log in with http://HOST:PORT/login?token=…
    or send `Authorization: Bearer …`. Exit 2: NAME is not a valid name, is taken, or the
    token file cannot be used.
    """
    from assay.web.tokens import TokenError, TokenStore

    store = TokenStore()
    try:
        record, secret = store.add(name)
    except TokenError as exc:
        fail(str(exc))
    if json_output:
        print_json({**record.document(), "token": secret})
        return
    sys.stdout.write(f"{secret}\n")
    typer.echo(
        f"token {record.name!r} made; shown only now (log in at http://HOST:PORT/login?token=…, "
        "or send Authorization: Bearer …)",
        err=True,
    )


@app.command("list")
def list_tokens(json_output: JsonFlag = False) -> None:
    """The dashboard's tokens: names and when each was made (never the tokens).

    Exit 2: the token file cannot be used (another user's, or writable by others).
    """
    from assay.web.tokens import TokenError, TokenStore

    store = TokenStore()
    try:
        records = store.records()
    except TokenError as exc:
        fail(str(exc))
    if json_output:
        print_json({"path": str(store.path), "tokens": [r.document() for r in records]})
        return
    if not records:
        sys.stdout.write(f"no tokens in {store.path} (`assay token add NAME` makes one)\n")
        return
    width = max(len(r.name) for r in records)
    sys.stdout.write(f"{'NAME':<{width}}  CREATED\n")
    for record in records:
        sys.stdout.write(f"{record.name:<{width}}  {record.created}\n")


@app.command()
def remove(name: NameArgument, json_output: JsonFlag = False) -> None:
    """Remove the token NAME: it stops working at once, and its logins with it.

    Exit 2: no token NAME, or the token file cannot be used.
    """
    from assay.web.tokens import TokenError, TokenStore

    try:
        record = TokenStore().remove(name)
    except TokenError as exc:
        fail(str(exc))
    if json_output:
        print_json({"removed": record.document()})
        return
    sys.stdout.write(f"removed token {record.name!r}\n")
