"""The shapes seed 002 gives the ``assay halt`` commands' documents and state files, shared by
the tests that run the commands in-process and those that need a process of their own."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from support.cli_fixtures import Armed, Ran

STATE_KEYS_1_0 = {
    "schema_version",
    "dispatch_id",
    "contract_path",
    "armed_at",
    "halts",
    "canonical_halt_count",
    "per_dispatch_addition_count",
}
HALT_KEYS_1_0 = {"name", "severity", "lifecycle", "evidence", "armed_at", "fired_at"}
ARM_FAILURE_KEYS = {"armed", "dispatch_id", "contract_path", "violations"}
CHECK_FAILURE_KEYS = {
    "checked",
    "fired",
    "dispatch_id",
    "condition",
    "state_file",
    "violations",
    "warnings",
}


def is_utc_timestamp(value: object) -> bool:
    if not isinstance(value, str) or not value.endswith("Z"):
        return False
    # A bare "Z" suffix on a full date-time with microseconds, e.g. 2026-01-01T00:00:00.000000Z.
    parsed = datetime.fromisoformat(value.removesuffix("Z") + "+00:00")
    return parsed.utcoffset() == timedelta(0) and len(value) == len("2026-01-01T00:00:00.000000Z")


def assert_1_0_file(doc: dict[str, Any]) -> None:
    """Files written by arm and check have exactly the 1.0.0 keys of seed 002."""
    assert set(doc) == STATE_KEYS_1_0
    assert doc["schema_version"] == "1.0.0"
    for halt in doc["halts"]:
        assert set(halt) == HALT_KEYS_1_0, halt


def only_violation(ran: Ran, halt_class: str) -> dict[str, Any]:
    doc = ran.doc
    assert ran.code == 1, ran
    assert len(doc["violations"]) == 1, doc
    violation = doc["violations"][0]
    assert set(violation) == {"halt_class", "severity", "detail"}
    assert violation["halt_class"] == halt_class, doc
    assert violation["severity"] == "block"
    assert violation["detail"]
    return violation


def check_failure(ran: Ran, armed: Armed, condition: str, halt_class: str) -> dict[str, Any]:
    """Seed 002's check failure shape; ``current_state`` only when the halt was found."""
    doc = ran.doc
    assert set(doc) - {"current_state"} == CHECK_FAILURE_KEYS, doc
    assert doc["checked"] is False
    assert doc["fired"] is False
    assert doc["dispatch_id"] == armed.dispatch_id
    assert doc["condition"] == condition
    assert doc["state_file"] == str(armed.state_file)
    assert doc["warnings"] == []
    only_violation(ran, halt_class)
    return doc


def arm_failure(ran: Ran, contract: Path, halt_class: str, dispatch_id: str = "d-1") -> str:
    doc = ran.doc
    assert set(doc) == ARM_FAILURE_KEYS, doc
    assert doc["armed"] is False
    assert doc["dispatch_id"] == dispatch_id
    assert doc["contract_path"] == str(contract.absolute())
    return str(only_violation(ran, halt_class)["detail"])


def tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }
