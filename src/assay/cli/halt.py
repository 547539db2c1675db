"""``assay halt arm | check | attest | rearm``: seed 002's halt-state commands.

Output is JSON on stdout (``--json`` is the default; ``--pretty`` indents by 2). Exit codes:
0 success, or a fired warn/log halt; 1 a fired block halt, or any failure named in
``violations``; 2 an invocation error (bad flags, a dispatch id that is not a safe file name).

A coder calls ``assay halt check`` in the middle of its turn, so this path is parsed with the
standard library's argparse rather than typer (typer alone would add about 20 ms to every
call), and ``check``, ``attest`` and ``rearm`` import no pydantic, SQLAlchemy, rich or YAML:
the state file is validated by hand (:mod:`assay.core.halts`). Only ``arm``, which reads the
contract's YAML, and journaling into a ledger found beside the state folder pay for more.

Inside a run's sandbox (``$ASSAY_HALT_RELAY`` set) the state file is the engine's and out of
reach: ``check`` sends its query or fire to the engine's relay, which acts on the state file of
the dispatch its socket serves and answers with the document and exit code printed here;
``arm``, ``attest`` and ``rearm`` write nothing there and say so (exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

TYPE_CHECKING = False  # typing is an import `assay halt check` does without (assay.core.frozen)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

HELP = (
    "Arm, check, fire, attest and re-arm a dispatch's halts (exit 0 ok, 1 halt/failure, 2 usage)."
)

EPILOG = """exit codes:
  0  armed; queried; a warn/log halt fired; attested with no block halt fired
  1  a block halt fired (halt and surface), or a failure named in "violations"
  2  invocation error (unknown flag, missing flag, bad dispatch id)

