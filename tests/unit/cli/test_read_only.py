"""A command that only reads leaves the repository as it found it: where there is no ``.assay``
it answers as for an empty one and creates nothing. A command that must create the home hides
it from ``git status`` (``info/exclude``, through one function), from any folder, in a linked
worktree, where ``.git/info`` does not exist, and for an ``ASSAY_HOME`` inside the repository.
Each command runs in-process through ``assay.cli.main.main``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.repo import git

from assay.adapters.home import exclude_pattern, make_home
from assay.cli.main import main
from assay.core.halts import CANONICAL_HALTS

CANONICAL = [(n.value, s.value) for n, s in CANONICAL_HALTS.items()]


def assay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1 if code else 0), out, err


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh repository with one commit, the working directory; no assay variables."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("hi\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "init")
    for name in ("ASSAY_HOME", "ASSAY_DATABASE_URL", "ASSAY_TEMPORAL", "ASSAY_HALT_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    return root


def status(root: Path) -> str:
    return git(root, "status", "--porcelain", "--untracked-files=all")


READERS: list[tuple[list[str], int, str]] = [
    (["task", "list"], 0, ""),
    (["task", "list", "--json"], 0, "[]"),
    (["task", "list", "--status", "held"], 0, ""),
    (["task", "show", "t-1"], 2, "no task 't-1'"),
    (["task", "show", "t-1", "--json"], 2, "no task 't-1'"),
    (["task", "hold", "t-1"], 2, "no task 't-1'"),
    (["task", "release", "t-1", "--json"], 2, "no task 't-1'"),
    (["task", "cancel", "t-1"], 2, "no task 't-1'"),
    (["task", "delete", "t-1"], 2, "t-1: no such task"),
    (["task", "delete", "t-1", "--dry-run", "--json"], 2, "t-1: no such task"),
    (["task", "prune", "--older-than", "0"], 0, "nothing to prune"),
    (["task", "prune", "--older-than", "7d", "--json"], 0, '"deleted": []'),
    (["ledger", "show", "t-1"], 2, "no task 't-1'"),
    (["payload", "show", "r-1"], 2, "no run 'r-1'"),
    (["usage"], 0, "no ledger here yet"),
    (["usage", "--json"], 0, "{"),
    (["gc"], 0, "removed 0 item(s)"),
    (["gc", "--dry-run", "--json"], 0, '"removed": []'),
    (["run", "--task", "t-1"], 2, "no task 't-1'"),
    (["run", "--resume"], 0, "no interrupted run to resume"),
    (["run"], 2, "give an instruction"),
    (["schema", "task_list"], 0, "{"),
    (["payload", "schema"], 0, "{"),
    (["completion", "bash"], 0, "assay"),
]


@pytest.mark.parametrize(("args", "code", "said"), READERS, ids=str)
def test_a_reading_command_creates_nothing_where_there_is_no_ledger(
    repo: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, said: str
) -> None:
    exit_code, out, err = assay(capsys, *args)
    assert exit_code == code, err
    assert said in out + err
    assert not (repo / ".assay").exists()
    assert status(repo) == ""


def test_from_a_subfolder_too(repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch):
    (repo / "sub").mkdir()
    monkeypatch.chdir(repo / "sub")
    for args in (["task", "list"], ["task", "show", "t-1"], ["gc"]):
        assay(capsys, *args)
    assert sorted(p.name for p in repo.rglob(".assay")) == []


def test_an_empty_list_reads_as_an_existing_empty_ledger_does(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert assay(capsys, "task", "list") == (0, "id  status  attempts  title  note\n", "")
    assert json.loads(assay(capsys, "task", "list", "--json")[1]) == []


# -- the commands that create the home hide it --------------------------------------------


def test_queueing_a_task_creates_the_home_and_hides_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = assay(capsys, "task", "add", "do it", "--coder", "claude", "--no-check")
    assert code == 0, err
    assert (repo / ".assay" / "assay.db").is_file()
    assert status(repo) == ""
    assert ".assay/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()
    # and the readers read it now
    assert "do it" in assay(capsys, "task", "list")[1]


def test_where_git_info_does_not_exist(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for leftover in (repo / ".git" / "info").iterdir():
        leftover.unlink()
    (repo / ".git" / "info").rmdir()
    assert assay(capsys, "task", "add", "do it", "--coder", "claude", "--no-check")[0] == 0
    assert status(repo) == ""
    assert (repo / ".git" / "info" / "exclude").read_text() == ".assay/\n"


def test_in_a_linked_worktree_and_from_a_subfolder(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    linked = repo.parent / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    assert (linked / ".git").is_file()  # a worktree's .git is a file naming the real one
    (linked / "deep" / "er").mkdir(parents=True)
    monkeypatch.chdir(linked / "deep" / "er")
    assert assay(capsys, "task", "add", "do it", "--coder", "claude", "--no-check")[0] == 0
    assert (linked / ".assay" / "assay.db").is_file()
    assert status(linked) == "" and status(repo) == ""
    # the exclude is the common one, shared by every worktree
    assert ".assay/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()


def test_a_home_moved_inside_the_repository_is_hidden_by_its_own_path(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_HOME", str(repo / "var" / "a*home"))
    assert assay(capsys, "task", "add", "do it", "--coder", "claude", "--no-check")[0] == 0
    assert (repo / "var" / "a*home" / "assay.db").is_file()
    assert status(repo) == ""
    (repo / "var" / "other").write_text("mine\n")  # only the home is hidden
    assert status(repo) == "?? var/other"


def test_the_exclude_line_of_each_home(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    assert exclude_pattern(repo, repo / ".assay") == ".assay/"
    assert exclude_pattern(repo, repo / "a" / "b") == "/a/b/"
    assert exclude_pattern(repo, repo / "#x" / "[y]") == "/\\#x/\\[y]/"
    assert exclude_pattern(repo, tmp_path / "elsewhere") is None
    assert exclude_pattern(repo, repo) is None


def test_make_home_is_idempotent(repo: Path) -> None:
    make_home(repo, repo / ".assay")
    make_home(repo, repo / ".assay")
    lines = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert lines.count(".assay/") == 1


def test_the_dev_servers_state_folder_is_hidden(repo: Path) -> None:
    from assay.cli.dev_server import make_state_folder

    (repo / "sub").mkdir()
    folder = make_state_folder(repo / "sub")
    assert folder == repo / ".assay" / "temporal" and folder.is_dir()
    assert status(repo) == ""


def test_halt_arm_in_a_repository_hides_the_default_state_folder(
    repo: Path, capsys: pytest.CaptureFixture[str], write_contract: Callable[..., Path]
) -> None:
    contract = write_contract(repo.parent / "contract.yaml", CANONICAL, task="fix it")
    missing = str(repo / "no.yaml")
    refused = assay(capsys, "halt", "arm", "--contract", missing, "--dispatch-id", "d")
    assert refused[0] == 1 and not (repo / ".assay").exists()
    code, out, _ = assay(capsys, "halt", "arm", "--contract", str(contract), "--dispatch-id", "d-1")
    assert code == 0, out
    assert (repo / ".assay" / "halt-state" / "d-1.json").is_file()
    assert status(repo) == ""
