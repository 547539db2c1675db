"""Every JSON ``assay`` prints validates against its entry in the published schema,
``schemas/cli.schema.json``; every command that prints can print JSON.

The commands run in-process (``Repo.main``) in one repository with one finished run (a module
fixture). That a real process's stdout is that document and nothing else is the one sweep of
tests/e2e/cli/test_json_schema.py.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from support.repo import Repo, make_repo, replay_contract

from assay.core import vocab
from assay.core.halts import CANONICAL_HALTS

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "schemas" / "cli.schema.json").read_text(encoding="utf-8"))
PAYLOAD_SCHEMA = json.loads((ROOT / "schemas" / "payload.schema.json").read_text(encoding="utf-8"))
REGISTRY: Registry[Any] = Registry().with_resources(
    (s["$id"], Resource.from_contents(s, default_specification=DRAFT202012))
    for s in (SCHEMA, PAYLOAD_SCHEMA)
)


def valid(name: str, document: object) -> None:
    """``document`` is a valid ``#/$defs/<name>``; the failure names the path that is not."""
    assert name in SCHEMA["$defs"], f"no $defs entry {name!r}"
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"{SCHEMA['$id']}#/$defs/{name}"}, registry=REGISTRY
    )
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def json_out(ran: subprocess.CompletedProcess[str]) -> Any:
    """stdout as the one JSON document a ``--json`` command prints."""
    assert ran.stdout.strip(), ran.stderr
    return json.loads(ran.stdout)


@dataclass
class Site:
    repo: Repo
    contract: Path
    task_id: str  # done, by one run of `run --json`
    run_id: str
    payload: dict[str, Any]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    repo = make_repo(tmp_path_factory.mktemp("json"))
    contract = replay_contract(repo, "fixed", land="branch")
    ran = repo.main("run", "--contract", str(contract), "--json")
    assert ran.returncode == 0, ran.stderr
    payload = json_out(ran)
    return Site(repo, contract, payload["task_id"], payload["run_id"], payload)


# -- the schema itself --------------------------------------------------------------------


def test_the_schema_is_a_valid_2020_12_schema_and_every_ref_resolves() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    refs: list[str] = []
    stack: list[Any] = [SCHEMA]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            refs += [node["$ref"]] if "$ref" in node else []
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    assert "payload.schema.json" in refs
    for ref in refs:
        if ref.startswith("#/$defs/"):
            assert ref.removeprefix("#/$defs/") in SCHEMA["$defs"], ref


VOCABULARIES = {
    "task_status": vocab.TaskStatus,
    "hold_source": vocab.HoldSource,
    "run_status": vocab.RunStatus,
    "settle_row": vocab.SettleRow,
    "stage_verdict": vocab.StageVerdict,
    "event_kind": vocab.EventKind,
    "operator_move": vocab.OperatorMove,
    "coder_kind": vocab.CoderKind,
    "leftover_kind": vocab.LeftoverKind,
    "halt_severity": vocab.HaltSeverity,
    "halt_lifecycle": vocab.HaltLifecycle,
    "log_role": vocab.LogRole,
}


@pytest.mark.parametrize("name", sorted(VOCABULARIES))
def test_each_vocabulary_in_the_schema_is_exactly_the_code_s(name: str) -> None:
    assert SCHEMA["$defs"][name]["enum"] == [e.value for e in VOCABULARIES[name]]


def test_a_wrong_document_is_refused() -> None:
    """The entries are strict: an unknown key, a wrong type or a stray spelling fails."""
    event = {"id": 1, "at": "2026-12-02T10:00:00Z", "kind": "run.opened", "task_id": None,
             "run_id": "r1", "data": {}}  # fmt: skip
    valid("event", event)
    for broken in (
        {**event, "kind": "run_opened"},
        {**event, "at": "2026-12-02T10:00:00+02:00"},
        {**event, "extra": 1},
        {k: v for k, v in event.items() if k != "data"},
    ):
        with pytest.raises(AssertionError):
            valid("event", broken)


