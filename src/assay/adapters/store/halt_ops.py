"""The halt commands' operations: arm, check (query or fire), attest and re-arm a dispatch.

Each returns the JSON document seed 002 specifies and the exit code that goes with it:
0 success (or a warn/log fire), 1 a fired block halt or any failure. Every
read-modify-write happens under the state file's lock.
"""

from __future__ import annotations

import time
from pathlib import Path

from assay.adapters.store.halt_files import (
    StateFileError,
    locked,
    read_state,
    state_path,
    write_state,
)
from assay.core.halts import HaltState, Rejection, Violation, transition
from assay.core.statefile import HaltStateFile
from assay.core.vocab import ArmHalt, CheckHalt, HaltLifecycle, HaltSeverity

TYPE_CHECKING = False  # typing is an import `assay halt check` does without (assay.core.frozen)
if TYPE_CHECKING:
    from typing import Any

    Outcome = tuple[dict[str, Any], int]


def utc_now() -> str:
    """Now as the state file writes it: ``2026-01-01T00:00:00.000000Z`` (UTC, microseconds).

    From :mod:`time` rather than :mod:`datetime`, whose import ``assay halt check`` skips.
    """
    seconds, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{nanoseconds // 1000:06d}Z"


def arm(contract: Path, dispatch_id: str, state_dir: Path, *, now: str | None = None) -> Outcome:
    contract_path = str(contract.absolute())
    failure: dict[str, Any] = {
        "armed": False,
        "dispatch_id": dispatch_id,
        "contract_path": contract_path,
    }

    def refuse(*violations: Violation) -> Outcome:
        return {**failure, "violations": [v.to_json() for v in violations]}, 1

    loaded = _load_contract(contract)
    if isinstance(loaded, Violation):
        return refuse(loaded)
    from assay.core.arming import arm_halts  # only arming needs it; check must start fast

    at = now or utc_now()
    armed = arm_halts(loaded, at=at)
    if isinstance(armed, list):
        return refuse(*armed)
    state = HaltStateFile(
        dispatch_id=dispatch_id,
        contract_path=contract_path,
        armed_at=at,
        halts=armed.halts,
        canonical_halt_count=armed.canonical_halt_count,
        per_dispatch_addition_count=armed.per_dispatch_addition_count,
    )
    path = state_path(state_dir, dispatch_id)
    try:
        with locked(path, create_dir=True):
            if path.exists():
                return refuse(
                    Violation(
                        halt_class=ArmHalt.STATE_ALREADY_ARMED.value,
                        detail=f"{path} already exists; arming again could erase a FIRED "
                        "halt (use a new dispatch id, or `assay halt rearm`)",
                    )
                )
            write_state(path, state)
    except OSError as exc:
        return refuse(
            Violation(
                halt_class=ArmHalt.STATE_FILE_WRITE_FAILURE.value,
                detail=f"cannot write {path}: {exc.strerror or exc}",
            )
        )
    return {
        "armed": True,
        "dispatch_id": dispatch_id,
        "contract_path": contract_path,
        "state_file": str(path),
        "armed_at": at,
        "canonical_halt_count": state.canonical_halt_count,
        "per_dispatch_addition_count": state.per_dispatch_addition_count,
        "halts_armed": [h.name for h in state.halts],
    }, 0


def check(
    dispatch_id: str,
    condition: str,
    state_dir: Path,
    *,
    fire: bool = False,
    evidence: str | None = None,
    now: str | None = None,
) -> Outcome:
    """Query a halt (ARMED → CHECKED) or, with ``fire``, fire it with evidence."""
    target = HaltLifecycle.FIRED if fire else HaltLifecycle.CHECKED
    return _move_one(dispatch_id, condition, state_dir, target, evidence, now)


def rearm(
    dispatch_id: str,
    condition: str,
    state_dir: Path,
    *,
    evidence: str | None,
    now: str | None = None,
) -> Outcome:
    """Take a CHECKED or FIRED halt back to ARMED, with evidence of the remedy."""
    return _move_one(dispatch_id, condition, state_dir, HaltLifecycle.ARMED, evidence, now)


def attest(dispatch_id: str, state_dir: Path, *, now: str | None = None) -> Outcome:
    """Closure: every halt to ATTESTED; exit 1 when a block halt had fired."""
    path = state_path(state_dir, dispatch_id)
    base: dict[str, Any] = {"dispatch_id": dispatch_id, "state_file": str(path)}
    at = now or utc_now()
    try:
        _require_state_dir(path)
        with locked(path):
            state = read_state(path)
            moved: list[HaltState] = []
            for halt in state.halts:
                result = transition(halt, HaltLifecycle.ATTESTED, at=at)
                if isinstance(result, Rejection):
                    return _failure(base | {"attested": False}, [_as_violation(result)], None)
                moved.append(result.state)
            attested = state.with_halts(tuple(moved))
            if attested != state:
                write_state(path, attested)
    except StateFileError as exc:
        return _failure(base | {"attested": False}, [exc.violation], None)
    except OSError as exc:
        return _failure(base | {"attested": False}, [_write_failure(path, exc)], None)
    fired = [h for h in attested.halts if h.has_fired]
    violations = [_fired_entry(h) for h in fired if h.severity is HaltSeverity.BLOCK]
    warnings = [_fired_entry(h) for h in fired if h.severity is not HaltSeverity.BLOCK]
    return {
        "attested": True,
        **base,
        "attested_at": next((h.attested_at for h in attested.halts if h.attested_at), at),
        "halts": [h.to_json() for h in attested.halts],
        "fired": [h.name for h in fired],
        "violations": violations,
        "warnings": warnings,
    }, (1 if violations else 0)


def _move_one(
    dispatch_id: str,
    condition: str,
    state_dir: Path,
    target: HaltLifecycle,
    evidence: str | None,
    now: str | None,
) -> Outcome:
    path = state_path(state_dir, dispatch_id)
    flag = {HaltLifecycle.FIRED: "fired", HaltLifecycle.ARMED: "rearmed"}.get(target, "checked")
    base: dict[str, Any] = {
        "dispatch_id": dispatch_id,
        "condition": condition,
        "state_file": str(path),
    }
    failed_flags = {"checked": False, "fired": False} if flag != "rearmed" else {"rearmed": False}
    at = now or utc_now()
    current: HaltState | None = None
    try:
        _require_state_dir(path)
        with locked(path):
            state = read_state(path)
            current = state.find(condition)
            if current is None:
                known = ", ".join(h.name for h in state.halts)
                return _failure(
                    failed_flags | base,
                    [
                        Violation(
                            halt_class=CheckHalt.CONDITION_NOT_FOUND.value,
                            detail=f"{condition!r} is not armed in this dispatch (armed: {known})",
                        )
                    ],
                    None,
                )
            result = transition(current, target, at=at, evidence=evidence)
            if isinstance(result, Rejection):
                return _failure(failed_flags | base, [_as_violation(result)], current)
            if result.applied:
                write_state(path, state.with_halt(result.state))
    except StateFileError as exc:
        return _failure(failed_flags | base, [exc.violation], current)
    except OSError as exc:
        return _failure(failed_flags | base, [_write_failure(path, exc)], current)

    after = result.state
    if target is HaltLifecycle.CHECKED:
        return {
            "checked": True,
            **base,
            "current_state": after.to_json(),
            "transition_applied": result.applied,
            "violations": [],
            "warnings": [],
        }, 0
    if target is HaltLifecycle.ARMED:
        return {
            "rearmed": True,
            **base,
            "current_state": after.to_json(),
            "transition": {
                "from": result.previous.value,
                "to": after.lifecycle.value,
                "evidence": after.history[-1].evidence,
                "rearmed_at": at,
            },
            "violations": [],
            "warnings": [],
        }, 0
    entry = _fired_entry(after)
    block = after.severity is HaltSeverity.BLOCK
    return {
        "fired": True,
        **base,
        "current_state": after.to_json(),
        "transition": {
            "from": result.previous.value,
            "to": after.lifecycle.value,
            "evidence": after.evidence,
            "fired_at": after.fired_at,
        },
        "violations": [entry] if block else [],
        "warnings": [] if block else [entry],
    }, (1 if block else 0)


def _require_state_dir(path: Path) -> None:
    # The lock file lives beside the state file; without the directory there is nothing to lock.
    if not path.parent.is_dir():
        read_state(path)


def _load_contract(contract: Path) -> object:
    import yaml  # only arming reads YAML; keep it off the check path

    try:
        text = contract.read_text(encoding="utf-8")
    except OSError as exc:
        return Violation(
            halt_class=ArmHalt.CONTRACT_YAML_MALFORMED.value,
            detail=f"cannot read contract {contract}: {exc.strerror or exc}",
        )
    except UnicodeDecodeError as exc:
        return Violation(
            halt_class=ArmHalt.CONTRACT_YAML_MALFORMED.value,
            detail=f"contract {contract} is not UTF-8 text: {exc}",
        )
    try:
        # The engine arms from the JSON copy it wrote of the run's contract: JSON is YAML,
        # read here by the JSON parser (the pure-Python YAML one takes tens of ms on it).
        loaded: object = _json_or_none(text) if contract.suffix == ".json" else None
        if loaded is None:
            loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return Violation(
            halt_class=ArmHalt.CONTRACT_YAML_MALFORMED.value,
            detail=f"contract {contract} is not valid YAML: {exc}".replace("\n", " "),
        )
    except RecursionError:
        return Violation(
            halt_class=ArmHalt.CONTRACT_YAML_MALFORMED.value,
            detail=f"contract {contract} is nested too deeply",
        )
    if not isinstance(loaded, dict):
        return Violation(
            halt_class=ArmHalt.CONTRACT_YAML_MALFORMED.value,
            detail=f"contract {contract} top level is {type(loaded).__name__}, not a mapping",
        )
    return loaded


def _json_or_none(text: str) -> object:
    """``text`` as JSON when it is a JSON object, else None (YAML then reads it)."""
    import json

    try:
        loaded: object = json.loads(text)
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None


def _failure(
    base: dict[str, Any], violations: list[Violation], current: HaltState | None
) -> Outcome:
    doc: dict[str, Any] = {
        **base,
        "violations": [v.to_json() for v in violations],
        "warnings": [],
    }
    if current is not None:
        doc["current_state"] = current.to_json()
    return doc, 1


def _as_violation(rejection: Rejection) -> Violation:
    return Violation(halt_class=rejection.halt_class.value, detail=rejection.detail)


def _fired_entry(halt: HaltState) -> dict[str, Any]:
    detail = (halt.evidence or {}).get("detail", "")
    return Violation(halt_class=halt.name, detail=detail, severity=halt.severity).to_json()


def _write_failure(path: Path, exc: OSError) -> Violation:
    return Violation(
        halt_class=CheckHalt.STATE_FILE_WRITE_FAILURE.value,
        detail=f"cannot write {path}: {exc.strerror or exc}",
    )
