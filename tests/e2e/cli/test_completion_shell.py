"""``assay completion bash`` in a real shell, and the tab-time call in a fresh process.

The printed script is sourced in ``bash --norc``, ``COMP_WORDS`` and ``COMP_CWORD`` are set as
readline would set them, and the completion function the script registered is called; it runs
the real ``assay`` with ``_ASSAY_COMPLETE=complete_bash``, which must build the whole command
tree without importing the run machinery. What each tab offers is
tests/unit/cli/test_completion.py.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

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


def test_bash_completes_the_top_level_commands(tmp_path: Path) -> None:
    offered = bash_complete(tmp_path, "")
    for name in ("run", "serve", "task", "ledger", "contract", "completion", "halt"):
        assert name in offered, offered
    assert bash_complete(tmp_path, "ta") == ["task"]
    assert sorted(bash_complete(tmp_path, "co")) == ["completion", "contract"]


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
