"""The real ``assay halt`` commands import nothing heavy: no pydantic, SQLAlchemy, rich, YAML.

A coder calls ``assay halt check`` every turn, so its start-up is the interpreter's plus a
little. Each command runs as a subprocess with ``PYTHONPROFILEIMPORTTIME=1``, which makes
Python list every module it imports on stderr; the test reads that list (not a timer, which
would be flaky on a loaded machine). ``halt arm`` parses the contract's YAML and is the
control: it shows the check would see a heavy import.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from assay.adapters.store.halt_relay_client import RELAY_ENV
from assay.engine.local.halt_relay import HaltRelay

if TYPE_CHECKING:
    from conftest import Armed, Assay, Ran

BLOCK = "halt-anchor-resolution-failure"
WARN = "halt-budget-exhausted"
GAP = "halt-verification-gap"

# Packages (and assay modules) that cost the halt path tens of milliseconds each.
HEAVY = (
    "pydantic",
    "pydantic_core",
    "sqlalchemy",
    "rich",
    "yaml",
    "typer",
    "click",
    "httpx",
    "jinja2",
    "fastapi",
    "temporalio",
    "assay.core.contract",
    "assay.core.payload",
    "assay.core.tasks",
    "assay.adapters.store.sql",
    "assay.engine",
    "assay.web",
)
_LINE = re.compile(r"^import time:\s+\d+\s+\|\s+\d+\s+\|(\s*)(\S+)\s*$")
# No ledger from the environment: journaling a fire or re-arm must not open one.
ENV = {"PYTHONPROFILEIMPORTTIME": "1", "ASSAY_DATABASE_URL": ""}


def imported(ran: Ran) -> set[str]:
    """Every module the run imported, from ``-X importtime``'s report on stderr."""
    names = {m.group(2) for line in ran.stderr.splitlines() if (m := _LINE.match(line))}
    assert "assay.cli.main" in names, ran.stderr[-2000:]  # the report was really read
    return names


def heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == h or n.startswith(f"{h}.") for h in HEAVY))


def run_light(assay: Assay, *args: str, code: int, env: dict[str, str] | None = None) -> Ran:
    ran = assay(*args, env={**ENV, **(env or {})})
    assert ran.code == code, ran
    assert heavy(imported(ran)) == [], f"assay {' '.join(args)} imported heavy modules"
    return ran


@pytest.mark.parametrize(
    "args",
    [["halt", "--help"], ["halt", "check", "--help"], ["halt", "rearm", "-h"]],
)
def test_help_is_light(assay: Assay, args: list[str]) -> None:
    ran = run_light(assay, *args, code=0)
    assert ran.stdout.startswith("usage: assay halt")


def test_usage_errors_are_light(assay: Assay, armed: Armed) -> None:
    run_light(assay, "halt", code=2)
    run_light(assay, "halt", "check", "--dispatch-id", "../x", "--condition", BLOCK, code=2)
    run_light(
        assay, "halt", "check", *armed.flags(), "--condition", BLOCK, "--evidence", "x", code=2
    )


def test_a_query_and_its_repeat_are_light(assay: Assay, armed: Armed) -> None:
    first = run_light(assay, "halt", "check", *armed.flags(), "--condition", BLOCK, code=0)
    assert first.doc["transition_applied"] is True
    again = run_light(assay, "halt", "check", *armed.flags(), "--condition", BLOCK, code=0)
    assert again.doc["transition_applied"] is False


def test_firing_is_light_with_and_without_a_relay(assay: Assay, armed: Armed) -> None:
    fire = ["halt", "check", *armed.flags(), "--fire"]
    ran = run_light(assay, *fire, "--condition", BLOCK, "--evidence", "leaked", code=1)
    assert ran.doc["fired"] is True
    # Inside a sandbox: the engine's relay (here one of this process's) does the work.
    relay = HaltRelay(
        dispatch_id=armed.dispatch_id, state_dir=armed.state_dir, armed={}, record=lambda n: None
    )
    socket_path = str(relay.start())
    try:
        env = {RELAY_ENV: socket_path}
        relayed = run_light(
            assay, *fire, "--condition", WARN, "--evidence", "spent", code=0, env=env
        )
        assert relayed.doc["fired"] is True
        assert sorted(set(AVOIDABLE) & imported(relayed)) == []  # no dearer than on the file
    finally:
        relay.close()
    # An engine's relay that is not listening: a failure named in violations, still light.
    gone = {RELAY_ENV: socket_path}
    failed = run_light(assay, *fire, "--condition", GAP, "--evidence", "none", code=1, env=gone)
    assert failed.doc["violations"][0]["halt_class"] == "halt-check-relay-failure"
    assert armed.halt(GAP)["lifecycle"] == "ARMED"  # nothing written by the command itself


def test_rearm_and_attest_are_light(assay: Assay, armed: Armed) -> None:
    armed.fire(BLOCK, "leaked")
    ran = run_light(
        assay, "halt", "rearm", *armed.flags(), "--condition", BLOCK, "--evidence", "rotated",
        code=0,
    )  # fmt: skip
    assert ran.doc["rearmed"] is True
    attested = run_light(assay, "halt", "attest", *armed.flags(), code=0)
    assert attested.doc["attested"] is True


def test_failures_are_light(assay: Assay, armed: Armed) -> None:
    missing = ["--dispatch-id", "nobody", "--state-dir", str(armed.state_dir)]
    ran = run_light(assay, "halt", "check", *missing, "--condition", BLOCK, code=1)
    assert ran.doc["violations"][0]["halt_class"] == "halt-check-state-file-missing"
    armed.state_file.write_text('{"schema_version": "1.0.0", "halts": [{"name": 1}]}')
    run_light(assay, "halt", "attest", *armed.flags(), code=1)


def test_arm_reads_yaml_so_the_check_sees_a_heavy_import(assay: Assay, armed: Armed) -> None:
    ran = assay(
        "halt", "arm", "--contract", str(armed.contract), "--dispatch-id", "d-2",
        "--state-dir", str(armed.state_dir), env=ENV,
    )  # fmt: skip
    assert ran.code == 0, ran
    assert "yaml" in heavy(imported(ran))


# The standard-library modules the query path was measured to spend most of its start on
# beyond the interpreter's own (dataclasses pulls in inspect, ast, dis and tokenize; argparse's
# default formatter pulls in shutil, bz2 and lzma). Without them `assay halt check` is about
# 3x `python -c pass`; with them it missed the 4x target.
AVOIDABLE = ("dataclasses", "inspect", "typing", "shutil", "datetime")


def test_a_query_skips_the_avoidable_standard_modules(assay: Assay, armed: Armed) -> None:
    ran = run_light(assay, "halt", "check", *armed.flags(), "--condition", BLOCK, code=0)
    assert sorted(set(AVOIDABLE) & imported(ran)) == []
