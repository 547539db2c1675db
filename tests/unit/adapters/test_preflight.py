"""The preflight on a real repository and real files: what this machine cannot run of a
contract, one line per problem, looked up as the sandbox will show it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from assay.adapters.preflight import advisory_problems, check, program_problem
from assay.adapters.sandbox_spec import SandboxSpec
from assay.core.contract import Contract, parse_contract

KEYS = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "README").write_text("calc\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "init")
    return root


def program(folder: Path, name: str, *, executable: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755 if executable else 0o644)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH folder with every agent program in it."""
    folder = tmp_path / "bin"
    for name in ("claude", "codex", "aider", "mini", "lint"):
        program(folder, name)
    return folder


def environ(tmp_path: Path, path: Path | str, **more: str) -> dict[str, str]:
    home = tmp_path / "operator-home"
    home.mkdir(exist_ok=True)
    return {"PATH": f"{path}:/usr/bin:/bin", "HOME": str(home), **more}


def contract(text: str) -> Contract:
    return parse_contract(f"task: Fix add() so the tests pass.\n{text}")


def problems(repo: Path, text: str, env: dict[str, str], **kw: bool) -> list[str]:
    return check(contract(text), repo=repo, home=repo / ".assay", env=env, **kw)


def without_bwrap_line(found: list[str]) -> list[str]:
    """The problems other than a machine without a usable bwrap (checked on its own)."""
    return [p for p in found if "bubblewrap" not in p]


def test_a_machine_that_has_everything_has_no_problem(
    tmp_path: Path, repo: Path, bin_dir: Path
) -> None:
    text = (
        "seats: 4\ncoder: [claude, codex, aider, mini]\njudges: 2\njudge: [claude, codex]\n"
        "validators: [{id: lint, run: 'lint . && true'}]\nland: merge\n"
    )
    assert without_bwrap_line(problems(repo, text, environ(tmp_path, bin_dir, **KEYS))) == []


@pytest.mark.parametrize(
    ("kind", "install"),
    [
        ("claude", "npm install -g @anthropic-ai/claude-code"),
        ("codex", "npm install -g @openai/codex"),
        ("aider", "pip install aider-chat"),
        ("mini", "pip install mini-swe-agent"),
    ],
)
def test_each_agent_kind_missing_its_program(
    tmp_path: Path, repo: Path, kind: str, install: str
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    found = without_bwrap_line(problems(repo, f"coder: {kind}\n", environ(tmp_path, empty, **KEYS)))
    assert found == [f"coder {kind}: {kind} not found on PATH: install it with `{install}`"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("coder: claude\n", "coder claude: no API key: set ANTHROPIC_API_KEY"),
        ("coder: codex\n", "coder codex: no API key: set OPENAI_API_KEY"),
        ("coder: aider\n", "coder aider: no API key: set ANTHROPIC_API_KEY or OPENAI_API_KEY"),
        (
            "coder: {kind: mini, model: gpt-5-mini}\n",
            "coder mini: no API key for model gpt-5-mini: set OPENAI_API_KEY",
        ),
        (
            "coder: {kind: llm, model: m}\n",
            "coder llm: the llm coder reads its API key from $OPENAI_API_KEY, which is not set",
        ),
        (
            "coder: {kind: llm, model: m, base_url: 'http://127.0.0.1:9/v1', api_key_env: K}\n",
            "coder llm: the llm coder reads its API key from $K, which is not set",
        ),
    ],
)
def test_each_kind_missing_its_key(
    tmp_path: Path, repo: Path, bin_dir: Path, text: str, said: str
) -> None:
    found = without_bwrap_line(problems(repo, text, environ(tmp_path, bin_dir)))
    assert len(found) == 1 and found[0].startswith(said)


def test_a_key_given_in_the_contracts_env_counts(tmp_path: Path, repo: Path, bin_dir: Path) -> None:
    text = "coder: claude\nenv: {ANTHROPIC_API_KEY: $MY_CLAUDE_KEY}\n"
    env = environ(tmp_path, bin_dir, MY_CLAUDE_KEY="k")
    assert without_bwrap_line(problems(repo, text, env)) == []


