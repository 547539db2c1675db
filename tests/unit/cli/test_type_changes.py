"""Type changes through the real ``assay run``: a bulk ``sed -i`` that replaces a symlink by a
copy of its target is a scope breach (never merged) unless the contract allows type changes,
and every type change (a symlink that became a file, a flipped executable bit) is named per
file in the payload's candidates and on the progress line."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
from support.model_server import ModelServer, RecordedRequest
from support.repo import CHECK_TESTS, Repo, git, make_repo
from support.script import Turn

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)
CANDIDATE = re.compile(
    r"Candidate (\w+) \(files: [^)]*\):\n<<<UNTRUSTED-DATA \w+>>>\n(.*?)\n<<<END", re.S
)
# The fix of make_repo's bug, applied the way a hurried coder does it: over every file.
BULK_SED = "sed -i s/isalpha/isalnum/ src/*.py"


def linked_repo(tmp_path: Path) -> Repo:
    """make_repo's repository plus ``src/compat.py``, a symlink to ``slug.py`` (mode 120000)."""
    repo = make_repo(tmp_path)
    os.symlink("slug.py", repo.root / "src" / "compat.py")
    git(repo.root, "add", "src/compat.py")
    git(repo.root, "commit", "-q", "-m", "compat alias")
    assert git(repo.root, "ls-files", "-s", "src/compat.py").startswith("120000 ")
    return repo


def contract(repo: Repo, command: str, scope: str = '{allow: ["src/**"]}') -> Path:
    return repo.contract(
        "types.yaml",
        f"""task: Make slugify keep digits.
scope: {scope}
coder: {{kind: command, command: "{command}"}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
budgets: {{max_attempts: 1, max_recovery: 0}}
land: merge
""",
    )


def run(repo: Repo, path: Path) -> tuple[int, dict[str, Any], str]:
    # The seat line is progress: plain lines on a pipe only when asked for.
    done = repo.main("run", "--contract", str(path), "--json", "--progress", "always")
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    return done.returncode, payload, done.stderr


def candidate(payload: dict[str, Any]) -> dict[str, Any]:
    [found] = payload["candidates"]
    assert isinstance(found, dict)
    return found


def test_a_symlink_sed_replaced_by_a_copy_is_a_scope_breach_never_merged(
    tmp_path: Path,
) -> None:
    repo = linked_repo(tmp_path)
    base = git(repo.root, "rev-parse", "main")
    code, payload, stderr = run(repo, contract(repo, BULK_SED))
    assert code == 3, stderr
    assert payload["status"] == "blocked" and payload["task_status"] == "held", payload
    [fired] = payload["halts"]["fired"]
    assert fired["name"] == "halt-scope-breach"
    assert "the change replaces a symlink: src/compat.py symlink → file" in fired["detail"]
    seat = candidate(payload)
    assert seat["type_changes"] == [{"path": "src/compat.py", "before": "symlink", "after": "file"}]
    [scope] = [r for r in payload["validator_results"] if r["validator_id"] == "scope"]
    assert scope["severity"] == "block"
    assert scope["findings"] == ["symlink replaced: src/compat.py symlink → file"]
    assert git(repo.root, "rev-parse", "main") == base
    assert (repo.root / "src" / "compat.py").is_symlink()
    assert "type changed: src/compat.py symlink → file" in stderr


def test_allow_type_changes_lets_the_copy_merge_and_the_payload_names_it(tmp_path: Path) -> None:
    repo = linked_repo(tmp_path)
    scope = '{allow: ["src/**"], allow_type_changes: true}'
    code, payload, stderr = run(repo, contract(repo, BULK_SED, scope))
    assert code == 0, stderr
    assert payload["status"] == "merged", payload
    seat = candidate(payload)
    assert seat["type_changes"] == [{"path": "src/compat.py", "before": "symlink", "after": "file"}]
    assert "type changed: src/compat.py symlink → file" in stderr
    assert git(repo.root, "ls-tree", "main", "src/compat.py").startswith("100644 ")


def test_a_flipped_executable_bit_is_listed_but_not_a_breach(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    code, payload, stderr = run(repo, contract(repo, f"{BULK_SED} && chmod +x src/slug.py"))
    assert code == 0, stderr
    assert payload["status"] == "merged", payload
    seat = candidate(payload)
    assert seat["type_changes"] == [
        {"path": "src/slug.py", "before": "file", "after": "executable"}
    ]
    assert "type changed: src/slug.py file → executable" in stderr
    assert git(repo.root, "ls-tree", "main", "src/slug.py").startswith("100755 ")


def test_a_change_without_type_changes_lists_none(tmp_path: Path) -> None:
    repo = linked_repo(tmp_path)
    code, payload, stderr = run(repo, contract(repo, "sed -i s/isalpha/isalnum/ src/slug.py"))
    assert code == 0, stderr
    assert candidate(payload)["type_changes"] == []
    assert "type changed" not in stderr
    assert (repo.root / "src" / "compat.py").is_symlink()


def test_a_blind_judge_reads_the_type_change_and_can_prefer_the_candidate_keeping_the_link(
    tmp_path: Path,
) -> None:
    """Two viable seats (type changes allowed): one fixes the bug through the bulk ``sed``,
    which replaces the link; the other edits ``slug.py`` alone. The scripted judge reads its
    request as a model would and ranks the candidate whose block names no type change first."""
    repo = linked_repo(tmp_path)
    seen: list[str] = []

    def keep_the_link(request: RecordedRequest) -> Turn:
        text = request.body["messages"][1]["content"]
        seen.append(text)
        blocks = {label: body for label, body in CANDIDATE.findall(text)}
        best = sorted(blocks, key=lambda label: "Type changes" in blocks[label])
        return Turn.call("rank", {"ranking": best, "reasons": "keeps compat.py a link"})

    with ModelServer() as server:
        server.script(keep_the_link)
        path = repo.contract(
            "judged.yaml",
            f"""task: Make slugify keep digits.
scope: {{allow: ["src/**"], allow_type_changes: true}}
seats: 2
judges: 1
coder:
  - {{kind: command, command: "{BULK_SED}"}}
  - {{kind: command, command: "sed -i s/isalpha/isalnum/ src/slug.py"}}
judge: {{kind: llm, model: judge-model, base_url: "{server.base_url}"}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_attempts: 1, max_recovery: 0}}
land: merge
""",
        )
        done = repo.main("run", "--contract", str(path), "--json", OPENAI_API_KEY="k")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    [request] = seen
    blocks = dict(CANDIDATE.findall(request))
    noted = [label for label, body in blocks.items() if "Type changes" in body]
    assert len(blocks) == 2 and len(noted) == 1, request
    assert blocks[noted[0]].startswith(
        "Type changes (read from git's file modes):\n- src/compat.py symlink → file\n\n"
    )
    by_seat = {c["seat"]: c for c in payload["candidates"]}
    assert by_seat[1]["label"] == noted[0]
    assert by_seat[1]["type_changes"] == [
        {"path": "src/compat.py", "before": "symlink", "after": "file"}
    ]
    assert by_seat[2]["type_changes"] == []
    assert payload["status"] == "merged" and payload["tally"]["winner"] == by_seat[2]["label"]
    assert (repo.root / "src" / "compat.py").is_symlink()
