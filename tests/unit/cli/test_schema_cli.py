"""``assay schema`` (in-process): the CLI schema ships with assay, whole or one output's entry at
a time."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from support.in_process import run_assay

ROOT = Path(__file__).resolve().parents[3]
PAYLOAD = json.loads((ROOT / "schemas" / "payload.schema.json").read_text(encoding="utf-8"))


def assay(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    return run_assay(args, cwd=cwd, env=environ)


def test_the_whole_schema_is_the_repository_s(tmp_path: Path) -> None:
    done = assay("schema", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shipped = (ROOT / "schemas" / "cli.schema.json").read_text(encoding="utf-8")
    assert json.loads(done.stdout) == json.loads(shipped)


def test_one_entry_is_a_schema_of_its_own_that_validates_that_output(tmp_path: Path) -> None:
    entry = assay("schema", "version", "--compact", cwd=tmp_path)
    assert entry.returncode == 0, entry.stderr
    assert len(entry.stdout.splitlines()) == 1
    schema = json.loads(entry.stdout)
    version = json.loads(assay("--version", "--json", cwd=tmp_path).stdout)
    jsonschema.Draft202012Validator(schema).validate(version)
    wrong = jsonschema.Draft202012Validator(schema).is_valid({"version": 1})
    assert not wrong
    # An entry that refers to the payload's own schema resolves through its $id.
    payload_entry = json.loads(assay("schema", "payload", cwd=tmp_path).stdout)
    registry = Registry().with_resource(
        PAYLOAD["$id"], Resource.from_contents(PAYLOAD, default_specification=DRAFT202012)
    )
    validator = jsonschema.Draft202012Validator(payload_entry, registry=registry)
    assert not validator.is_valid({"not": "a payload"})


def test_list_names_every_entry_and_bad_names_are_refused(tmp_path: Path) -> None:
    listed = assay("schema", "--list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = json.loads(listed.stdout)
    outputs = {"task_add", "task_show", "task_move", "event", "serve_summary", "contract_check"}
    assert outputs <= set(names)
    assert all(names.values())  # each says which command prints it; vocabularies are not listed
    assert "task_status" not in names
    assert "task show" in names["task_show"]
    unknown = assay("schema", "no_such_output", cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert "no schema entry 'no_such_output'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    both = assay("schema", "--list", "event", cwd=tmp_path)
    assert both.returncode == 2 and "--list" in both.stderr
