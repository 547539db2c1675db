"""``assay halt arm | check | attest | rearm``: seed 002's halt-state commands.

Output is JSON on stdout (``--json`` is the default; ``--pretty`` indents by 2). Exit codes:
0 success, or a fired warn/log halt; 1 a fired block halt, or any failure named in
``violations``; 2 an invocation error (bad flags, a dispatch id that is not a safe file name).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from assay.adapters.store import halt_files, halt_ops

app = typer.Typer(
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _dispatch_id(value: str) -> str:
    if not halt_files.valid_dispatch_id(value):
        raise typer.BadParameter(
            f"{value!r} is not a dispatch id: use 1-128 characters from [A-Za-z0-9._-], "
            "starting with a letter or digit"
        )
    return value


DispatchId = Annotated[
    str,
    typer.Option(
        "--dispatch-id",
        help="The dispatch whose halts to use; the state file is <state-dir>/<id>.json.",
        callback=_dispatch_id,
    ),
]
StateDir = Annotated[
    str | None,
    typer.Option(
        "--state-dir",
        help="Where state files live. Default: $ASSAY_HALT_STATE_DIR, else .assay/halt-state.",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output (the default).")]
Pretty = Annotated[bool, typer.Option("--pretty", help="Pretty-print the JSON (indent 2).")]
Condition = Annotated[
    str, typer.Option("--condition", help="The halt class name, e.g. halt-scope-breach.")
]


def _emit(outcome: tuple[dict[str, Any], int], pretty: bool) -> None:
    document, code = outcome
    sys.stdout.write(json.dumps(document, indent=2 if pretty else None) + "\n")
    sys.stdout.flush()
    raise typer.Exit(code)


@app.command()
def arm(
    contract: Annotated[
        Path, typer.Option("--contract", help="The dispatch contract YAML with `halt_classes:`.")
    ],
    dispatch_id: DispatchId,
    state_dir: StateDir = None,
    json_output: Json = True,
    pretty: Pretty = False,
) -> None:
    """Arm every halt the contract declares (all seven canonical ones are required).

    Writes <state-dir>/<dispatch-id>.json with every halt ARMED. Refuses (exit 1) when that
    file already exists, since overwriting it could erase a FIRED halt.
    """
    _emit(halt_ops.arm(contract, dispatch_id, halt_files.resolve_state_dir(state_dir)), pretty)


@app.command()
def check(
    dispatch_id: DispatchId,
    condition: Condition,
    fire: Annotated[
        bool, typer.Option("--fire", help="Fire the halt (needs --evidence). Block halts exit 1.")
    ] = False,
    evidence: Annotated[
        str | None, typer.Option("--evidence", help="Why the halt fires; mandatory with --fire.")
    ] = None,
    state_dir: StateDir = None,
    json_output: Json = True,
    pretty: Pretty = False,
) -> None:
    """Query a halt (ARMED -> CHECKED, idempotent after) or fire it with evidence.

    Exit 0: queried, or a warn/log halt fired. Exit 1: a block halt fired (halt and surface),
    or the request failed (see `violations`). A FIRED block halt is sticky until re-armed.
    """
    outcome = halt_ops.check(
        dispatch_id,
        condition,
        halt_files.resolve_state_dir(state_dir),
        fire=fire,
        evidence=evidence,
    )
    _emit(outcome, pretty)


@app.command()
def attest(
    dispatch_id: DispatchId,
    state_dir: StateDir = None,
    json_output: Json = True,
    pretty: Pretty = False,
) -> None:
    """Closure: take every halt of the dispatch to ATTESTED; nothing moves after that.

    Exit 1 when a block halt had fired during the dispatch, else 0.
    """
    _emit(halt_ops.attest(dispatch_id, halt_files.resolve_state_dir(state_dir)), pretty)


@app.command()
def rearm(
    dispatch_id: DispatchId,
    condition: Condition,
    evidence: Annotated[
        str | None,
        typer.Option("--evidence", help="Evidence that the cause was remedied (required)."),
    ] = None,
    state_dir: StateDir = None,
    json_output: Json = True,
    pretty: Pretty = False,
) -> None:
    """Take a CHECKED or FIRED halt back to ARMED, with evidence of the remedy.

    Keeps the original armed_at and appends the firing it clears to the halt's history.
    """
    outcome = halt_ops.rearm(
        dispatch_id, condition, halt_files.resolve_state_dir(state_dir), evidence=evidence
    )
    _emit(outcome, pretty)
