"""One sweep of what only a real ``assay`` process proves about its JSON: its stdout is the
documents and nothing else (no coder's or validator's output leaks onto it through an
inherited descriptor, no stray line), each valid against the published schema. One ``assay
run --events jsonl --json`` (a coder and a validator run under it) covers the events and the
payload; each command's document is validated in-process by tests/unit/cli/test_json_schema.py.
The Temporal pair (a dev server's announcement, a worker's ready line) are processes of their
own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from support.repo import ASSAY, make_repo

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "schemas" / "cli.schema.json").read_text(encoding="utf-8"))
PAYLOAD_SCHEMA = json.loads((ROOT / "schemas" / "payload.schema.json").read_text(encoding="utf-8"))
REGISTRY: Registry[Any] = Registry().with_resources(
    (s["$id"], Resource.from_contents(s, default_specification=DRAFT202012))
    for s in (SCHEMA, PAYLOAD_SCHEMA)
)


def valid(name: str, document: object) -> None:
    """``document`` is a valid ``#/$defs/<name>``; the failure names the path that is not."""
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"{SCHEMA['$id']}#/$defs/{name}"}, registry=REGISTRY
    )
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def test_a_run_s_stdout_is_its_events_then_its_payload_and_nothing_else(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    # Both the coder and the validator print: neither line may reach assay's stdout (each line
    # of it must be one JSON document; the events may quote the validator's output).
    fix = repo.put("fixed.py", "src/slug.py")
    contract = repo.contract(
        "loud.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: replay, steps: [{{script: "echo coder-says; {fix}"}}]}}
validators: [{{id: loud, kind: command, run: "echo validator-says"}}]
land: branch
""",
    )
    ran = repo.assay("run", "--contract", str(contract), "--events", "jsonl", "--json")
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert ran.stdout.endswith("\n") and all(line.startswith("{") for line in lines), lines
    *events, payload = [json.loads(line) for line in lines]
    assert {e["kind"] for e in events} >= {"run.opened", "validator.finished", "run.closed"}
    for event in events:
        valid("event", event)
    valid("payload", payload)
    assert payload["attempts"]["total"] == 1 and payload["status"] == "ready"


# -- the Temporal pair: a dev server's announcement, a worker's ready line ------------------


def test_dev_server_and_worker_lines(tmp_path: Path) -> None:
    from support.postgres import create_database, drop_database
    from support.temporal import free_port, require_binary

    require_binary()
    repo = make_repo(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    server = subprocess.Popen(
        [str(ASSAY), "dev-server", "--port", str(free_port()), "--json"],
        cwd=repo.root,
        env={**env, "ASSAY_HOME": str(tmp_path / "home")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    database = None
    worker = None
    try:
        assert server.stdout is not None
        announced = json.loads(server.stdout.readline() or "null")
        valid("dev_server", announced)
        database = create_database()
        worker = subprocess.Popen(
            [str(ASSAY), "worker", "--temporal", announced["address"], "--json"],
            cwd=repo.root,
            env={**env, "ASSAY_DATABASE_URL": database},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line, worker.communicate(timeout=30)
        valid("worker_line", json.loads(line))
    finally:
        for proc in (worker, server):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
        if database is not None:
            drop_database(database)
