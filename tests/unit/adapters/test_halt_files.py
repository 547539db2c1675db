"""Halt state files on disk: atomic writes, the lock, and reading back (strictly)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from assay.adapters.store import halt_files
from assay.adapters.store.halt_files import (
    StateFileError,
    locked,
    read_state,
    resolve_state_dir,
    state_path,
    valid_dispatch_id,
    write_json_atomic,
    write_state,
)
from assay.core.halts import CANONICAL_HALTS

AT = "2026-05-06T07:08:09.000000Z"
MALFORMED = "halt-check-state-file-malformed"
CONSTRUCTION = "halt-check-state-construction-failure"


def document(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": "1.0.0",
        "dispatch_id": "d-1",
        "contract_path": "/abs/contract.yaml",
        "armed_at": AT,
        "halts": [
            {
                "name": name.value,
                "severity": sev.value,
                "lifecycle": "ARMED",
                "evidence": None,
                "armed_at": AT,
                "fired_at": None,
            }
            for name, sev in CANONICAL_HALTS.items()
        ],
        "canonical_halt_count": 7,
        "per_dispatch_addition_count": 0,
    }
    doc.update(overrides)
    return doc


def put(path: Path, content: bytes | str | object) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def read_error(path: Path) -> StateFileError:
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(StateFileError) as info:
        read_state(path)
    after = path.read_bytes() if path.is_file() else None
    assert before == after, "read_state must never modify the file"
    return info.value


# --- writing ---------------------------------------------------------------------------------


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "d-1.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2, "b": [1, 2]})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d-1.json"]
    assert json.loads(target.read_text()) == {"a": 2, "b": [1, 2]}
    assert target.read_text().endswith("}\n")


def test_failed_atomic_write_keeps_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "d-1.json"
    write_json_atomic(target, {"old": True})
    before = target.read_bytes()

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(halt_files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        write_json_atomic(target, {"new": True})
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d-1.json"]


def test_write_state_round_trips(tmp_path: Path) -> None:
    path = put(tmp_path / "d-1.json", document())
    state = read_state(path)
    out = tmp_path / "copy.json"
    write_state(out, state)
    assert json.loads(out.read_text()) == document()
    assert read_state(out) == state


def test_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "d-1.json"
    with locked(path, create_dir=True):
        lock_file = tmp_path / "sub" / ".d-1.json.lock"
        assert lock_file.exists()
        fd = os.open(lock_file, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(lock_file, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
    finally:
        os.close(fd)
    assert not path.exists()


# --- reading ---------------------------------------------------------------------------------


def test_read_state_parses_a_1_0_0_file(tmp_path: Path) -> None:
    state = read_state(put(tmp_path / "d-1.json", document()))
    assert state.dispatch_id == "d-1"
    assert state.schema_version == "1.0.0"
    assert [h.name for h in state.halts] == [n.value for n in CANONICAL_HALTS]
    assert state.canonical_halt_count == 7


def test_missing_file(tmp_path: Path) -> None:
    error = read_error(tmp_path / "nope.json")
    assert error.violation.halt_class == "halt-check-state-file-missing"
    assert str(tmp_path / "nope.json") in error.violation.detail


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"{not json}", b'{"schema_version": "1.0.0",', b"\xff\xfe\x00garbage"],
)
def test_corrupt_file_is_malformed(tmp_path: Path, content: bytes) -> None:
    error = read_error(put(tmp_path / "d-1.json", content))
    assert error.violation.halt_class == MALFORMED
    assert error.violation.severity.value == "block"


def test_a_directory_in_place_of_the_file_is_malformed(tmp_path: Path) -> None:
    (tmp_path / "d-1.json").mkdir()
    error = read_error(tmp_path / "d-1.json")
    assert error.violation.halt_class == MALFORMED
    assert "Is a directory" in error.violation.detail


@pytest.mark.parametrize("version", ["2.0.0", "0.9.0", "10.0.0", "1.0", "v1.0.0", "", None, 1])
def test_wrong_or_missing_schema_version_is_malformed(tmp_path: Path, version: object) -> None:
    error = read_error(put(tmp_path / "d-1.json", document(schema_version=version)))
    assert error.violation.halt_class == MALFORMED
    assert "schema_version" in error.violation.detail


def test_absent_schema_version_is_malformed(tmp_path: Path) -> None:
    doc = document()
    del doc["schema_version"]
    assert read_error(put(tmp_path / "d-1.json", doc)).violation.halt_class == MALFORMED


@pytest.mark.parametrize("content", [[], [document()], "text", 3, None, True])
def test_non_object_json_is_malformed(tmp_path: Path, content: object) -> None:
    error = read_error(put(tmp_path / "d-1.json", json.dumps(content)))
    assert error.violation.halt_class == MALFORMED
    assert "not an object" in error.violation.detail


@pytest.mark.parametrize("halts", [None, {}, "halts", {"name": "x"}, 7])
def test_halts_not_a_list_is_malformed(tmp_path: Path, halts: object) -> None:
    error = read_error(put(tmp_path / "d-1.json", document(halts=halts)))
    assert error.violation.halt_class == MALFORMED
    assert "halts" in error.violation.detail


def test_halts_missing_is_malformed(tmp_path: Path) -> None:
    doc = document()
    del doc["halts"]
    assert read_error(put(tmp_path / "d-1.json", doc)).violation.halt_class == MALFORMED


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("dispatch_id", None),
        ("contract_path", 3),
        ("armed_at", None),
        ("canonical_halt_count", "7"),
        ("per_dispatch_addition_count", True),
    ],
)
def test_bad_top_level_fields_are_malformed(tmp_path: Path, key: str, value: object) -> None:
    error = read_error(put(tmp_path / "d-1.json", document(**{key: value})))
    assert error.violation.halt_class == MALFORMED
    assert key in error.violation.detail


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("severity", "fatal"),
        ("severity", None),
        ("lifecycle", "EXPLODED"),
        ("armed_at", None),
        ("evidence", "not an object"),
    ],
)
def test_a_bad_halt_entry_is_a_construction_failure(
    tmp_path: Path, field: str, value: object
) -> None:
    doc = document()
    doc["halts"][2][field] = value
    error = read_error(put(tmp_path / "d-1.json", doc))
    assert error.violation.halt_class == CONSTRUCTION
    assert error.violation.detail.startswith("halts[2].")
    assert field in error.violation.detail


def test_a_halt_entry_that_is_not_an_object_is_a_construction_failure(tmp_path: Path) -> None:
    doc = document()
    doc["halts"].append("halt-extra")
    error = read_error(put(tmp_path / "d-1.json", doc))
    assert error.violation.halt_class == CONSTRUCTION
    assert error.violation.detail.startswith("halts[7]")


def test_a_1_1_0_file_is_accepted(tmp_path: Path) -> None:
    doc = document(schema_version="1.1.0")
    doc["halts"][0].update(
        lifecycle="ATTESTED",
        evidence={"detail": "stale anchor"},
        fired_at=AT,
        attested_at=AT,
    )
    doc["halts"][1].update(
        history=[
            {
                "cleared": "FIRED",
                "cleared_evidence": {"detail": "out of scope"},
                "cleared_fired_at": AT,
                "rearmed_at": AT,
                "evidence": {"detail": "reverted"},
            }
        ]
    )
    state = read_state(put(tmp_path / "d-1.json", doc))
    assert state.schema_version == "1.1.0"
    assert state.halts[0].attested_at == AT
    assert state.halts[1].history[0].evidence == {"detail": "reverted"}
    assert state.to_json() == doc


@pytest.mark.parametrize("version", ["1.1.0", "1.9.0", "1.0.7"])
def test_any_1_x_version_is_read(tmp_path: Path, version: str) -> None:
    state = read_state(put(tmp_path / "d-1.json", document(schema_version=version)))
    assert len(state.halts) == 7


# --- names and directories -------------------------------------------------------------------


@pytest.mark.parametrize(
    "dispatch_id",
    ["a", "A9", "0", "run-1.task_2", "a" * 128, "a..b", "x-"],
)
def test_valid_dispatch_ids(dispatch_id: str) -> None:
    assert valid_dispatch_id(dispatch_id)
    assert state_path(Path("/s"), dispatch_id) == Path("/s") / f"{dispatch_id}.json"


@pytest.mark.parametrize(
    "dispatch_id",
    ["", "../evil", "a/b", "-x", ".hidden", "_a", "a" * 129, "a b", "a\n", "é", "a\x00"],
)
def test_invalid_dispatch_ids(dispatch_id: str) -> None:
    assert not valid_dispatch_id(dispatch_id)
    with pytest.raises(ValueError, match="invalid dispatch id"):
        state_path(Path("/s"), dispatch_id)


def test_state_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASSAY_HALT_STATE_DIR", raising=False)
    assert resolve_state_dir(None) == tmp_path / ".assay" / "halt-state"
    monkeypatch.setenv("ASSAY_HALT_STATE_DIR", "from-env")
    assert resolve_state_dir(None) == tmp_path / "from-env"
    assert resolve_state_dir("/abs/flag") == Path("/abs/flag")
    assert resolve_state_dir("rel/flag") == tmp_path / "rel" / "flag"


# --- known defects (see the report that came with these tests) -------------------------------


def test_a_halt_named_twice_in_the_file_is_a_construction_failure(tmp_path: Path) -> None:
    """arm never writes a name twice, so a file that does is corrupt.

    Today read_state accepts it, and a later check rewrites *both* entries with the state of
    the first (HaltStateFile.with_halt replaces by name), silently changing the second entry's
    severity and lifecycle.
    """
    doc = document()
    doc["halts"].append({**doc["halts"][1], "severity": "warn"})
    error = read_error(put(tmp_path / "d-1.json", doc))
    assert error.violation.halt_class == CONSTRUCTION
    assert doc["halts"][1]["name"] in error.violation.detail


def test_check_keeps_what_a_newer_1_x_file_added(tmp_path: Path) -> None:
    from assay.adapters.store import halt_ops

    doc = document(schema_version="1.2.0", note="written by a newer assay")
    doc["halts"][0]["owner"] = "engine"
    put(tmp_path / "d-1.json", doc)
    out, code = halt_ops.check("d-1", "halt-scope-breach", tmp_path)
    assert code == 0, out
    after = json.loads((tmp_path / "d-1.json").read_text())
    assert after["halts"][1]["lifecycle"] == "CHECKED"
    assert after["schema_version"] == "1.2.0"
    assert after["note"] == "written by a newer assay"
    assert after["halts"][0]["owner"] == "engine"