def test_the_command_coder_missing_its_program(tmp_path: Path, repo: Path) -> None:
    found = without_bwrap_line(
        problems(
            repo, "coder: {kind: command, command: 'nosuchprog --go'}\n", environ(tmp_path, "/x")
        )
    )
    assert found == [
        "coder command: nosuchprog not found on PATH: install it "
        "(or fix `coder.command` (--coder-command))"
    ]


def test_a_program_in_the_sandboxs_private_tmp_is_named_with_the_way_out(
    tmp_path: Path, repo: Path
) -> None:
    script = program(tmp_path / "newuser", "fix.sh")
    assert str(script).startswith("/tmp/")  # what a new user does: a script in /tmp
    text = f"coder: {{kind: command, command: '{script}'}}\n"
    found = without_bwrap_line(problems(repo, text, environ(tmp_path, "/x")))
    assert len(found) == 1
    said = found[0]
    assert said.startswith(f"coder command: {script} cannot be seen inside the sandbox: ")
    assert "the sandbox has a private /tmp of its own" in said
    assert "commit it to the repository" in said and "--sandbox none" in said
    assert "`env:`" in said  # a coder's sandbox shows what the contract names
    # Each way out the message names works:
    unconfined = text + "sandbox: none\n"
    assert problems(repo, unconfined, environ(tmp_path, "/x")) == []
    declared = text + f"env: {{FIX: '{script}'}}\n"
    assert without_bwrap_line(problems(repo, declared, environ(tmp_path, "/x"))) == []
    listed = f"coder: {{kind: command, command: ['{script}']}}\n"  # its own folder is bound
    assert without_bwrap_line(problems(repo, listed, environ(tmp_path, "/x"))) == []


def test_a_program_in_the_operators_home_is_hidden_unless_on_path(
    tmp_path: Path, repo: Path
) -> None:
    env = environ(tmp_path, "/x")
    tool = program(Path(env["HOME"]) / "tools", "agent")
    text = f"coder: {{kind: command, command: '{tool} --go'}}\n"
    found = without_bwrap_line(problems(repo, text, env))
    assert len(found) == 1 and "the sandbox hides your home folder" in found[0]
    on_path = environ(tmp_path, tool.parent)
    assert (
        without_bwrap_line(problems(repo, "coder: {kind: command, command: agent}\n", on_path))
        == []
    )


def test_a_program_that_exists_but_is_not_executable(tmp_path: Path, repo: Path) -> None:
    folder = tmp_path / "bin"
    program(folder, "claude", executable=False)
    found = without_bwrap_line(problems(repo, "coder: claude\n", environ(tmp_path, folder, **KEYS)))
    assert found == [
        f"coder claude: claude is on PATH at {folder / 'claude'} but is not executable"
    ]
    loose = program(tmp_path / "opt", "fix.sh", executable=False)
    text = f"coder: {{kind: command, command: ['{loose}']}}\nsandbox: none\n"
    found = problems(repo, text, environ(tmp_path, "/x"))
    assert found == [
        f"coder command: {loose} is not an executable file (chmod +x it) "
        "(or fix `coder.command` (--coder-command))"
    ]


def test_a_relative_command_must_be_committed_and_executable(tmp_path: Path, repo: Path) -> None:
    env = environ(tmp_path, "/x")
    text = "coder: {kind: command, command: './fix.sh {prompt_file}'}\n"
    found = without_bwrap_line(problems(repo, text, env))
    assert found == [
        "coder command: ./fix.sh is not in the repository: a seat is a fresh checkout of the "
        "HEAD commit (commit it, or fix `coder.command` (--coder-command))"
    ]
    program(repo, "fix.sh")
    found = without_bwrap_line(problems(repo, text, env))
    assert len(found) == 1 and "./fix.sh is not committed" in found[0]
    (repo / "fix.sh").chmod(0o644)
    git(repo, "add", "fix.sh")
    git(repo, "commit", "-qm", "fix.sh")
    found = without_bwrap_line(problems(repo, text, env))
    assert len(found) == 1 and "committed without its executable bit" in found[0]
    git(repo, "update-index", "--chmod=+x", "fix.sh")
    git(repo, "commit", "-qm", "executable")
    assert without_bwrap_line(problems(repo, text, env)) == []
    # after a `cd`, a relative path is somewhere this check cannot see: not looked up
    assert (
        without_bwrap_line(problems(repo, "coder: {kind: command, command: 'cd x && ./y'}\n", env))
        == []
    )