# -- every command that prints has --json ---------------------------------------------------

# Print JSON whatever the flags: `halt` (the halt tool's contract), `payload schema`, `schema`;
# `completion` prints a script for the shell to source, which has no JSON form.
NO_JSON_FLAG = {"halt", "payload schema", "schema", "completion"}


def _leaf_commands() -> Iterator[tuple[str, Any]]:
    """Every command of the real app, by its full name (typer may bring its own click, so
    groups are told by their ``commands``, not by a class)."""
    from assay.cli.app import build_app

    def walk(prefix: str, command: Any) -> Iterator[tuple[str, Any]]:
        if isinstance(getattr(command, "commands", None), dict):
            for name, sub in sorted(command.commands.items()):
                yield from walk(f"{prefix} {name}".strip(), sub)
        else:
            yield prefix, command

    yield from walk("", typer.main.get_command(build_app()))


def test_every_command_that_prints_has_a_json_flag() -> None:
    missing = [
        name
        for name, command in _leaf_commands()
        if name not in NO_JSON_FLAG
        and not any("--json" in getattr(p, "opts", ()) for p in command.params)
    ]
    assert missing == [], f"commands without --json: {missing}"


# -- each command's output, validated -------------------------------------------------------


def test_run_and_payload_show_print_a_payload(site: Site) -> None:
    valid("payload", site.payload)
    shown = site.repo.main("payload", "show", site.run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    valid("payload", json_out(shown))
    schema = site.repo.main("payload", "schema")
    valid("payload_schema", json_out(schema))


def test_task_add_list_and_show(site: Site) -> None:
    added = site.repo.main(
        "task", "add", "another task", "--coder", "claude", "--no-check", "--json"
    )
    assert added.returncode == 0, added.stderr
    valid("task", json_out(added))
    valid("task_add", json_out(added))
    listed = json_out(site.repo.main("task", "list", "--json"))
    assert {t["id"] for t in listed} >= {site.task_id, json_out(added)["id"]}
    valid("task_list", listed)
    shown = json_out(site.repo.main("task", "show", site.task_id, "--json"))
    assert shown["runs"] and shown["status"] == "done"
    valid("task_show", shown)


def test_a_held_task_and_an_unreadable_row(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    held, broken = (
        json_out(repo.main("task", "add", title, "--coder", "claude", "--no-check", "--json"))["id"]
        for title in ("to hold", "to break")
    )
    assert repo.main("task", "hold", held, "--reason", "wait for ünïcode").returncode == 0
    with sqlite3.connect(repo.root / ".assay" / "assay.db") as conn:
        conn.execute("UPDATE tasks SET status = 'bogus' WHERE id = ?", (broken,))
    listed = json_out(repo.main("task", "list", "--json"))
    valid("task_list", listed)
    assert {t["id"]: t["status"] for t in listed} == {held: "held", broken: "unreadable"}
    shown = json_out(repo.main("task", "show", held, "--json"))
    valid("task_show", shown)
    assert (shown["held_by"], shown["hold_reason"]) == ("manual", "wait for ünïcode")


def test_ledger_show_usage_and_gc(site: Site) -> None:
    valid("ledger_show", json_out(site.repo.main("ledger", "show", site.task_id, "--json")))
    valid("usage", json_out(site.repo.main("usage", "--by", "day", "--since", "1d", "--json")))
    collected = json_out(site.repo.main("gc", "--dry-run", "--json"))
    assert collected["skipped"], collected  # the run's branch, kept: the schema sees an item
    valid("gc", collected)


def test_logs_lists_and_shows_a_run_s_logs(site: Site) -> None:
    listed = json_out(site.repo.main("logs", site.run_id, "--json"))
    valid("logs", listed)
    names = {log["name"]: log for log in listed["logs"]}
    coder = "attempt-1/seat-1/coder-attempt1.log"
    assert names[coder]["role"] == "coder" and names[coder]["source"] == "ledger"
    shown = json_out(site.repo.main("logs", site.run_id, coder, "--tail", "2", "--json"))
    valid("log_show", shown)
    assert shown["text"] and len(shown["text"].splitlines()) <= 2


def test_brief_for_a_shell_coder_and_for_llm(site: Site) -> None:
    for kind in ("replay", "llm", "aider"):
        done = site.repo.main("brief", "--contract", str(site.contract), "--kind", kind, "--json")
        assert done.returncode == 0, done.stderr
        valid("brief", json_out(done))


def test_contract_check_good_bad_and_unreadable_and_init(site: Site, tmp_path: Path) -> None:
    good = site.repo.main("contract", "check", str(site.contract), "--json")
    assert good.returncode == 0, good.stderr
    assert json_out(good)["ok"] is True
    valid("contract_check", json_out(good))
    no_bwrap = {"ASSAY_BWRAP": str(tmp_path / "no-bwrap-here")}
    warned = site.repo.main("contract", "check", str(site.contract), "--json", **no_bwrap)
    assert warned.returncode == 0, warned.stderr
    (warning,) = json_out(warned)["warnings"]  # valid, and run would refuse it here
    assert warning.startswith("`assay run` would refuse this contract here: ")
    assert f"warning: {warning}" in warned.stderr
    valid("contract_check", json_out(warned))
    bad_file = tmp_path / "bad.yaml"
    bad_file.write_text("task: x\nseats: 99\njudges: true\n")
    bad = site.repo.main("contract", "check", str(bad_file), "--json")
    assert bad.returncode == 2
    document = json_out(bad)
    valid("contract_check", document)
    assert document["ok"] is False
    assert [(p["key"], p["line"]) for p in document["problems"]] == [("seats", 2), ("judges", 3)]
    assert bad.stderr.startswith("assay: invalid contract: ")  # as without --json
    missing = site.repo.main("contract", "check", str(tmp_path / "none.yaml"), "--json")
    assert missing.returncode == 2
    (problem,) = json_out(missing)["problems"]
    assert problem["key"] is None and "No such file" in problem["message"]
    valid("contract_check", json_out(missing))
    written = site.repo.main("contract", "init", str(tmp_path / "new.yaml"), "--json")
    assert written.returncode == 0, written.stderr
    document = json_out(written)
    valid("contract_init", document)
    assert document["bytes"] == (tmp_path / "new.yaml").stat().st_size
    assert document["overwritten"] is False
    again = site.repo.main("contract", "init", str(tmp_path / "new.yaml"), "--force", "--json")
    assert json_out(again)["overwritten"] is True


def test_halt_arm_check_fire_rearm_attest(site: Site, tmp_path: Path) -> None:
    flags = ["--dispatch-id", "d-json", "--state-dir", str(tmp_path / "states")]
    halt = "halt-scope-breach"
    contract = tmp_path / "halts.yaml"
    classes = [(h.value, s.value) for h, s in CANONICAL_HALTS.items()] + [("halt-own", "log")]
    contract.write_text(
        "task: x\nhalt_classes:\n"
        + "".join(f"  - {{name: {n}, severity: {s}}}\n" for n, s in classes)
    )
    steps = [
        ("halt_arm", ["arm", "--contract", str(contract)], 0),
        ("halt_check", ["check", "--condition", "halt-own", "--fire", "--evidence", "w"], 0),
        ("halt_check", ["check", "--condition", halt], 0),
        ("halt_check", ["check", "--condition", halt, "--fire", "--evidence", "x"], 1),
        ("halt_check", ["check", "--condition", halt, "--fire", "--evidence", "y"], 1),  # sticky
        ("halt_rearm", ["rearm", "--condition", halt, "--evidence", "reverted"], 0),
        ("halt_check", ["check", "--condition", "no-such-halt"], 1),
        ("halt_attest", ["attest"], 0),
        ("halt_arm", ["arm", "--contract", str(contract)], 1),  # already armed
    ]
    for name, args, code in steps:
        done = site.repo.main("halt", *args, *flags)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        valid(name, json_out(done))


# -- outputs other helpers add: validated once their flag is there --------------------------


def _has_json(*command: str) -> bool:
    commands = dict(_leaf_commands())
    return any("--json" in getattr(p, "opts", ()) for p in commands[" ".join(command)].params)


def test_task_hold_release_cancel_print_the_move(site: Site) -> None:
    if not _has_json("task", "hold"):
        pytest.skip("`task hold --json` is not on this branch yet (the tasks helper adds it)")
    task_id = json_out(
        site.repo.main("task", "add", "to move", "--coder", "claude", "--no-check", "--json")
    )["id"]
    for action, extra in (("hold", ["--reason", "wait"]), ("release", []), ("cancel", [])):
        moved = site.repo.main("task", action, task_id, *extra, "--json")
        assert moved.returncode == 0, moved.stderr
        document = json_out(moved)
        valid("task_move", document)
        assert document["action"] == action and document["task"]["id"] == task_id


def test_task_retry_and_stop_print_the_move(site: Site) -> None:
    """``task retry --json`` is a ``task_move``; ``task stop --json`` of a task that is not
    running prints nothing (exit 5): the running case is tests/unit/cli/test_task_stop.py,
    which validates its document as ``task_stop``."""
    task_id = json_out(
        site.repo.main("task", "add", "to retry", "--coder", "claude", "--no-check", "--json")
    )["id"]
    refused = site.repo.main("task", "retry", task_id, "--json")
    assert refused.returncode == 5 and refused.stdout == ""
    stop = site.repo.main("task", "stop", task_id, "--json")
    assert stop.returncode == 5 and stop.stdout == ""


def test_task_delete_and_prune_print_what_they_removed(site: Site) -> None:
    task_id = json_out(
        site.repo.main("task", "add", "to delete", "--coder", "claude", "--no-check", "--json")
    )["id"]
    deleted = site.repo.main("task", "delete", task_id, "--json")
    assert deleted.returncode == 0, deleted.stderr
    valid("task_delete", json_out(deleted))
    pruned = site.repo.main("task", "prune", "--older-than", "1d", "--dry-run", "--json")
    assert pruned.returncode == 0, pruned.stderr
    valid("task_prune", json_out(pruned))


def test_serve_once_prints_its_summary(tmp_path: Path) -> None:
    if not _has_json("serve"):
        pytest.skip("`serve --json` is not on this branch yet (the events helper adds it)")
    repo = make_repo(tmp_path)  # its own queue: nothing else of this module's is served
    contract = replay_contract(repo, "fixed", land="branch")
    task_id = json_out(repo.main("task", "add", "--contract", str(contract), "--json"))["id"]
    served = repo.main("serve", "--once", "--no-web", "--poll", "0.2", "--json")
    assert served.returncode == 0, served.stderr
    document = json_out(served)
    valid("serve_summary", document)
    assert document["closed"] == {task_id: "done"} and document["runs"] == 1


def test_run_events_jsonl_prints_events_then_the_payload(site: Site) -> None:
    helped = site.repo.main("run", "--help").stdout
    if "--events" not in helped:
        pytest.skip("`run --events jsonl` is not on this branch yet (the events helper adds it)")
    ran = site.repo.main("run", "--contract", str(site.contract), "--events", "jsonl", "--json")
    assert ran.returncode == 0, ran.stderr
    *events, last = [json.loads(line) for line in ran.stdout.splitlines()]
    assert events and all(isinstance(e, dict) for e in events)
    for event in events:
        valid("event", event)
    assert "\n" not in json.dumps(last) and ran.stdout.splitlines()[-1].startswith("{")
    valid("payload", last)


def test_version(site: Site) -> None:
    done = site.repo.main("--version", "--json")
    if done.returncode != 0:
        pytest.skip("`assay --version --json` is not on this branch (the startup helper's)")
    valid("version", json_out(done))
