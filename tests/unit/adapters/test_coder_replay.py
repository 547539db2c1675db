"""The replay coder: one scripted step per attempt, played in a real git worktree."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.repo import git

from assay.adapters.coders import get_coder
from assay.adapters.coders.base import DispatchRequest, DispatchResult
from assay.adapters.coders.replay import ReplayCoder
from assay.core.report import parse_coder_report

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}
BUGGY = "def slugify(text):\n    return ''.join(c for c in text if c.isalpha())\n"
WRONG = "def slugify(text):\n    return text\n"
RIGHT = "def slugify(text):\n    return ''.join(c for c in text if c.isalnum())\n"


def _diff_for(repo: Path, path: str, content: str | None) -> str:
    """The unified diff that takes ``path`` from HEAD to ``content`` (None: deleted)."""
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if content is None:
        target.unlink()
    else:
        target.write_text(content)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "HEAD", strip=False)
    git(repo, "reset", "-q", "--hard", "HEAD")
    return diff


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "src").mkdir()
    (root / "src" / "slug.py").write_text(BUGGY)
    (root / "old.txt").write_text("old\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    fixes = tmp_path / "fixes"
    fixes.mkdir()
    (fixes / "wrong.diff").write_text(_diff_for(root, "src/slug.py", WRONG))
    (fixes / "right.diff").write_text(_diff_for(root, "src/slug.py", RIGHT))
    (fixes / "delete.diff").write_text(_diff_for(root, "old.txt", None))
    (fixes / "create.diff").write_text(_diff_for(root, "docs/new.md", "# new\n"))
    # The diffs live outside the repository's tracked files, in the directory the run starts from.
    (root / "fixes").symlink_to(fixes)
    return root


def _worktree(repo: Path, name: str) -> Path:
    tree = repo.parent / name
    git(repo, "worktree", "add", "-q", "--detach", str(tree), "HEAD")
    return tree


def _dispatch(
    repo: Path, tree: Path, steps: list[dict[str, str]], attempt: int = 1, **kw: Any
) -> DispatchResult:
    logs = repo.parent / f"logs-{tree.name}-{attempt}"
    request = DispatchRequest(
        worktree=tree,
        prompt="fix slugify",
        dispatch_id=f"d-{attempt}",
        attempt=attempt,
        seat=1,
        halt_state_dir=repo.parent / "halt",
        report_path=logs / "report.json",
        log_dir=logs,
        env=ENV,
        settings={"kind": "replay", "steps": steps},
        repo_root=kw.pop("repo_root", repo),
        timeout_seconds=kw.pop("timeout", 10.0),
    )
    return ReplayCoder().dispatch(request)


def _report(repo: Path, tree: Path, attempt: int = 1) -> str:
    return (repo.parent / f"logs-{tree.name}-{attempt}" / "report.json").read_text()


STEPS = [{"diff": "fixes/wrong.diff", "summary": "first try"}, {"diff": "fixes/right.diff"}]


def test_each_attempt_plays_its_step_and_the_last_repeats(repo: Path) -> None:
    for attempt, expected in [(1, WRONG), (2, RIGHT), (3, RIGHT), (9, RIGHT)]:
        tree = _worktree(repo, f"wt{attempt}")
        result = _dispatch(repo, tree, STEPS, attempt)
        assert (result.exit_code, result.error, result.environment_error) == (0, None, None)
        assert (tree / "src" / "slug.py").read_text() == expected
        assert git(tree, "status", "--porcelain").strip() == "M src/slug.py"


def test_a_summary_becomes_a_report_at_the_report_path(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    assert _dispatch(repo, tree, STEPS, 1).exit_code == 0
    report = parse_coder_report(_report(repo, tree))
    assert report is not None and report.summary == "first try"


def test_a_diff_that_does_not_apply_is_a_failed_step(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    (tree / "src" / "slug.py").write_text("something else entirely\n")
    result = _dispatch(repo, tree, [{"diff": "fixes/right.diff"}])
    assert result.exit_code not in (0, None)
    assert result.error is not None and "does not apply" in result.error
    assert result.environment_error is None


def test_created_and_deleted_files(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    assert _dispatch(repo, tree, [{"diff": "fixes/delete.diff"}]).exit_code == 0
    tree2 = _worktree(repo, "wt2")
    assert _dispatch(repo, tree2, [{"diff": "fixes/create.diff"}]).exit_code == 0
    assert not (tree / "old.txt").exists()
    assert (tree2 / "docs" / "new.md").read_text() == "# new\n"


def test_a_script_runs_in_the_worktree_with_the_assay_env(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    script = 'echo "$ASSAY_ATTEMPT $ASSAY_DISPATCH_ID" > made.txt; cp "$ASSAY_PROMPT_FILE" p.txt'
    result = _dispatch(repo, tree, [{"script": script}], 2)
    assert result.exit_code == 0
    assert (tree / "made.txt").read_text() == "2 d-2\n"
    assert (tree / "p.txt").read_text() == "fix slugify"


def test_diff_then_script_in_one_step(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    result = _dispatch(
        repo, tree, [{"diff": "fixes/right.diff", "script": "echo x >> src/slug.py"}]
    )
    assert result.exit_code == 0
    assert (tree / "src" / "slug.py").read_text() == RIGHT + "x\n"


def test_a_failing_script_sets_error_and_exit_code(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    result = _dispatch(repo, tree, [{"script": "echo nope >&2; exit 4"}])
    assert result.exit_code == 4
    assert result.error is not None and "nope" in result.error


def test_a_script_timeout_keeps_what_was_written(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    result = _dispatch(repo, tree, [{"script": "echo a > a.txt; sleep 30"}], timeout=0.5)
    assert result.timed_out and result.exit_code is None and result.stop_reason is None
    assert (tree / "a.txt").read_text() == "a\n"


def test_inline_and_file_reports_are_written_verbatim(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    inline = '{"summary": "done", "stop_reason": "completed"}'
    _dispatch(repo, tree, [{"report": inline}])
    assert json.loads(_report(repo, tree)) == json.loads(inline)
    (repo.parent / "fixes" / "report.json").write_text('{"turns_used": 3}')
    tree2 = _worktree(repo, "wt2")
    _dispatch(repo, tree2, [{"report": "fixes/report.json", "summary": "s"}])
    assert json.loads(_report(repo, tree2)) == {"turns_used": 3, "summary": "s"}
    tree3 = _worktree(repo, "wt3")
    _dispatch(repo, tree3, [{"report": "{not json", "summary": "s"}])
    assert _report(repo, tree3) == "{not json"


def test_a_relative_diff_without_repo_root_is_read_from_the_current_directory(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _worktree(repo, "wt")
    monkeypatch.chdir(repo.parent)
    result = _dispatch(repo, tree, [{"diff": "fixes/right.diff"}], repo_root=None)
    assert result.exit_code == 0


@pytest.mark.parametrize(
    ("steps", "needle"),
    [
        ([], "coder.steps"),
        ([{"diff": "fixes/missing.diff"}], "was not found"),
        ([{"patch": "x"}], "unknown keys"),
        ([{"report": "fixes/missing.json"}], "was not found"),
    ],
)
def test_bad_steps_are_environment_errors(
    repo: Path, steps: list[dict[str, str]], needle: str
) -> None:
    result = _dispatch(repo, _worktree(repo, "wt"), steps)
    assert result.environment_error is not None and needle in result.environment_error


def test_the_log_holds_the_output_of_every_process(repo: Path) -> None:
    tree = _worktree(repo, "wt")
    result = _dispatch(repo, tree, [{"diff": "fixes/right.diff", "script": "echo from-script"}])
    assert result.log_path is not None
    text = result.log_path.read_text()
    assert "git apply" in text and "from-script" in text


def test_registry_returns_the_replay_coder() -> None:
    coder = get_coder("replay")
    assert isinstance(coder, ReplayCoder)
    assert "steps" in coder.honoured_settings
