"""``assay completion bash|zsh|fish``: the script, and the call it makes at every tab.

bash is driven for real: the printed script is sourced in ``bash --norc``, ``COMP_WORDS`` and
``COMP_CWORD`` are set as readline would set them, and the completion function the script
registered is called; it runs the real ``assay`` with ``_ASSAY_COMPLETE=complete_bash``, which
must build the whole command tree. zsh and fish are not installed here: their tab-time call
is made directly, with the variables their scripts set.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.repo import ASSAY

COMMAND = [str(ASSAY)]


def assay_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSAY_", "_ASSAY_"))}
    env.update(extra)
    return env


def script(shell: str) -> str:
    done = subprocess.run(
        [*COMMAND, "completion", shell],
        capture_output=True,
        text=True,
        env=assay_env(),
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def bash_complete(tmp_path: Path, *words: str) -> list[str]:
    """What bash offers after ``words`` (the last one being completed; "" for a new word)."""
    path = tmp_path / "assay.bash"
    path.write_text(script("bash"))
    program = " ".join(shlex.quote(part) for part in COMMAND)
    driver = f"""
        source {shlex.quote(str(path))}
        complete -p assay >/dev/null || exit 9
        COMP_WORDS=(assay {" ".join(shlex.quote(w) for w in words)})
        COMP_CWORD={len(words)}
        _assay_completion {program}
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", driver],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        text=True,
        env=assay_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_the_bash_script_registers_a_completion_for_assay() -> None:
    text = script("bash")
    assert "_ASSAY_COMPLETE=complete_bash" in text
    assert text.rstrip().endswith("complete -o default -F _assay_completion assay")


def test_bash_completes_the_top_level_commands(tmp_path: Path) -> None:
    offered = bash_complete(tmp_path, "")
    for name in ("run", "serve", "task", "ledger", "contract", "completion", "halt"):
        assert name in offered, offered
    assert bash_complete(tmp_path, "ta") == ["task"]
    assert sorted(bash_complete(tmp_path, "co")) == ["completion", "contract"]


def test_bash_completes_a_groups_subcommands(tmp_path: Path) -> None:
    assert bash_complete(tmp_path, "task", "") == [
        "add",
        "list",
        "show",
        "hold",
        "release",
        "cancel",
        "delete",
        "prune",
    ]
    assert bash_complete(tmp_path, "task", "re") == ["release"]


def test_bash_completes_a_commands_options(tmp_path: Path) -> None:
    offered = bash_complete(tmp_path, "run", "--co")
    assert {"--contract", "--coder", "--coder-command"} <= set(offered), offered
    assert all(o.startswith("--co") for o in offered), offered
    assert bash_complete(tmp_path, "completion", "") == ["bash", "zsh", "fish"]


def test_zsh_tab_time_call_completes_subcommands() -> None:
    text = script("zsh")
    assert text.startswith("#compdef assay") and "_ASSAY_COMPLETE=complete_zsh" in text
    done = subprocess.run(
        COMMAND,
        capture_output=True,
        check=False,
        text=True,
        env=assay_env(_ASSAY_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="assay task ho"),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("_arguments") and '"hold"' in done.stdout, done.stdout
    assert '"show"' not in done.stdout


def test_fish_tab_time_call_completes_subcommands() -> None:
    assert "_ASSAY_COMPLETE=complete_fish" in script("fish")
    done = subprocess.run(
        COMMAND,
        capture_output=True,
        check=False,
        text=True,
        env=assay_env(
            _ASSAY_COMPLETE="complete_fish",
            _TYPER_COMPLETE_FISH_ACTION="get-args",
            _TYPER_COMPLETE_ARGS="assay contract ",
        ),
    )
    assert done.returncode == 0, done.stderr
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == ["init", "check"]


@pytest.mark.parametrize("args", [["completion", "tcsh"], ["completion"]])
def test_an_unknown_or_missing_shell_is_a_usage_error(args: list[str]) -> None:
    done = subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, env=assay_env(), check=False
    )
    assert done.returncode == 2 and done.stdout == "", done
    assert "Traceback" not in done.stderr


def test_the_tab_time_call_builds_the_tree_without_the_run_machinery(tmp_path: Path) -> None:
    # Every command module is imported to build the tree, each keeps its heavy imports inside
    # its function: a tab costs typer, never SQLAlchemy, the engine, YAML or rich.
    out = tmp_path / "modules.json"
    wrapper = (
        "import atexit, json, sys\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
        "sys.argv = ['assay']\n"
        "from assay.cli.main import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper],
        capture_output=True,
        text=True,
        check=False,
        env=assay_env(_ASSAY_COMPLETE="complete_bash", COMP_WORDS="assay ta", COMP_CWORD="1"),
    )
    assert (done.returncode, done.stdout) == (0, "task\n"), done.stderr
    modules = json.loads(out.read_text())
    assert "assay.cli.run" in modules and "assay.cli.serve" in modules  # the whole tree
    heavy = ("sqlalchemy", "assay.engine", "yaml", "rich", "assay.core.contract")
    assert [m for m in modules if m.split(".")[0] in heavy or m.startswith(heavy)] == []
