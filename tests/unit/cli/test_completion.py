"""``assay completion bash|zsh|fish``: the script, and the call it makes at every tab, run
in-process with the variables each shell's script sets (bash's ``COMP_WORDS`` and
``COMP_CWORD``, zsh's and fish's ``_TYPER_COMPLETE_*``). The printed bash script sourced in a
real bash, and the tab-time call's imports in a fresh process, are
tests/e2e/cli/test_completion_shell.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.in_process import run_assay


def assay_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSAY_", "_ASSAY_"))}
    env.update(extra)
    return env


def assay(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_assay(args, cwd=tmp_path, env=assay_env(**env))


def script(tmp_path: Path, shell: str) -> str:
    done = assay(tmp_path, "completion", shell)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout


def bash_tab(tmp_path: Path, *words: str) -> list[str]:
    """What the bash script's call offers after ``words`` (the last one being completed; ""
    for a new word): the program run with the variables the script's function sets."""
    done = assay(
        tmp_path,
        _ASSAY_COMPLETE="complete_bash",
        COMP_WORDS=" ".join(["assay", *words]),
        COMP_CWORD=str(len(words)),
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_the_bash_script_registers_a_completion_for_assay(tmp_path: Path) -> None:
    text = script(tmp_path, "bash")
    assert "_ASSAY_COMPLETE=complete_bash" in text
    assert text.rstrip().endswith("complete -o default -F _assay_completion assay")


def test_bash_completes_a_groups_subcommands(tmp_path: Path) -> None:
    assert bash_tab(tmp_path, "task", "") == [
        "add",
        "list",
        "show",
        "hold",
        "release",
        "cancel",
        "stop",
        "retry",
        "delete",
        "prune",
    ]
    assert bash_tab(tmp_path, "task", "re") == ["release", "retry"]


def test_bash_completes_a_commands_options(tmp_path: Path) -> None:
    offered = bash_tab(tmp_path, "run", "--co")
    assert {"--contract", "--coder", "--coder-command"} <= set(offered), offered
    assert all(o.startswith("--co") for o in offered), offered
    assert bash_tab(tmp_path, "completion", "") == ["bash", "zsh", "fish"]


def test_zsh_tab_time_call_completes_subcommands(tmp_path: Path) -> None:
    text = script(tmp_path, "zsh")
    assert text.startswith("#compdef assay") and "_ASSAY_COMPLETE=complete_zsh" in text
    done = assay(tmp_path, _ASSAY_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="assay task ho")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("_arguments") and '"hold"' in done.stdout, done.stdout
    assert '"show"' not in done.stdout


def test_fish_tab_time_call_completes_subcommands(tmp_path: Path) -> None:
    assert "_ASSAY_COMPLETE=complete_fish" in script(tmp_path, "fish")
    done = assay(
        tmp_path,
        _ASSAY_COMPLETE="complete_fish",
        _TYPER_COMPLETE_FISH_ACTION="get-args",
        _TYPER_COMPLETE_ARGS="assay contract ",
    )
    assert done.returncode == 0, done.stderr
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == ["init", "check"]


@pytest.mark.parametrize("args", [["completion", "tcsh"], ["completion"]])
def test_an_unknown_or_missing_shell_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    done = assay(tmp_path, *args)
    assert done.returncode == 2 and done.stdout == "", done
    assert "Traceback" not in done.stderr