def test_only_the_second_seats_program_is_missing(
    tmp_path: Path, repo: Path, bin_dir: Path
) -> None:
    (bin_dir / "codex").unlink()
    text = "seats: 2\ncoder: [claude, codex]\n"
    found = without_bwrap_line(problems(repo, text, environ(tmp_path, bin_dir, **KEYS)))
    assert found == [
        "coder codex (seat 2): codex not found on PATH: install it with "
        "`npm install -g @openai/codex`"
    ]
    # a coder no seat uses is not looked at
    one_seat = "seats: 1\ncoder: [claude, codex]\n"
    assert without_bwrap_line(problems(repo, one_seat, environ(tmp_path, bin_dir, **KEYS))) == []


def test_a_judges_program_and_key(tmp_path: Path, repo: Path, bin_dir: Path) -> None:
    (bin_dir / "codex").unlink()
    text = (
        "seats: 2\ncoder: claude\njudges: 3\n"
        "judge: [{kind: codex}, {kind: llm, model: j, api_key_env: JK}]\n"
    )
    found = without_bwrap_line(
        problems(repo, text, environ(tmp_path, bin_dir, ANTHROPIC_API_KEY="a"))
    )
    assert found[0] == (
        "judge 1 (codex): codex not found on PATH: install it with `npm install -g @openai/codex`"
    )
    assert found[1].startswith("judge 1 (codex): no API key: set OPENAI_API_KEY")
    assert found[2].startswith("judge 2 (llm): the judge reads its API key from $JK")
    assert len(found) == 3
    # with one seat no judge is ever asked
    alone = text.replace("seats: 2", "seats: 1")
    assert (
        without_bwrap_line(problems(repo, alone, environ(tmp_path, bin_dir, ANTHROPIC_API_KEY="a")))
        == []
    )


def test_a_validators_program_and_a_judge_validators_key(
    tmp_path: Path, repo: Path, bin_dir: Path
) -> None:
    text = (
        "coder: claude\nvalidators:\n"
        "  - {id: tests, run: 'nosuchtest -q'}\n"
        "  - {id: lint, run: 'lint .', on_fail: warn}\n"
        "  - {id: review, kind: judge, model: m, api_key_env: REVIEW_KEY}\n"
    )
    found = without_bwrap_line(problems(repo, text, environ(tmp_path, bin_dir, **KEYS)))
    assert found[0] == "validator tests: nosuchtest not found on PATH: install it (or fix `run`)"
    assert found[1].startswith("validator review: the judge reads its API key from $REVIEW_KEY")
    assert len(found) == 2


def test_a_dirty_base_refuses_a_merge_naming_every_file(
    tmp_path: Path, repo: Path, bin_dir: Path
) -> None:
    env = environ(tmp_path, bin_dir, **KEYS)
    text = "coder: claude\nvalidators: [{id: t, run: 'true'}]\nland: merge\n"
    assert without_bwrap_line(problems(repo, text, env)) == []  # clean
    (repo / "README").write_text("changed\n")
    (repo / "calc.py").write_text("changed\n")
    (repo / "notes.txt").write_text("untracked: never in the way of a merge\n")
    found = without_bwrap_line(problems(repo, text, env))
    assert found == [
        "land: merge lands on main, whose checkout has uncommitted changes to README, calc.py: "
        "commit or stash them first, or land on a branch (--land branch)"
    ]
    assert without_bwrap_line(problems(repo, text, env, landing=False)) == []
    branch = text.replace("land: merge", "land: branch")
    assert without_bwrap_line(problems(repo, branch, env)) == []
    # no verifying validator: a merge leaves a branch anyway, so the checkout is not in the way
    unverified = "coder: claude\nland: merge\n"
    assert without_bwrap_line(problems(repo, unverified, env)) == []