state dir: --state-dir, else $ASSAY_HALT_STATE_DIR, else .assay/halt-state
in a run: with $ASSAY_HALT_RELAY set (inside a coder's sandbox), `check` asks the engine,
which acts on its own state file for the run's dispatch; arm, attest and rearm write nothing"""

_ID_RULE = "1-128 characters from [A-Za-z0-9._-], starting with a letter or digit"


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, told the terminal's width so that it does not import shutil.

    argparse builds a formatter for every ``add_argument`` (to check its metavar), and each
    asks :func:`shutil.get_terminal_size` when not given a width; :mod:`shutil` and the
    compression modules it imports are a measurable part of ``assay halt check``'s start.
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        chosen = _help_width() if width is None else width
        super().__init__(prog, indent_increment, max_help_position, chosen)


def _help_width() -> int:
    """What argparse would choose: ``shutil.get_terminal_size().columns - 2``."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


def _dispatch_id(value: str) -> str:
    from assay.adapters.store.halt_files import valid_dispatch_id

    if not valid_dispatch_id(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a dispatch id: use {_ID_RULE}")
    return value


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``assay halt`` parser and its subcommands' parsers (to report their usage errors)."""
    root = argparse.ArgumentParser(
        prog="assay halt",
        description=HELP,
        epilog=EPILOG,
        formatter_class=_Formatter,
        allow_abbrev=False,
    )
    commands = root.add_subparsers(dest="command", metavar="{arm,check,attest,rearm}")
    commands.required = True

    def command(name: str, summary: str, details: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name,
            help=summary,
            description=f"{summary}\n\n{details}",
            epilog=EPILOG,
            formatter_class=_Formatter,
            allow_abbrev=False,
        )
        sub.add_argument(
            "--dispatch-id",
            required=True,
            type=_dispatch_id,
            help=f"the dispatch; its state file is <state-dir>/<id>.json ({_ID_RULE})",
        )
        sub.add_argument("--state-dir", help="where state files live (see below)")
        sub.add_argument(
            "--json", action="store_true", help="machine-readable JSON output (the default)"
        )
        sub.add_argument("--pretty", action="store_true", help="pretty-print the JSON (indent 2)")
        return sub

    arm = command(
        "arm",
        "Arm every halt the contract's `halt_classes:` declares.",
        "All seven canonical halts are required (a canonical severity may be raised, never\n"
        "lowered). Writes <state-dir>/<dispatch-id>.json with every halt ARMED, and refuses\n"
        "(exit 1, halt-state-already-armed) when it exists: overwriting could erase a FIRED halt.",
    )
    arm.add_argument("--contract", required=True, type=Path, help="the dispatch contract YAML")

    check = command(
        "check",
        "Query a halt (ARMED -> CHECKED, idempotent after) or fire it with evidence.",
        "A fired block halt exits 1 (halt and surface); a fired warn/log halt exits 0 with\n"
        "`warnings`. A FIRED block halt is sticky: firing it again is rejected until an\n"
        "operator re-arms it (`assay halt rearm`).",
    )
    check.add_argument("--condition", required=True, help="the halt class, e.g. halt-scope-breach")
    check.add_argument("--fire", action="store_true", help="fire the halt (needs --evidence)")
    check.add_argument(
        "--evidence", help="why the halt fires; mandatory with --fire, refused without it"
    )

    command(
        "attest",
        "Closure: take every halt of the dispatch to ATTESTED; nothing moves after that.",
        "Exits 1 when a block halt had fired during the dispatch, else 0.",
    )

    rearm = command(
        "rearm",
        "Take a CHECKED or FIRED halt back to ARMED, with evidence of the remedy.",
        "Keeps the original armed_at and appends what it clears to the halt's `history`;\n"
        "the file is then written as schema 1.1.0.",
    )
    rearm.add_argument("--condition", required=True, help="the halt class to re-arm")
    rearm.add_argument("--evidence", help="evidence that the cause was remedied (required)")
    return root, {"arm": arm, "check": check, "rearm": rearm}


def options_by_command() -> dict[str, dict[str, bool]]:
    """Each subcommand's long options, each with whether it takes a value (what a shell
    completes after ``assay halt``), read from the parser itself."""
    root, _ = _parser()
    table: dict[str, dict[str, bool]] = {}
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, parser in action.choices.items():
                table[name] = {
                    option: option_action.nargs != 0
                    for option_action in parser._actions
                    for option in option_action.option_strings
                    if option.startswith("--")
                }
    return table


def run(argv: Sequence[str]) -> int:
    """Parse ``argv`` (what follows ``assay halt``), act, print JSON, return the exit code."""
    root, commands = _parser()
    args = root.parse_args(list(argv))
    if args.command == "check" and args.evidence is not None and not args.fire:
        # A query records nothing, so evidence given to it would be silently lost: the caller
        # almost certainly meant to fire the halt.
        commands["check"].error(
            "--evidence needs --fire: a query records no evidence (add --fire to fire the "
            "halt with it, or drop --evidence to query the halt)"
        )
    from assay.adapters.store import halt_files
    from assay.adapters.store.halt_relay_client import RELAY_ENV

    state_dir = halt_files.resolve_state_dir(args.state_dir)
    relay = os.environ.get(RELAY_ENV)
    outcome: tuple[dict[str, Any], int]
    if relay:  # inside a run's sandbox: the state is the engine's, whatever --state-dir says
        outcome = _in_a_dispatch(args, relay, state_dir)
    else:
        outcome = _on_the_state_file(args, state_dir)
    document, code = outcome
    sys.stdout.write(json.dumps(document, indent=2 if args.pretty else None) + "\n")
    sys.stdout.flush()
    return code


def _hide_home(state_dir: Path) -> None:
    """A state folder in assay's home (``.assay/halt-state``, the default) that arming created
    inside a repository is hidden from its ``git status``, as every command that creates the
    home does. Best effort: arming never fails for it."""
    from assay.adapters.store.names import DEFAULT_HOME

    home = state_dir.parent
    if home.name != DEFAULT_HOME:
        return
    import contextlib

    from assay.adapters import git
    from assay.adapters.home import make_home

    with contextlib.suppress(git.GitError, OSError):
        make_home(git.repo_root(home.parent), home)


def _on_the_state_file(args: argparse.Namespace, state_dir: Path) -> tuple[dict[str, Any], int]:
    """The command acting on the state file itself: the operator's, or the engine's own."""
    from assay.adapters.store import halt_ops

    if args.command == "arm":
        armed = halt_ops.arm(args.contract, args.dispatch_id, state_dir)
        if state_dir.exists():
            _hide_home(state_dir)
        return armed
    if args.command == "check":
        outcome = halt_ops.check(
            args.dispatch_id, args.condition, state_dir, fire=args.fire, evidence=args.evidence
        )
        fired = outcome[0].get("current_state") if outcome[0].get("fired") is True else None
        if isinstance(fired, dict):  # journaled in a ledger beside the state folder, if any
            from assay.adapters.store.halt_journal import journal_fired

            journal_fired(state_dir, args.dispatch_id, fired)
        return outcome
    if args.command == "rearm":
        outcome = halt_ops.rearm(
            args.dispatch_id, args.condition, state_dir, evidence=args.evidence
        )
        if outcome[1] == 0:  # an operator's move: the ledger says who re-armed it (best effort)
            from assay.adapters.actor import cli_actor
            from assay.adapters.store.halt_journal import journal_rearmed

            actor = cli_actor()
            journal_rearmed(
                state_dir,
                args.dispatch_id,
                args.condition,
                args.evidence,
                by=actor.by,
                via=actor.via.value,
            )
        return outcome
    return halt_ops.attest(args.dispatch_id, state_dir)


def _in_a_dispatch(
    args: argparse.Namespace, relay: str, state_dir: Path
) -> tuple[dict[str, Any], int]:
    """The command inside a coder's sandbox (``$ASSAY_HALT_RELAY`` set): a check goes to the
    engine's relay, which acts on its own state file for the dispatch the socket serves and
    answers with the document to print; arming, attesting and re-arming are the operator's
    and the engine's, so they change nothing here."""
    from assay.adapters.store.halt_files import state_path
    from assay.adapters.store.halt_relay_client import RELAY_ENV
    from assay.core.halts import Violation
    from assay.core.vocab import ArmHalt, CheckHalt

    path = str(state_path(state_dir, args.dispatch_id))
    if args.command == "check":
        from assay.adapters.store.halt_relay_client import call_relay, check_request

        request = check_request(
            args.dispatch_id, args.condition, fire=args.fire, evidence=args.evidence
        )
        answer = call_relay(relay, request)
        if not isinstance(answer, str):
            document, code, warning = answer
            if warning:  # the engine holds the firing; the exit code stays seed 002's
                sys.stderr.write(f"assay halt: warning: {warning}\n")
            return document, code
        failure = Violation(halt_class=CheckHalt.RELAY_FAILURE.value, detail=answer)
        base = {"checked": False, "fired": False, "dispatch_id": args.dispatch_id}
        return {
            **base,
            "condition": args.condition,
            "state_file": path,
            "violations": [failure.to_json()],
            "warnings": [],
        }, 1
    why = (
        f"inside a run's sandbox (${RELAY_ENV} is set) the halt state is the engine's: "
        f"`assay halt {args.command}` is for the operator, outside it; nothing was written"
    )
    if args.command == "arm":
        refused = Violation(halt_class=ArmHalt.STATE_FILE_WRITE_FAILURE.value, detail=why)
        return {
            "armed": False,
            "dispatch_id": args.dispatch_id,
            "contract_path": str(args.contract.absolute()),
            "violations": [refused.to_json()],
        }, 1
    refused = Violation(halt_class=CheckHalt.STATE_FILE_WRITE_FAILURE.value, detail=why)
    failed = [refused.to_json()]
    if args.command == "attest":  # the shapes halt_ops's own failures have
        document = {"dispatch_id": args.dispatch_id, "state_file": path, "attested": False}
    else:
        document = {"rearmed": False, "dispatch_id": args.dispatch_id}
        document |= {"condition": args.condition, "state_file": path}
    return {**document, "violations": failed, "warnings": []}, 1
