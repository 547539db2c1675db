"""What a tab offers, asked in-process as the shell's script asks it (``_ASSAY_COMPLETE`` and
bash's ``COMP_WORDS``/``COMP_CWORD``): the choices of every flag with a closed vocabulary (the
same ones its ``--help`` lists), coder kinds, task and run ids read without creating anything,
and ``assay halt``'s subcommands, options, halts and dispatches."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from support.repo import make_repo
from typer.testing import CliRunner

from assay.cli.app import build_app
from assay.cli.main import main
from assay.core.vocab import CanonicalHalt, CoderKind, TaskStatus

KINDS = [k.value for k in CoderKind if k is not CoderKind.REPLAY]


@pytest.fixture
def offered(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[object]:
    for name in ("ASSAY_DATABASE_URL", "ASSAY_HOME", "ASSAY_HALT_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)

    def complete(*words: str) -> list[str]:
        """What bash is offered after ``assay words…`` (the last word being completed)."""
        monkeypatch.setenv("_ASSAY_COMPLETE", "complete_bash")
        monkeypatch.setenv("COMP_WORDS", " ".join(["assay", *words]))
        monkeypatch.setenv("COMP_CWORD", str(len(words)))
        capsys.readouterr()
        try:
            with pytest.raises(SystemExit) as done:
                main([])
        finally:  # what the test runs next is no completion
            for name in ("_ASSAY_COMPLETE", "COMP_WORDS", "COMP_CWORD"):
                monkeypatch.delenv(name)
        assert done.value.code in (0, None)
        return [line for line in capsys.readouterr().out.splitlines() if line]

    yield complete


def _commands() -> Iterator[tuple[list[str], typer.main.TyperCommand]]:
    def walk(command: object, path: list[str]) -> Iterator[tuple[list[str], object]]:
        children = getattr(command, "commands", None)
        if children is None:
            yield path, command
            return
        for name, child in children.items():
            yield from walk(child, [*path, name])

    yield from walk(typer.main.get_command(build_app()), [])  # type: ignore[misc]


def _closed_options() -> list[tuple[list[str], str, list[str]]]:
    """(command path, option, its values) for every option or argument whose type is a
    closed vocabulary (an enum) or whose metavar lists its values (``<a|b|c>``); an argument
    is named ``""`` (its values follow the command)."""
    found = []
    for path, command in _commands():
        for param in command.params:
            option = param.opts[0] if param.opts[0].startswith("-") else ""
            kind = param.type_descriptor.annotation
            if isinstance(kind, type) and issubclass(kind, enum.Enum):
                found.append((path, option, [str(m.value) for m in kind]))
            elif param.metavar and re.fullmatch(r"<[\w-]+(\|[\w-]+)+>", param.metavar):
                found.append((path, option, param.metavar[1:-1].split("|")))
    return found


CLOSED = _closed_options()


def test_the_closed_vocabularies_include_the_ones_users_reach_for() -> None:
    named = {(" ".join(path), option) for path, option, _ in CLOSED}
    for expected in [
        ("run", "--land"),
        ("run", "--sandbox"),
        ("run", "--progress"),
        ("task add", "--land"),
        ("task add", "--sandbox"),
        ("task list", "--status"),
        ("usage", "--by"),
        ("brief", "--kind"),
        ("serve", "--events"),
        ("completion", ""),
    ]:
        assert expected in named, expected


@pytest.mark.parametrize(
    ("path", "option", "values"), CLOSED, ids=[f"{' '.join(p)} {o}" for p, o, _ in CLOSED]
)
def test_every_closed_flag_lists_its_values_in_help_and_completes_them(
    offered: object, path: list[str], option: str, values: list[str]
) -> None:
    shown = CliRunner().invoke(build_app(), [*path, "--help"], terminal_width=200).output
    if option:
        assert f"{option} <{'|'.join(values)}>" in shown, shown
    else:  # an argument: its help names every value
        assert all(value in shown for value in values), shown
    assert offered(*path, *[option][: len(option) > 0], "") == values  # type: ignore[operator]


@pytest.mark.parametrize("command", [["run"], ["task", "add"]])
def test_coder_completes_its_kinds_and_its_help_names_them(
    offered: object, command: list[str]
) -> None:
    assert offered(*command, "--coder", "") == KINDS  # type: ignore[operator]
    assert offered(*command, "--coder", "c") == ["command", "claude", "codex"]  # type: ignore[operator]
    shown = " ".join(CliRunner().invoke(build_app(), [*command, "--help"]).output.split())
    assert "--coder KIND[:MODEL]" in shown
    assert all(f"{kind}," in shown or f"{kind} " in shown for kind in KINDS)
    assert (
        f"<{'|'.join(s.value for s in TaskStatus)}>"
        in CliRunner().invoke(build_app(), ["task", "list", "--help"], terminal_width=200).output
    )


ID_WORDS = [
    ["task", "show"],
    ["task", "hold"],
    ["task", "release"],
    ["task", "cancel"],
    ["ledger", "show"],
    ["run", "--task"],
]


def test_task_and_run_ids_complete_newest_first(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    offered: object,
) -> None:
    repo = make_repo(tmp_path).root
    monkeypatch.chdir(repo)
    added = []
    for title in ("first", "second\nline"):
        done = CliRunner().invoke(
            build_app(), ["task", "add", title, "--coder-command", "true", "--sandbox", "none"]
        )
        assert done.exit_code == 0, done.output
        added.append(done.output.split()[1].rstrip(":"))
    for words in ID_WORDS:
        assert offered(*words, "") == added[::-1], words  # type: ignore[operator]
        assert offered(*words, added[0][:-2]) == [added[0]]  # type: ignore[operator]
    # zsh shows each id with its status and title, each on one line.
    monkeypatch.setenv("_ASSAY_COMPLETE", "complete_zsh")
    monkeypatch.setenv("_TYPER_COMPLETE_ARGS", "assay task show ")
    with pytest.raises(SystemExit):
        main([])
    shown = capsys.readouterr().out
    assert f'"{added[1]}":"queued second"' in shown, shown  # its title: the first line
    assert f'"{added[0]}":"queued first"' in shown


def test_ids_are_read_without_creating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offered: object
) -> None:
    repo = make_repo(tmp_path).root
    monkeypatch.chdir(repo)
    for words in [*ID_WORDS, ["payload", "show"]]:
        assert offered(*words, "") == []  # type: ignore[operator]
    assert not (repo / ".assay").exists()
    monkeypatch.chdir(tmp_path)  # not a repository: nothing offered, nothing said
    assert offered("task", "show", "") == []  # type: ignore[operator]


def test_a_run_id_completes_where_a_run_is_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offered: object
) -> None:
    repo = make_repo(tmp_path).root
    monkeypatch.chdir(repo)
    done = CliRunner().invoke(
        build_app(),
        [
            "run",
            "x",
            "--coder-command",
            "true",
            "--sandbox",
            "none",
            "--json",
            "--progress",
            "never",
        ],
    )
    run_id = json.loads(done.stdout)["run_id"]
    assert offered("payload", "show", "") == [run_id]  # type: ignore[operator]
    assert run_id not in offered("task", "show", "")  # type: ignore[operator]


def test_schema_completes_the_outputs_it_lists(offered: object) -> None:
    listed = json.loads(CliRunner().invoke(build_app(), ["schema", "--list"]).stdout)
    assert offered("schema", "") == list(listed)  # type: ignore[operator]
    assert "task_show" in offered("schema", "task_")  # type: ignore[operator]


def test_halt_completes_its_subcommands_options_halts_and_dispatches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offered: object
) -> None:
    monkeypatch.chdir(tmp_path)
    complete = offered
    assert complete("halt", "") == ["arm", "check", "attest", "rearm"]  # type: ignore[operator]
    assert complete("halt", "re") == ["rearm"]  # type: ignore[operator]
    check = complete("halt", "check", "--")  # type: ignore[operator]
    assert {"--dispatch-id", "--condition", "--fire", "--evidence", "--state-dir"} <= set(check)
    given = complete("halt", "check", "--fire", "--")  # type: ignore[operator]
    assert "--fire" not in given and "--condition" in given
    assert "--contract" in complete("halt", "arm", "--")  # type: ignore[operator]
    halts = complete("halt", "check", "--condition", "")  # type: ignore[operator]
    assert halts == [h.value for h in CanonicalHalt]
    assert complete("halt", "check", "--condition", "halt-sc") == ["halt-scope-breach"]  # type: ignore[operator]
    assert complete("halt", "check", "--evidence", "") == []  # type: ignore[operator]
    state = tmp_path / "state"
    state.mkdir()
    (state / "d-1.json").write_text("{}")
    words = complete("halt", "rearm", "--state-dir", str(state), "--dispatch-id", "")  # type: ignore[operator]
    assert words == ["d-1"]
    assert complete("halt", "arm", "--dispatch-id", "") == []  # type: ignore[operator]
    assert not (tmp_path / ".assay").exists()
