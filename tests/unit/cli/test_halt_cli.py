"""The ``assay halt`` command, run in-process: seed 002's flags, shapes and exit codes.

Setup that is not under test (arming a dispatch before a check, a first fire before a re-fire)
is done through ``halt_ops``; every assertion is on what the command printed, its exit code,
and the files it left. What needs a process of its own is end-to-end: a write that fails on a
file-size limit (tests/e2e/cli/test_halt_write_limits.py) and the commands' imports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.halt_shapes import (
    CHECK_FAILURE_KEYS,
    HALT_KEYS_1_0,
    STATE_KEYS_1_0,
    arm_failure,
    assert_1_0_file,
    check_failure,
    is_utc_timestamp,
    only_violation,
    tree,
)

from assay.core.halts import CANONICAL_HALTS

if TYPE_CHECKING:
    from support.cli_fixtures import Armed, Assay

CANONICAL = [(n.value, s.value) for n, s in CANONICAL_HALTS.items()]
BLOCK = "halt-anchor-resolution-failure"
WARN = "halt-budget-exhausted"
LOG = "halt-task-log"

# --- arm -------------------------------------------------------------------------------------


def test_arm_success_shape_and_file(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    halts = [("halt-task-first", "log"), *CANONICAL, ("halt-task-last", "block")]
    write_contract(tmp_path / "contract.yaml", halts, task="do it")
    ran = assay_main("halt", "arm", "--contract", "contract.yaml", "--dispatch-id", "d-1", "--json")
    assert ran.code == 0, ran
    assert "\n" not in ran.stdout.rstrip("\n"), "default output is one line"
    doc = ran.doc
    state_file = tmp_path / ".assay" / "halt-state" / "d-1.json"
    assert is_utc_timestamp(doc["armed_at"])
    assert doc == {
        "armed": True,
        "dispatch_id": "d-1",
        "contract_path": str(tmp_path / "contract.yaml"),
        "state_file": str(state_file),
        "armed_at": doc["armed_at"],
        "canonical_halt_count": 7,
        "per_dispatch_addition_count": 2,
        "halts_armed": [name for name, _ in halts],
    }
    written = json.loads(state_file.read_text())
    assert_1_0_file(written)
    assert written == {
        "schema_version": "1.0.0",
        "dispatch_id": "d-1",
        "contract_path": str(tmp_path / "contract.yaml"),
        "armed_at": doc["armed_at"],
        "halts": [
            {
                "name": name,
                "severity": severity,
                "lifecycle": "ARMED",
                "evidence": None,
                "armed_at": doc["armed_at"],
                "fired_at": None,
            }
            for name, severity in halts
        ],
        "canonical_halt_count": 7,
        "per_dispatch_addition_count": 2,
    }
    leftovers = [p.name for p in state_file.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_arm_pretty_is_indent_2(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    write_contract(tmp_path / "c.yaml", CANONICAL)
    ran = assay_main("halt", "arm", "--contract", "c.yaml", "--dispatch-id", "p", "--pretty")
    assert ran.code == 0, ran
    assert ran.stdout == json.dumps(ran.doc, indent=2) + "\n"
    assert '\n  "armed": true,\n' in ran.stdout


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"halt_classes: [unclosed\n", "not valid YAML"),
        (b"key: value\n  bad indent: here\n", "not valid YAML"),
        (b"- halt_classes\n- other\n", "list, not a mapping"),
        (b"just a string\n", "str, not a mapping"),
        (b"", "NoneType, not a mapping"),
        (b"\xff\xfe not utf-8", "not UTF-8"),
    ],
)
def test_arm_contract_yaml_malformed(
    assay_main: Assay, tmp_path: Path, content: bytes, needle: str
) -> None:
    contract = tmp_path / "c.yaml"
    contract.write_bytes(content)
    ran = assay_main("halt", "arm", "--contract", str(contract), "--dispatch-id", "d-1")
    detail = arm_failure(ran, contract, "halt-contract-yaml-malformed")
    assert needle in detail
    assert "\n" not in detail
    assert not (tmp_path / ".assay").exists(), "nothing is written for a bad contract"


def test_arm_contract_missing_names_the_os_error(assay_main: Assay, tmp_path: Path) -> None:
    ran = assay_main("halt", "arm", "--contract", "absent.yaml", "--dispatch-id", "d-1")
    detail = arm_failure(ran, tmp_path / "absent.yaml", "halt-contract-yaml-malformed")
    assert "No such file or directory" in detail
    assert "absent.yaml" in detail
    assert not (tmp_path / ".assay").exists()


def test_arm_contract_unreadable_names_the_os_error(assay_main: Assay, tmp_path: Path) -> None:
    # Tests run as root, where chmod 000 does not stop a read; a directory is unreadable as a
    # file for everyone.
    (tmp_path / "contract.yaml").mkdir()
    ran = assay_main("halt", "arm", "--contract", "contract.yaml", "--dispatch-id", "d-1")
    detail = arm_failure(ran, tmp_path / "contract.yaml", "halt-contract-yaml-malformed")
    assert "Is a directory" in detail
    assert not (tmp_path / ".assay").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod-000 file anyway")
def test_arm_contract_chmod_000_names_the_os_error(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    contract = write_contract(tmp_path / "c.yaml", CANONICAL)
    contract.chmod(0)
    ran = assay_main("halt", "arm", "--contract", "c.yaml", "--dispatch-id", "d-1")
    assert "Permission denied" in arm_failure(ran, contract, "halt-contract-yaml-malformed")


@pytest.mark.parametrize(
    "text",
    ["task: no halts here\n", "task: x\nhalt_classes: halt-scope-breach\n", "halt_classes:\n"],
)
def test_arm_halt_classes_missing(assay_main: Assay, tmp_path: Path, text: str) -> None:
    contract = tmp_path / "c.yaml"
    contract.write_text(text)
    ran = assay_main("halt", "arm", "--contract", "c.yaml", "--dispatch-id", "d-1")
    detail = arm_failure(ran, contract, "halt-halt-classes-missing")
    assert detail == "contract has no `halt_classes:` field (or non-list value)"
    assert not (tmp_path / ".assay").exists()


def test_arm_canonical_halt_missing(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    contract = write_contract(tmp_path / "c.yaml", [h for h in CANONICAL if h[0] != WARN])
    ran = assay_main("halt", "arm", "--contract", "c.yaml", "--dispatch-id", "d-1")
    assert WARN in arm_failure(ran, contract, "halt-canonical-halt-incomplete")
    assert not (tmp_path / ".assay").exists()


def test_arm_canonical_halt_lowered(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    halts = [(n, "warn" if n == "halt-secret-exposure" else s) for n, s in CANONICAL]
    contract = write_contract(tmp_path / "c.yaml", halts)
    ran = assay_main("halt", "arm", "--contract", "c.yaml", "--dispatch-id", "d-1")
    detail = arm_failure(ran, contract, "halt-canonical-halt-incomplete")
    assert "halt-secret-exposure" in detail
    assert "lowered" in detail


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("halt-task-own", "fatal"), "fatal"),
        (("halt-scope-breach", "block"), "twice"),
    ],
)
def test_arm_state_construction_failure(
    assay_main: Assay,
    tmp_path: Path,
    write_contract: Callable[..., Path],
    extra: tuple[str, str],
    needle: str,
) -> None:
    contract = write_contract(tmp_path / "c.yaml", [*CANONICAL, extra])
    ran = assay_main("halt", "arm", "--contract", "c.yaml", "--dispatch-id", "d-1")
    detail = arm_failure(ran, contract, "halt-state-construction-failure")
    assert needle in detail
    assert extra[0] in detail
    assert not (tmp_path / ".assay").exists()


def test_arm_state_file_write_failure_under_a_regular_file(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    contract = write_contract(tmp_path / "c.yaml", CANONICAL)
    (tmp_path / "plain").write_text("I am a file\n")
    state_dir = tmp_path / "plain" / "states"
    ran = assay_main(
        "halt", "arm", "--contract", "c.yaml", "--dispatch-id", "d-1", "--state-dir", str(state_dir)
    )
    detail = arm_failure(ran, contract, "halt-state-file-write-failure")
    assert "Not a directory" in detail
    assert str(state_dir / "d-1.json") in detail
    assert (tmp_path / "plain").read_text() == "I am a file\n"


def test_arm_refuses_an_armed_dispatch_and_keeps_its_file(assay_main: Assay, armed: Armed) -> None:
    armed.fire(BLOCK, "found a problem")
    before = armed.state_file.read_bytes()
    ran = assay_main("halt", "arm", "--contract", str(armed.contract), *armed.flags())
    detail = arm_failure(ran, armed.contract, "halt-state-already-armed")
    assert str(armed.state_file) in detail
    assert armed.state_file.read_bytes() == before
    assert armed.halt(BLOCK)["lifecycle"] == "FIRED"


# --- check: success shapes -------------------------------------------------------------------


def test_query_then_repeat_query_then_fire_block(assay_main: Assay, armed: Armed) -> None:
    armed_at = armed.load()["armed_at"]
    first = assay_main("halt", "check", *armed.flags(), "--condition", BLOCK, "--json")
    assert first.code == 0, first
    checked_state = {
        "name": BLOCK,
        "severity": "block",
        "lifecycle": "CHECKED",
        "evidence": None,
        "armed_at": armed_at,
        "fired_at": None,
    }
    expected_query = {
        "checked": True,
        "dispatch_id": armed.dispatch_id,
        "condition": BLOCK,
        "state_file": str(armed.state_file),
        "current_state": checked_state,
        "transition_applied": True,
        "violations": [],
        "warnings": [],
    }
    assert first.doc == expected_query
    assert_1_0_file(armed.load())
    assert armed.halt(BLOCK) == checked_state

    second = assay_main("halt", "check", *armed.flags(), "--condition", BLOCK)
    assert second.code == 0, second
    assert second.doc == {**expected_query, "transition_applied": False}

    fire = assay_main(
        "halt", "check", *armed.flags(), "--condition", BLOCK,
        "--fire", "--evidence", "stale anchor at L42",
    )  # fmt: skip
    assert fire.code == 1, fire
    doc = fire.doc
    fired_at = doc["current_state"]["fired_at"]
    assert is_utc_timestamp(fired_at)
    assert fired_at >= armed_at
    evidence = {"detail": "stale anchor at L42"}
    fired_state = {
        **checked_state,
        "lifecycle": "FIRED",
        "evidence": evidence,
        "fired_at": fired_at,
    }
    assert doc == {
        "fired": True,
        "dispatch_id": armed.dispatch_id,
        "condition": BLOCK,
        "state_file": str(armed.state_file),
        "current_state": fired_state,
        "transition": {
            "from": "CHECKED",
            "to": "FIRED",
            "evidence": evidence,
            "fired_at": fired_at,
        },
        "violations": [{"halt_class": BLOCK, "severity": "block", "detail": "stale anchor at L42"}],
        "warnings": [],
    }
    on_disk = armed.load()
    assert_1_0_file(on_disk)
    assert armed.halt(BLOCK) == fired_state
    # Nothing else moved.
    others = [h for h in on_disk["halts"] if h["name"] != BLOCK]
    assert {h["lifecycle"] for h in others} == {"ARMED"}

    read = assay_main("halt", "check", *armed.flags(), "--condition", BLOCK)
    assert read.code == 0, read
    assert read.doc["current_state"] == fired_state
    assert read.doc["transition_applied"] is False


@pytest.mark.parametrize(("condition", "severity"), [(WARN, "warn"), (LOG, "log")])
def test_fire_warn_or_log_exits_0_with_warnings(
    assay_main: Assay, armed: Armed, condition: str, severity: str
) -> None:
    ran = assay_main(
        "halt", "check", *armed.flags(), "--condition", condition,
        "--fire", "--evidence", "ran out of turns", "--pretty",
    )  # fmt: skip
    assert ran.code == 0, ran
    assert ran.stdout == json.dumps(ran.doc, indent=2) + "\n"
    doc = ran.doc
    assert set(doc) == {
        "fired",
        "dispatch_id",
        "condition",
        "state_file",
        "current_state",
        "transition",
        "violations",
        "warnings",
    }
    assert doc["fired"] is True
    assert doc["current_state"]["severity"] == severity
    assert doc["current_state"]["lifecycle"] == "FIRED"
    assert doc["transition"]["from"] == "ARMED"
    assert doc["transition"]["to"] == "FIRED"
    assert doc["violations"] == []
    assert doc["warnings"] == [
        {"halt_class": condition, "severity": severity, "detail": "ran out of turns"}
    ]
    assert_1_0_file(armed.load())
    assert armed.halt(condition)["evidence"] == {"detail": "ran out of turns"}


# --- check: every failure --------------------------------------------------------------------


def test_check_state_file_missing_without_a_state_dir(assay_main: Assay, tmp_path: Path) -> None:
    ran = assay_main(
        "halt", "check", "--dispatch-id", "ghost", "--condition", BLOCK,
        "--state-dir", "nowhere",
    )  # fmt: skip
    doc = ran.doc
    assert set(doc) == CHECK_FAILURE_KEYS
    assert doc["state_file"] == str(tmp_path / "nowhere" / "ghost.json")
    only_violation(ran, "halt-check-state-file-missing")
    assert list(tmp_path.iterdir()) == [], "a failed check creates nothing"


def test_check_state_file_missing_for_another_dispatch(assay_main: Assay, armed: Armed) -> None:
    ran = assay_main(
        "halt", "check", "--dispatch-id", "other", "--state-dir", str(armed.state_dir),
        "--condition", BLOCK, "--fire", "--evidence", "x",
    )  # fmt: skip
    doc = ran.doc
    assert set(doc) == CHECK_FAILURE_KEYS
    assert "halt arm" in only_violation(ran, "halt-check-state-file-missing")["detail"]
    assert not (armed.state_dir / "other.json").exists()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"schema_version": "1.0.0", "halts": [', "not valid JSON"),
        (None, "schema_version '2.0.0'"),
        (b'["not", "an", "object"]', "not an object"),
    ],
)
def test_check_state_file_malformed_is_left_untouched(
    assay_main: Assay, armed: Armed, content: bytes | None, needle: str
) -> None:
    if content is None:
        doc = armed.load()
        doc["schema_version"] = "2.0.0"
        content = json.dumps(doc).encode()
    armed.state_file.write_bytes(content)
    ran = assay_main(
        "halt", "check", *armed.flags(), "--condition", BLOCK, "--fire", "--evidence", "x"
    )
    doc = check_failure(ran, armed, BLOCK, "halt-check-state-file-malformed")
    assert needle in doc["violations"][0]["detail"]
    assert "current_state" not in doc
    assert armed.state_file.read_bytes() == content


def test_check_condition_not_found(assay_main: Assay, armed: Armed) -> None:
    before = armed.state_file.read_bytes()
    ran = assay_main("halt", "check", *armed.flags(), "--condition", "halt-scope-breech")
    doc = check_failure(ran, armed, "halt-scope-breech", "halt-check-condition-not-found")
    detail = doc["violations"][0]["detail"]
    assert "halt-scope-breech" in detail
    assert "halt-scope-breach" in detail  # the armed names are listed
    assert "current_state" not in doc
    assert armed.state_file.read_bytes() == before


def test_check_state_construction_failure(assay_main: Assay, armed: Armed) -> None:
    doc = armed.load()
    doc["halts"][3]["severity"] = "catastrophic"
    armed.state_file.write_text(json.dumps(doc))
    before = armed.state_file.read_bytes()
    ran = assay_main("halt", "check", *armed.flags(), "--condition", BLOCK)
    out = check_failure(ran, armed, BLOCK, "halt-check-state-construction-failure")
    assert out["violations"][0]["detail"].startswith("halts[3].severity")
    assert armed.state_file.read_bytes() == before


def test_check_sticky_rejection(assay_main: Assay, armed: Armed) -> None:
    armed.fire(BLOCK, "first cause")
    before = armed.state_file.read_bytes()
    ran = assay_main(
        "halt", "check", *armed.flags(), "--condition", BLOCK, "--fire", "--evidence", "second"
    )
    doc = check_failure(ran, armed, BLOCK, "halt-check-sticky-rejection")
    assert "sticky" in doc["violations"][0]["detail"]
    assert doc["current_state"]["lifecycle"] == "FIRED"
    assert doc["current_state"]["evidence"] == {"detail": "first cause"}
    assert set(doc["current_state"]) == HALT_KEYS_1_0
    assert armed.state_file.read_bytes() == before


def test_check_transition_rejected_on_refire_of_a_warn_halt(
    assay_main: Assay, armed: Armed
) -> None:
    armed.fire(WARN, "first")
    before = armed.state_file.read_bytes()
    ran = assay_main(
        "halt", "check", *armed.flags(), "--condition", WARN, "--fire", "--evidence", "again"
    )
    doc = check_failure(ran, armed, WARN, "halt-check-transition-rejected")
    assert doc["current_state"]["evidence"] == {"detail": "first"}
    assert armed.state_file.read_bytes() == before


def test_check_transition_rejected_on_an_unknown_lifecycle_in_the_file(
    assay_main: Assay, armed: Armed
) -> None:
    doc = armed.load()
    doc["halts"][0]["lifecycle"] = "DECLARED"  # a valid token, but never armed
    armed.state_file.write_text(json.dumps(doc))
    ran = assay_main("halt", "check", *armed.flags(), "--condition", BLOCK)
    out = check_failure(ran, armed, BLOCK, "halt-check-transition-rejected")
    assert out["current_state"]["lifecycle"] == "DECLARED"


@pytest.mark.parametrize("evidence", [None, "", "   "])
def test_check_fire_evidence_missing(assay_main: Assay, armed: Armed, evidence: str | None) -> None:
    before = armed.state_file.read_bytes()
    extra = [] if evidence is None else ["--evidence", evidence]
    ran = assay_main("halt", "check", *armed.flags(), "--condition", BLOCK, "--fire", *extra)
    doc = check_failure(ran, armed, BLOCK, "halt-check-fire-evidence-missing")
    assert doc["current_state"]["lifecycle"] == "ARMED"
    assert armed.state_file.read_bytes() == before


# --- invocation errors -----------------------------------------------------------------------


SEED_FLAGS = ["--dispatch-id", "--state-dir", "--json", "--pretty", "-h, --help"]


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        ([], ["halt"]),
        (["halt"], ["arm", "check", "attest", "rearm"]),
        (["halt", "arm"], ["--contract", *SEED_FLAGS]),
        (["halt", "check"], ["--condition", "--fire", "--evidence", *SEED_FLAGS]),
        (["halt", "attest"], SEED_FLAGS),
        (["halt", "rearm"], ["--condition", "--evidence", *SEED_FLAGS]),
    ],
)
def test_help(assay_main: Assay, tmp_path: Path, command: list[str], flags: list[str]) -> None:
    ran = assay_main(*command, "-h")
    assert ran.code == 0, ran
    assert ran.stdout.lower().startswith(" ".join(["usage: assay", *command]))
    for flag in flags:
        assert flag in ran.stdout, flag
    assert list(tmp_path.iterdir()) == []


def test_long_help_is_the_same(assay_main: Assay) -> None:
    assert assay_main("halt", "check", "--help").stdout == assay_main("halt", "check", "-h").stdout


BAD_IDS = ["../evil", "a/b", "", "-x", "a" * 129]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_arm_rejects_a_bad_dispatch_id_and_creates_nothing(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path], bad: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write_contract(work / "c.yaml", CANONICAL)
    before = tree(tmp_path)
    ran = assay_main("halt", "arm", "--contract", "c.yaml", "--dispatch-id", bad, cwd=work)
    assert ran.code == 2, ran
    assert ran.stdout == ""
    assert "dispatch" in ran.stderr
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("sub", "bad"),
    [("check", "../evil"), ("check", "a/b"), ("attest", "../d-1"), ("rearm", "x" * 129)],
)
def test_other_commands_reject_a_bad_dispatch_id(
    assay_main: Assay, tmp_path: Path, armed: Armed, sub: str, bad: str
) -> None:
    before = tree(tmp_path)
    args = ["--dispatch-id", bad, "--state-dir", str(armed.state_dir)]
    if sub != "attest":
        args += ["--condition", BLOCK, "--evidence", "x"]
    ran = assay_main("halt", sub, *args)
    assert ran.code == 2, ran
    assert ran.stdout == ""
    assert tree(tmp_path) == before


def test_missing_required_flag_is_an_invocation_error(assay_main: Assay, armed: Armed) -> None:
    ran = assay_main("halt", "check", *armed.flags())
    assert ran.code == 2, ran
    assert "--condition" in ran.stderr
    unknown = assay_main("halt", "check", *armed.flags(), "--condition", BLOCK, "--frobnicate")
    assert unknown.code == 2, unknown
    assert armed.halt(BLOCK)["lifecycle"] == "ARMED"


@pytest.mark.parametrize("evidence", ["stale anchor at L42", "", "   "])
@pytest.mark.parametrize("start", ["ARMED", "CHECKED"])
def test_evidence_without_fire_is_refused_and_nothing_moves(
    assay_main: Assay, tmp_path: Path, armed: Armed, evidence: str, start: str
) -> None:
    if start == "CHECKED":
        assert assay_main("halt", "check", *armed.flags(), "--condition", BLOCK).code == 0
    before = tree(tmp_path)
    ran = assay_main("halt", "check", *armed.flags(), "--condition", BLOCK, "--evidence", evidence)
    assert ran.code == 2, ran
    assert ran.stdout == ""
    error = [line for line in ran.stderr.splitlines() if "error:" in line]
    assert error == [
        "assay halt check: error: --evidence needs --fire: a query records no evidence (add "
        "--fire to fire the halt with it, or drop --evidence to query the halt)"
    ]
    assert tree(tmp_path) == before  # not even the ARMED -> CHECKED query happened
    assert armed.halt(BLOCK)["lifecycle"] == start


def test_evidence_with_fire_in_either_order_still_fires(assay_main: Assay, armed: Armed) -> None:
    ran = assay_main(
        "halt", "check", *armed.flags(), "--evidence", "why", "--condition", WARN, "--fire"
    )
    assert ran.code == 0, ran
    assert ran.doc["fired"] is True
    assert armed.halt(WARN)["evidence"] == {"detail": "why"}


# --- state dir precedence --------------------------------------------------------------------


def test_state_dir_precedence(
    assay_main: Assay, tmp_path: Path, write_contract: Callable[..., Path]
) -> None:
    write_contract(tmp_path / "c.yaml", CANONICAL)
    env = {"ASSAY_HALT_STATE_DIR": str(tmp_path / "from-env")}

    by_flag = assay_main(
        "halt", "arm", "--contract", "c.yaml", "--dispatch-id", "one",
        "--state-dir", "from-flag", env=env,
    )  # fmt: skip
    assert by_flag.code == 0, by_flag
    assert by_flag.doc["state_file"] == str(tmp_path / "from-flag" / "one.json")
    assert (tmp_path / "from-flag" / "one.json").is_file()
    assert not (tmp_path / "from-env").exists()

    by_env = assay_main("halt", "arm", "--contract", "c.yaml", "--dispatch-id", "two", env=env)
    assert by_env.code == 0, by_env
    assert by_env.doc["state_file"] == str(tmp_path / "from-env" / "two.json")
    assert (tmp_path / "from-env" / "two.json").is_file()

    sub = tmp_path / "sub"
    sub.mkdir()
    by_default = assay_main(
        "halt", "arm", "--contract", str(tmp_path / "c.yaml"), "--dispatch-id", "three", cwd=sub
    )
    assert by_default.code == 0, by_default
    default_file = sub / ".assay" / "halt-state" / "three.json"
    assert by_default.doc["state_file"] == str(default_file)
    assert default_file.is_file()
    assert not (tmp_path / ".assay").exists()

    # check reads the same place arm wrote to.
    queried = assay_main("halt", "check", "--dispatch-id", "two", "--condition", BLOCK, env=env)
    assert queried.code == 0, queried
    assert queried.doc["state_file"] == str(tmp_path / "from-env" / "two.json")


# --- attest ----------------------------------------------------------------------------------


def test_attest_after_a_block_fire_exits_1_and_freezes_everything(
    assay_main: Assay, armed: Armed
) -> None:
    armed.fire(BLOCK, "secret in diff")
    armed.fire(WARN, "out of turns")
    ran = assay_main("halt", "attest", *armed.flags())
    assert ran.code == 1, ran
    doc = ran.doc
    attested_at = doc["attested_at"]
    assert is_utc_timestamp(attested_at)
    on_disk = armed.load()
    assert doc == {
        "attested": True,
        "dispatch_id": armed.dispatch_id,
        "state_file": str(armed.state_file),
        "attested_at": attested_at,
        "halts": on_disk["halts"],
        "fired": [BLOCK, WARN],
        "violations": [{"halt_class": BLOCK, "severity": "block", "detail": "secret in diff"}],
        "warnings": [{"halt_class": WARN, "severity": "warn", "detail": "out of turns"}],
    }
    assert on_disk["schema_version"] == "1.1.0"
    assert set(on_disk) == STATE_KEYS_1_0
    for halt in on_disk["halts"]:
        assert halt["lifecycle"] == "ATTESTED"
        assert halt["attested_at"] == attested_at
        assert set(halt) == HALT_KEYS_1_0 | {"attested_at"}
    assert armed.halt(BLOCK)["evidence"] == {"detail": "secret in diff"}
    assert armed.halt(BLOCK)["fired_at"] is not None
    assert armed.halt("halt-scope-breach")["fired_at"] is None

    frozen = armed.state_file.read_bytes()
    refire = assay_main(
        "halt", "check", *armed.flags(), "--condition", "halt-scope-breach",
        "--fire", "--evidence", "too late",
    )  # fmt: skip
    out = check_failure(refire, armed, "halt-scope-breach", "halt-check-transition-rejected")
    assert out["current_state"]["lifecycle"] == "ATTESTED"
    rearm = assay_main("halt", "rearm", *armed.flags(), "--condition", BLOCK, "--evidence", "fixed")
    assert rearm.code == 1, rearm
    assert rearm.doc["violations"][0]["halt_class"] == "halt-check-transition-rejected"
    again = assay_main("halt", "attest", *armed.flags())
    assert again.code == 1, again
    assert again.doc["attested_at"] == attested_at
    assert armed.state_file.read_bytes() == frozen


@pytest.mark.parametrize("fire", [None, WARN, LOG])
def test_attest_without_a_block_fire_exits_0(
    assay_main: Assay, armed: Armed, fire: str | None
) -> None:
    if fire:
        armed.fire(fire, "noted")
    ran = assay_main("halt", "attest", *armed.flags(), "--pretty")
    assert ran.code == 0, ran
    assert ran.stdout == json.dumps(ran.doc, indent=2) + "\n"
    doc = ran.doc
    assert doc["attested"] is True
    assert doc["violations"] == []
    assert doc["fired"] == ([fire] if fire else [])
    assert len(doc["warnings"]) == (1 if fire else 0)
    on_disk = armed.load()
    assert on_disk["schema_version"] == "1.1.0"
    assert {h["lifecycle"] for h in on_disk["halts"]} == {"ATTESTED"}


def test_attest_a_missing_dispatch(assay_main: Assay, armed: Armed) -> None:
    ran = assay_main("halt", "attest", "--dispatch-id", "nope", "--state-dir", str(armed.state_dir))
    assert ran.code == 1, ran
    assert ran.doc["attested"] is False
    only_violation(ran, "halt-check-state-file-missing")


# --- rearm -----------------------------------------------------------------------------------


def test_rearm_a_fired_block_halt_then_fire_again(assay_main: Assay, armed: Armed) -> None:
    armed.fire(BLOCK, "stale anchor")
    fired = armed.halt(BLOCK)
    ran = assay_main(
        "halt", "rearm", *armed.flags(), "--condition", BLOCK, "--evidence", "anchor fixed"
    )
    assert ran.code == 0, ran
    doc = ran.doc
    rearmed_at = doc["transition"]["rearmed_at"]
    assert is_utc_timestamp(rearmed_at)
    history = [
        {
            "cleared": "FIRED",
            "cleared_evidence": {"detail": "stale anchor"},
            "cleared_fired_at": fired["fired_at"],
            "rearmed_at": rearmed_at,
            "evidence": {"detail": "anchor fixed"},
        }
    ]
    expected_state = {
        "name": BLOCK,
        "severity": "block",
        "lifecycle": "ARMED",
        "evidence": None,
        "armed_at": fired["armed_at"],
        "fired_at": None,
        "history": history,
    }
    assert doc == {
        "rearmed": True,
        "dispatch_id": armed.dispatch_id,
        "condition": BLOCK,
        "state_file": str(armed.state_file),
        "current_state": expected_state,
        "transition": {
            "from": "FIRED",
            "to": "ARMED",
            "evidence": {"detail": "anchor fixed"},
            "rearmed_at": rearmed_at,
        },
        "violations": [],
        "warnings": [],
    }
    on_disk = armed.load()
    assert on_disk["schema_version"] == "1.1.0"
    assert on_disk["armed_at"] == fired["armed_at"]
    assert armed.halt(BLOCK) == expected_state

    again = assay_main(
        "halt", "check", *armed.flags(), "--condition", BLOCK, "--fire", "--evidence", "stale again"
    )
    assert again.code == 1, again
    assert again.doc["fired"] is True
    assert again.doc["transition"]["from"] == "ARMED"
    after = armed.halt(BLOCK)
    assert after["lifecycle"] == "FIRED"
    assert after["evidence"] == {"detail": "stale again"}
    assert after["history"] == history
    assert after["armed_at"] == fired["armed_at"]


@pytest.mark.parametrize("evidence", [None, " "])
def test_rearm_without_evidence_fails(
    assay_main: Assay, armed: Armed, evidence: str | None
) -> None:
    armed.fire(BLOCK, "cause")
    before = armed.state_file.read_bytes()
    extra = [] if evidence is None else ["--evidence", evidence]
    ran = assay_main("halt", "rearm", *armed.flags(), "--condition", BLOCK, *extra)
    assert ran.code == 1, ran
    doc = ran.doc
    assert doc["rearmed"] is False
    assert "checked" not in doc
    assert "fired" not in doc
    only_violation(ran, "halt-rearm-evidence-missing")
    assert doc["current_state"]["lifecycle"] == "FIRED"
    assert armed.state_file.read_bytes() == before


def test_rearm_an_armed_halt_is_rejected(assay_main: Assay, armed: Armed) -> None:
    before = armed.state_file.read_bytes()
    ran = assay_main("halt", "rearm", *armed.flags(), "--condition", BLOCK, "--evidence", "why")
    assert ran.code == 1, ran
    only_violation(ran, "halt-check-transition-rejected")
    assert armed.state_file.read_bytes() == before