def test_several_problems_are_several_lines(tmp_path: Path, repo: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (repo / "calc.py").write_text("dirty\n")
    text = (
        "seats: 2\ncoder: [claude, {kind: command, command: 'nosuchprog'}]\n"
        "validators: [{id: tests, run: nosuchtest}]\nland: merge\n"
    )
    found = without_bwrap_line(problems(repo, text, environ(tmp_path, empty)))
    assert [line.split(":")[0] for line in found] == [
        "coder claude (seat 1)",
        "coder claude (seat 1)",
        "coder command (seat 2)",
        "validator tests",
        "land",
    ]
    assert all("\n" not in line for line in found)


def test_a_missing_bwrap_is_one_of_the_lines(tmp_path: Path, repo: Path, bin_dir: Path) -> None:
    env = environ(tmp_path, bin_dir, **KEYS, ASSAY_BWRAP=str(tmp_path / "no-bwrap"))
    found = problems(repo, "coder: claude\n", env)
    assert len(found) == 1 and "bubblewrap (bwrap) is not installed" in found[0]
    assert "--sandbox none" in found[0]


def test_a_program_hidden_mid_run_says_so_as_the_preflight_does(tmp_path: Path) -> None:
    tool = program(tmp_path / "newuser", "agent")
    sandbox = SandboxSpec(hidden=(tmp_path / "operator-home",))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "operator-home")}
    said = program_problem(str(tool), env, sandbox, argv=["/bin/sh", "-c", str(tool)])
    assert said is not None and "the sandbox has a private /tmp of its own" in said
    assert program_problem(str(tool), env, None) is None  # unconfined: it is there
    assert program_problem(str(tool), env, sandbox, argv=[str(tool)]) is None  # bound back
    os.remove(tool)
    assert program_problem(str(tool), env, None) == f"{tool} does not exist"


def test_a_pull_request_landing_needs_its_token_and_remote(
    tmp_path: Path, repo: Path, bin_dir: Path
) -> None:
    text = "coder: claude\nvalidators: [{id: t, run: 'true'}]\nland: pr\n"
    env = environ(tmp_path, bin_dir, **KEYS)
    assert without_bwrap_line(problems(repo, text, env)) == [
        "land: pr: GITHUB_TOKEN is not set; export a token that may push and open pull "
        "requests on the repository"
    ]
    env["GITHUB_TOKEN"] = "t"
    assert without_bwrap_line(problems(repo, text, env)) == [
        "land: pr: the repository has no remote named 'origin' (`pr.remote`)"
    ]
    git(repo, "remote", "add", "origin", "https://github.com/octo/calc.git")
    assert without_bwrap_line(problems(repo, text, env)) == []


def test_a_validators_script_left_uncommitted_is_named(
    tmp_path: Path, repo: Path, bin_dir: Path
) -> None:
    env = environ(tmp_path, bin_dir, **KEYS)
    text = "coder: claude\nvalidators: [{id: tests, run: './check.sh -q'}]\n"
    # not there at all: the coder may be the one to write it
    assert without_bwrap_line(problems(repo, text, env)) == []
    program(repo, "check.sh")  # here, but a validator runs on a fresh checkout of the change
    found = without_bwrap_line(problems(repo, text, env))
    assert len(found) == 1 and found[0].startswith("validator tests: ./check.sh is not committed")


def test_a_warn_only_validator_that_cannot_run_is_advice_never_a_refusal(
    tmp_path: Path, repo: Path, bin_dir: Path
) -> None:
    text = (
        "coder: claude\nvalidators:\n"
        "  - {id: tests, run: 'true'}\n"
        "  - {id: lint, run: 'nosuchlint .', on_fail: warn}\n"
        "  - {id: review, kind: judge, model: m, api_key_env: REVIEW_KEY, on_fail: warn}\n"
    )
    env = environ(tmp_path, bin_dir, **KEYS)
    assert without_bwrap_line(problems(repo, text, env)) == []
    advice = advisory_problems(contract(text), repo=repo, home=repo / ".assay", env=env)
    assert advice[0] == "validator lint: nosuchlint not found on PATH: install it (or fix `run`)"
    assert advice[1].startswith("validator review: the judge reads its API key from $REVIEW_KEY")
    assert len(advice) == 2
