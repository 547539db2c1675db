"""``assay brief``. The brief as a real coder meets it in ``assay run`` (the coder runs
``assay halt check``, a process of assay's) is tests/e2e/cli/test_brief_coder_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from support.repo import CHECK_TESTS, Repo, make_repo

from assay.core.brief import fire_command, query_command
from assay.core.vocab import CanonicalHalt


def contract(repo: Repo, coder: dict[str, object], **extra: object) -> Path:
    doc = {
        "task": "Make slugify keep digits.",
        "scope": {"allow": ["src/**"], "protect": ["src/vendor/**"]},
        "coder": coder,
        "validators": [{"id": "tests", "kind": "command", "run": CHECK_TESTS}],
        "budgets": {"max_attempts": 2, "max_recovery": 0},
        "land": "merge",
        **extra,
    }
    return repo.contract("brief.yaml", yaml.safe_dump(doc))


def test_brief_prints_the_rules_for_the_contract_coder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    halts = [{"name": h.value, "severity": "block"} for h in CanonicalHalt]
    halts.append({"name": "halt-db-migration", "severity": "warn"})
    path = contract(repo, {"kind": "command", "command": "true"}, halt_classes=halts)
    done = repo.main("brief", "--contract", str(path))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "Make slugify keep digits." in text
    assert "`src/**`" in text and "`src/vendor/**`" in text
    for name in [*(h.value for h in CanonicalHalt), "halt-db-migration"]:
        assert fire_command(name) in text
    assert "$ASSAY_REPORT_PATH" in text and "NO CHANGE NEEDED:" in text
    assert "with your Bash tool" not in text  # rendered for the contract's coder: command

    as_claude = repo.main("brief", "--contract", str(path), "--kind", "claude")
    assert "with your Bash tool" in as_claude.stdout

    doc = json.loads(repo.main("brief", "--contract", str(path), "--json").stdout)
    assert doc["kind"] == "command"
    assert [h["name"] for h in doc["halts"]][-1] == "halt-db-migration"
    assert doc["halts"][-1] == {
        "name": "halt-db-migration",
        "severity": "warn",
        "canonical": False,
        "when": "what its name says happens",
        "fire": fire_command("halt-db-migration"),
        "query": query_command("halt-db-migration"),
    }
    assert doc["text"] == text
    assert doc["no_change"]["mark"] == "NO CHANGE NEEDED:"


def test_brief_refuses_a_bad_contract_with_exit_2(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    bad = repo.contract("bad.yaml", "task: x\nseats: many\n")
    done = repo.main("brief", "--contract", str(bad))
    assert done.returncode == 2
    assert "invalid contract" in done.stderr and "seats" in done.stderr and "line 2" in done.stderr
    assert done.stdout == ""
    missing = repo.main("brief", "--contract", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read contract" in missing.stderr
    unknown = repo.main("brief", "--contract", str(bad), "--kind", "gpt")
    assert unknown.returncode == 2
