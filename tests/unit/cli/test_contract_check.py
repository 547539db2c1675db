"""``assay contract check`` reads assay.yaml when given no path, and refuses the template's
untouched placeholder task, as ``run --contract`` and ``task add --contract`` do; a contract adds
its own halts without restating the canonical seven."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.repo import make_repo
from typer.testing import CliRunner, Result

from assay.cli.app import build_app
from assay.core.contract import contract_template
from assay.core.contract_yaml import placeholder_task
from assay.core.halts import CANONICAL_HALTS


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_repo(tmp_path).root
    monkeypatch.chdir(root)
    monkeypatch.delenv("ASSAY_DATABASE_URL", raising=False)
    monkeypatch.delenv("ASSAY_HOME", raising=False)
    return root


def assay(*args: str) -> Result:
    return CliRunner().invoke(build_app(), list(args))


def test_check_without_a_path_reads_assay_yaml_or_says_how_to_make_one(repo: Path) -> None:
    missing = assay("contract", "check")
    assert missing.exit_code == 2
    assert missing.output == (
        "assay: no assay.yaml here; create one with `assay contract init` or give a path "
        "(`assay contract check FILE`)\n"
    )
    as_json = assay("contract", "check", "--json")
    assert as_json.exit_code == 2 and json.loads(as_json.stdout) == {
        "path": "assay.yaml",
        "ok": False,
        "problems": [{"key": None, "line": None, "message": missing.output[7:-1]}],
        "warnings": [],
    }
    (repo / "assay.yaml").write_text("task: Fix slugify().\nsandbox: none\n")
    assert assay("contract", "check").output == "assay.yaml: ok\n"
    explicit = assay("contract", "check", "other.yaml")  # a path given: its own error
    assert explicit.exit_code == 2 and "cannot read contract other.yaml" in explicit.output
    assert not (repo / ".assay").exists()


def test_the_untouched_template_is_refused_naming_its_task(repo: Path) -> None:
    assert assay("contract", "init").exit_code == 0
    refused = assay("contract", "check")
    assert refused.exit_code == 2
    assert "assay.yaml: line 5: task: the task is still the template's placeholder" in (
        refused.output
    )
    as_json = assay("contract", "check", "--json")
    document = json.loads(as_json.stdout)
    assert as_json.exit_code == 2 and document["ok"] is False
    assert [(p["key"], p["line"]) for p in document["problems"]] == [("task", 5)]
    text = (repo / "assay.yaml").read_text().replace(placeholder_task(), "Fix slugify().")
    (repo / "assay.yaml").write_text(text.replace("sandbox: bwrap", "sandbox: none"))
    assert assay("contract", "check").exit_code == 0


@pytest.mark.parametrize("command", [["run"], ["task", "add"]])
def test_run_and_task_add_refuse_the_placeholder_before_anything_is_created(
    repo: Path, command: list[str]
) -> None:
    (repo / "assay.yaml").write_text(contract_template().replace("sandbox: bwrap", "sandbox: none"))
    refused = assay(*command, "--contract", "assay.yaml")
    assert refused.exit_code == 2
    assert "task: the task is still the template's placeholder; replace it" in refused.output
    copied = assay(*command, placeholder_task(), "--coder-command", "true", "--sandbox", "none")
    assert copied.exit_code == 2
    assert "the instruction: the task is still the template's placeholder" in copied.output
    assert not (repo / ".assay").exists()


def test_a_contract_adds_its_own_halt_without_restating_the_seven(repo: Path) -> None:
    (repo / "c.yaml").write_text(
        "task: Fix slugify().\nsandbox: none\ncoder: {kind: command, command: 'true'}\n"
        "halt_classes:\n  - {name: halt-db-migration, severity: block}\n"
    )
    assert assay("contract", "check", "c.yaml").exit_code == 0
    brief = json.loads(assay("brief", "--contract", "c.yaml", "--json").stdout)
    assert [h["name"] for h in brief["halts"]] == [
        *(name.value for name in CANONICAL_HALTS),
        "halt-db-migration",
    ]
    typo = "task: x\nhalt_classes:\n  - {name: halt-scope-breech, severity: block}\n"
    (repo / "typo.yaml").write_text(typo)
    refused = assay("contract", "check", "typo.yaml")
    assert refused.exit_code == 2 and "did you mean halt-scope-breach?" in refused.output
