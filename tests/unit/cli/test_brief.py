"""``assay brief``, and the brief as a real coder meets it in ``assay run``: the file at
``$ASSAY_BRIEF_PATH``, and the running assay on the coder's PATH when the operator's PATH does
not hold it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from support.repo import BUGGY, CHECK_TESTS, Repo, git, make_repo

from assay.core.brief import fire_command, query_command
from assay.core.vocab import CanonicalHalt

# An operator who started assay as .venv/bin/assay: its folder is not on this PATH.
BARE_PATH = "/usr/bin:/bin"


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


def _held_by_the_coder(repo: Repo, path: Path) -> dict[str, object]:
    base = git(repo.root, "rev-parse", "main")
    done = repo.main("run", "--contract", str(path), "--json", PATH=BARE_PATH)
    assert done.returncode == 3, (done.returncode, done.stderr)
    payload: dict[str, object] = json.loads(done.stdout)
    fired = payload["halts"]["fired"]  # type: ignore[index]
    assert [h["name"] for h in fired] == ["halt-spec-contradiction"], payload["halts"]
    assert payload["task_status"] == "held"
    assert git(repo.root, "rev-parse", "main") == base  # nothing landed
    assert (repo.root / "src" / "slug.py").read_text() == BUGGY
    return payload


def test_a_command_coder_fires_a_halt_with_the_assay_it_finds_on_its_path(
    tmp_path: Path,
) -> None:
    assert shutil.which("assay", path=BARE_PATH) is None  # else this would prove nothing
    repo = make_repo(tmp_path)
    fire = (
        'assay halt check --dispatch-id "$ASSAY_DISPATCH_ID" '
        "--condition halt-spec-contradiction --fire --evidence x"
    )
    payload = _held_by_the_coder(repo, contract(repo, {"kind": "command", "command": fire}))
    assert payload["halts"]["fired"][0]["detail"] == "x"  # type: ignore[index]


def test_a_command_coder_reads_the_brief_and_runs_its_halt_command_verbatim(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    # The coder knows nothing but the brief: it takes the halt's line from the file and runs it.
    script = (
        'test -s "$ASSAY_BRIEF_PATH" && '
        'sh -c "$(grep -m1 -- "--condition halt-spec-contradiction --fire" "$ASSAY_BRIEF_PATH")"'
    )
    payload = _held_by_the_coder(repo, contract(repo, {"kind": "command", "command": script}))
    detail = payload["halts"]["fired"][0]["detail"]  # type: ignore[index]
    assert detail == "<evidence: what you found, with file and line>"
    runs = repo.root / ".assay" / "runs" / str(payload["run_id"])
    brief = (runs / "attempt-1" / "seat-1" / "brief-attempt1.md").read_text()
    assert brief.startswith("# The rules of this task (assay)")
    assert "Make slugify keep digits." in brief
