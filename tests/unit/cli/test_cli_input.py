"""What `contract check` accepts, `run` can run; the command line refuses nonsense in one line.

Each case drives `assay` (in-process) in a real repository and checks the exit code, the one line
on stderr and that nothing was created.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.repo import git, make_repo

from tests.unit.cli.test_bad_input import COMMAND_CODER, created, one_line

RUNNABLE_CODER = "coder: {kind: command, command: 'true'}\nvalidators: [{id: t, run: 'true'}]\n"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("env: {'A=B': a}\n" + RUNNABLE_CODER, "'A=B' is not a valid environment variable"),
        ("env: {'': a}\n" + RUNNABLE_CODER, "must not be empty"),
        ('env: {A: "a\\0b"}\n' + RUNNABLE_CODER, "NUL"),
        ("coder: {kind: llm}\n", "kind llm needs `model`"),
        ("coder: {kind: command}\n", "kind command needs `command`"),
        ("coder: {kind: replay, steps: []}\n", "kind replay needs `steps`"),
        (
            "coder: {kind: command, command: 'true'}\nvalidators: [{id: j, kind: judge}]\n",
            "kind judge needs `model`",
        ),
        ("scope: {allow: ['a\\']}\n" + RUNNABLE_CODER, "not a valid glob"),
        ("budgets: {max_recovery: 99999999999999999999}\n" + RUNNABLE_CODER, "less than or equal"),
    ],
    ids=["env-equals", "env-empty", "env-nul", "llm", "command", "replay", "judge", "glob", "big"],
)
def test_contract_check_and_run_agree_on_what_cannot_run(
    tmp_path: Path, body: str, said: str
) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract("c.yaml", "task: fix it\n" + body)
    checked = repo.main("contract", "check", str(contract))
    ran = repo.main("run", "--contract", str(contract))
    assert checked.returncode == ran.returncode == 2, (checked.stderr, ran.stderr)
    for done in (checked, ran):
        line = one_line(done.stderr)
        assert "line " in line and said in line, line
    assert created(repo) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--coder", "", "--validator", "true"], "--coder needs a kind: one of command, claude"),
        (["--coder", "nope", "--validator", "true"], "unknown coder kind 'nope': use one of"),
        (["--coder", "command", "--validator", "true"], "--coder command needs --coder-command"),
        ([*COMMAND_CODER, "--max-recovery", "99999999999999999999"], "--max-recovery"),
        ([*COMMAND_CODER, "--max-attempts", "101"], "--max-attempts"),
        ([*COMMAND_CODER, "--ignore-wait"], "--ignore-wait only applies to --task"),
        ([*COMMAND_CODER, "--resume"], "--resume closes and reruns interrupted runs"),
    ],
    ids=["coder-empty", "coder-unknown", "no-command", "huge", "attempts", "ignore-wait", "resume"],
)
def test_bad_flags_are_one_line_and_exit_2(tmp_path: Path, args: list[str], said: str) -> None:
    repo = make_repo(tmp_path)
    for command in (["run", "fix it"], ["task", "add", "fix it"]):
        if command[0] == "task" and args[-1] in ("--ignore-wait", "--resume"):
            continue  # run's own flags
        done = repo.main(*command, *args)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        if "Usage:" not in done.stderr:  # typer's own range errors come with a usage line
            one_line(done.stderr)
    assert created(repo) == []


def test_a_task_id_that_is_not_text_is_no_task(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    task_id = os.fsdecode(b"t\xff")  # as Python decodes a process's arguments: escaped
    for args in (["run", "--task", task_id], ["task", "show", task_id]):
        done = repo.main(*args)
        assert done.returncode == 2, done.stderr
        assert "no task 't\\udcff'" in one_line(done.stderr)


def test_contract_init_into_a_missing_folder_says_so(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main("contract", "init", str(tmp_path / "nowhere" / "x.yaml"))
    assert done.returncode == 2
    assert "cannot write" in one_line(done.stderr) and "No such file" in done.stderr


def test_contract_files_are_read_bounded_and_strictly(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    big = repo.contract("big.yaml", "task: x\n" + "# padding\n" * 120_000)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"task: caf\xe9\n")
    cases = {
        "/dev/zero": "not a regular file",
        str(fifo): "not a regular file",
        str(big): "larger than 1024 KiB",
        str(latin): "invalid UTF-8 at byte 9",
        str(tmp_path): "is a directory",
    }
    for path, said in cases.items():
        for args in (["contract", "check", path], ["run", "--contract", path]):
            done = repo.main(*args)
            assert done.returncode == 2, (args, done.stderr)
            assert said in one_line(done.stderr), done.stderr
    assert created(repo) == []


def test_a_coder_that_changes_nothing_is_stuck_after_two_attempts(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main("run", "fix it", *COMMAND_CODER, "--max-recovery", "20", "--json")
    assert done.returncode == 1, done.stderr
    (payload,) = repo.payloads()
    assert payload["reason"] == "stuck: attempt 2 failed exactly as attempt 1 did"
    assert payload["attempts"]["total"] == 2


def test_control_characters_in_an_instruction_reach_neither_the_terminal_nor_main(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    instruction = "\x1b[2J\x1b]0;pwned\x07fix\x1b[31m the\x08 bug\r\nand more"
    done = repo.main(
        "run",
        instruction,
        "--coder",
        "command",
        "--coder-command",
        "echo '\x1b[31mred' >> src/slug.py; echo \x1b[2J; exit 0",
        "--validator",
        "true",
        "--land",
        "merge",
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and "\x1b" not in done.stdout
    subject = git(repo.root, "log", "-1", "--format=%s", "main")
    assert subject == "fix the\\x08 bug"
    listed = repo.main("task", "list", "--json")
    assert '"title": "fix the\\\\x08 bug"' in listed.stdout


def test_a_stored_contract_warns_only_about_settings_the_user_set(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    added = repo.main("task", "add", "fix it", *COMMAND_CODER, "--json")
    assert added.returncode == 0, added.stderr
    task_id = json.loads(added.stdout)["id"]
    ran = repo.main("run", "--task", task_id)
    assert ran.returncode == 1, ran.stderr  # the coder changes nothing
    assert "ignores" not in ran.stderr, ran.stderr

    contract = repo.contract(
        "model.yaml",
        "task: fix it\ncoder: {kind: command, command: 'true', model: gpt-5}\n"
        "validators: [{id: t, run: 'true'}]\n",
    )
    added = repo.main("task", "add", "--contract", str(contract), "--json")
    task_id = json.loads(added.stdout)["id"]
    ran = repo.main("run", "--task", task_id)
    assert "the command coder ignores `model`" in ran.stderr, ran.stderr
    assert ran.stderr.count("ignores") == 1, ran.stderr  # once per run, `model` only
