"""The brief as a real coder meets it in ``assay run``: the file at ``$ASSAY_BRIEF_PATH``, and
the running assay on the coder's PATH when the operator's PATH does not hold it. The coder
fires its halt with ``assay halt check``: a process of assay's, so this is not a unit test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from support.repo import BUGGY, PYTEST, Repo, git, make_repo

# An operator who started assay as .venv/bin/assay: its folder is not on this PATH.
BARE_PATH = "/usr/bin:/bin"


def contract(repo: Repo, coder: dict[str, object], **extra: object) -> Path:
    doc = {
        "task": "Make slugify keep digits.",
        "scope": {"allow": ["src/**"], "protect": ["src/vendor/**"]},
        "coder": coder,
        "validators": [{"id": "tests", "kind": "command", "run": PYTEST}],
        "budgets": {"max_attempts": 2, "max_recovery": 0},
        "land": "merge",
        **extra,
    }
    return repo.contract("brief.yaml", yaml.safe_dump(doc))


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
