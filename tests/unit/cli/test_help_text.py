"""Every command's ``--help``, groups' too: each subcommand is listed with its whole summary,
never cut short with "...", at any terminal width."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer
from typer.testing import CliRunner

from assay.cli.app import build_app
from assay.cli.workspace import summary


def _paths() -> Iterator[tuple[list[str], object]]:
    def walk(command: object, path: list[str]) -> Iterator[tuple[list[str], object]]:
        yield path, command
        for name, child in getattr(command, "commands", {}).items():
            yield from walk(child, [*path, name])

    yield from walk(typer.main.get_command(build_app()), [])


PATHS = [(path, command) for path, command in _paths() if path != ["halt"]]


@pytest.mark.parametrize("width", [60, 80, 200])
@pytest.mark.parametrize(("path", "command"), PATHS, ids=[" ".join(p) or "assay" for p, _ in PATHS])
def test_no_help_is_cut_short(path: list[str], command: object, width: int) -> None:
    shown = CliRunner().invoke(build_app(), [*path, "--help"], terminal_width=width).output
    assert shown.startswith("Usage: "), shown
    body = shown.split("\n", 1)[1]  # the usage line's COMMAND [ARGS]... is click's own
    assert "..." not in body, body
    flat = "".join(body.split())  # a wrap may break a line at a hyphen (re-arm)
    for child in getattr(command, "commands", {}).values():
        assert "".join(summary(child.help).split()) in flat, child.name  # all of it


def test_the_task_group_lists_whole_summaries() -> None:
    shown = CliRunner().invoke(build_app(), ["task", "--help"], terminal_width=80).output
    assert "Queue a task (an instruction with flags, or a contract) for `assay serve`." in " ".join(
        shown.split()
    )
