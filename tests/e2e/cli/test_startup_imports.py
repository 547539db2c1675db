"""``assay --version``, ``-V``, ``--help``, ``-h`` and bare ``assay`` answer without typer.

Each is run as a real process whose ``sys.modules`` is written out at exit (an ``atexit`` hook
around :func:`assay.cli.main.main`), so the check is on what was imported, never on a timer.
The top-level help is printed from :mod:`assay.cli.commands`; a test compares that table with
the typer app's commands so the two never drift.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import typer.main

from assay import __version__
from assay.cli import main as main_module
from assay.cli.app import build_app
from assay.cli.commands import BY_NAME, COMMANDS, top_level_help
from assay.cli.halt import HELP as HALT_HELP

# Heavy packages (and assay's own heavy layers) none of the fast paths may import.
HEAVY = (
    "typer",
    "click",
    "pydantic",
    "pydantic_core",
    "sqlalchemy",
    "rich",
    "yaml",
    "httpx",
    "temporalio",
    "fastapi",
    "assay.engine",
    "assay.adapters.git",
    "assay.adapters.store.sql",
    "assay.core.contract",
    "assay.core.tasks",
    "assay.core.payload",
    "assay.web",
)

_WRAPPER = """
import atexit, json, sys
out, args = sys.argv[1], sys.argv[2:]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["assay", *args]
from assay.cli.main import main
main()
"""


def run_recording(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASSAY_", "_ASSAY_"))}
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(out), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, set(json.loads(out.read_text()))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_imports_nothing_heavy(tmp_path: Path, flag: str) -> None:
    done, modules = run_recording(tmp_path, flag)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"assay {__version__}\n", "")
    assert heavy_in(modules) == []


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_imports_nothing_heavy(tmp_path: Path, flag: str) -> None:
    done, modules = run_recording(tmp_path, flag)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == top_level_help()
    assert heavy_in(modules) == []


def test_bare_assay_prints_the_help_on_stderr_and_exits_2(tmp_path: Path) -> None:
    done, modules = run_recording(tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == top_level_help()
    assert heavy_in(modules) == []


def test_the_recorder_sees_typer_on_a_typer_path(tmp_path: Path) -> None:
    # The control: a command that goes through typer is caught by the same check.
    done, modules = run_recording(tmp_path, "contract", "--help")
    assert done.returncode == 0, done.stderr
    assert "typer" in heavy_in(modules)


def test_the_help_names_every_command_with_its_whole_summary() -> None:
    text = top_level_help()
    flat = " ".join(text.split())
    for command in COMMANDS:
        assert f" {command.name} " in f" {flat} ", command.name
        assert " ".join(command.summary.split()) in flat, command.name
    assert "-V, --version" in text and "-h, --help" in text
    assert max(len(line) for line in text.splitlines()) <= 78


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").split("\n\n")[0].split())


def test_the_table_matches_the_typer_apps_commands() -> None:
    root = typer.main.get_command(build_app())
    assert isinstance(root, typer.main.TyperGroup)
    commands = root.commands
    assert [c.name for c in COMMANDS] == list(commands), "the table and the app list differ"
    for entry in COMMANDS:
        assert entry.summary == _first_paragraph(commands[entry.name].help), entry.name


@pytest.mark.parametrize("only", [None, "gc"])
def test_the_typer_roots_help_is_the_tables(only: str | None) -> None:
    # One renderer: typer's root prints the same help the fast path does, whatever it built.
    root = typer.main.get_command(build_app(only))
    with root.make_context("assay", ["gc"]) as ctx:
        assert ctx.get_help() + "\n" == top_level_help()


def test_the_halt_summary_is_the_halt_commands_own_help() -> None:
    assert BY_NAME["halt"].summary == HALT_HELP


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_beside_other_words_goes_through_typer(tmp_path: Path, flag: str) -> None:
    # The fast path answers a lone flag; beside other words typer's root option answers.
    done, modules = run_recording(tmp_path, flag, "gc")
    assert (done.returncode, done.stdout) == (0, f"assay {__version__}\n"), done.stderr
    assert "typer" in heavy_in(modules)


@pytest.mark.parametrize("args", [["--version", "--json"], ["--json", "-V"]])
def test_version_as_json(tmp_path: Path, args: list[str]) -> None:
    done, modules = run_recording(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"version": __version__}
    assert heavy_in(modules) == []


def test_the_quick_task_commands_are_answered_before_typer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The tasks module answers: its code is the exit code and typer is never built.
    seen: list[list[str]] = []

    def answer(args: list[str]) -> int | None:
        seen.append(args)
        return None if "--help" in args or args[1] != "list" else 0

    monkeypatch.setattr("assay.cli.task_list.main", answer)
    built: list[tuple[str | None, list[str]]] = []

    def build_app(only: str | None = None) -> Callable[..., None]:
        return lambda args, **_: built.append((only, args))

    monkeypatch.setattr("assay.cli.app.build_app", build_app)
    with pytest.raises(SystemExit) as caught:
        main_module.main(["task", "list", "--status", "held"])
    assert (caught.value.code, seen, built) == (0, [["task", "list", "--status", "held"]], [])
    # None means "not mine": typer's command answers instead.
    main_module.main(["task", "list", "--help"])
    assert built == [("task", ["task", "list", "--help"])]
    # Only the table's `early` module of the command is offered it: `ledger show` never is.
    main_module.main(["task", "show", "t-1"])
    main_module.main(["ledger", "show", "t-1"])
    assert [args[:2] for args in seen[2:]] == [["task", "show"]]
    assert [only for only, _ in built] == ["task", "task", "ledger"]


def test_task_list_declines_what_it_does_not_answer() -> None:
    # The real early module: anything but a plain `task list` is typer's (None).
    from assay.cli.task_list import main as early

    for args in (["task", "show", "t-1"], ["task", "list", "--help"], ["task", "list", "-x"]):
        assert early(args) is None, args
