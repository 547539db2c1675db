"""The seat line of the live progress names each type change the change makes, and a seat that
makes none says nothing about types."""

from __future__ import annotations

import io

import pytest
from pydantic import JsonValue
from rich.console import Console

from assay.cli.progress import Progress, WarningsOnly
from assay.engine.effects import RunEvent


def seat_line(type_changes: list[JsonValue] | None) -> str:
    progress = Progress()
    out = io.StringIO()
    progress.console = Console(file=out, highlight=False, width=400)
    data: dict[str, JsonValue] = {
        "seat": 1, "coder": "command", "files": ["lib/x.py", "run.sh"], "viable": True,
    }  # fmt: skip
    if type_changes is not None:
        data["type_changes"] = type_changes
    progress(RunEvent("seat.finished", data))
    return out.getvalue().strip()


def test_the_seat_line_names_every_type_change() -> None:
    line = seat_line(
        [
            {"path": "lib/x.py", "before": "symlink", "after": "file"},
            {"path": "run.sh", "before": "file", "after": "executable"},
        ]
    )
    assert line == (
        "seat 1 [command]: 2 file(s) changed (lib/x.py, run.sh); "
        "type changed: lib/x.py symlink → file, run.sh file → executable"
    )


def test_many_type_changes_are_cut_after_five() -> None:
    many: list[JsonValue] = [
        {"path": f"f{n}", "before": "file", "after": "executable"} for n in range(7)
    ]
    line = seat_line(many)
    assert "f4 file → executable …" in line and "f5" not in line


def test_no_type_change_says_nothing_about_types() -> None:
    for empty in (None, []):
        line = seat_line(empty)
        assert line == "seat 1 [command]: 2 file(s) changed (lib/x.py, run.sh)"


def test_a_path_with_terminal_controls_is_shown_harmless() -> None:
    line = seat_line([{"path": "x\x1b[31m[bold]", "before": "symlink", "after": "file"}])
    assert "\x1b" not in line and "[bold]" in line


def test_a_long_seat_line_is_never_cut_inside_a_path() -> None:
    progress = Progress()
    assert progress.console.soft_wrap  # every line of the progress, not only this one
    out = io.StringIO()
    progress.console = Console(file=out, highlight=False, width=40, soft_wrap=True)
    long = "lib/ansible/modules/a_rather_long_module_name.py"
    changed: list[JsonValue] = [{"path": long, "before": "symlink", "after": "file"}]
    data: dict[str, JsonValue] = {"seat": 1, "coder": "command", "files": [long]}
    progress(RunEvent("seat.finished", {**data, "type_changes": changed}))
    assert f"type changed: {long} symlink → file" in out.getvalue()


def test_off_a_terminal_a_seat_error_and_a_warning_are_said_and_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    quiet = WarningsOnly()
    quiet(RunEvent(kind="attempt.started", data={"attempt": 1}))
    quiet(RunEvent(kind="seat.finished", data={"seat": 1, "coder": "llm", "files": []}))
    quiet(
        RunEvent(
            kind="seat.finished",
            data={"seat": 2, "coder": "llm", "files": [], "error": "no key\x1b[31m in $K"},
        )
    )
    quiet(RunEvent(kind="run.warning", data={"message": "the coder ignores model"}))
    assert capsys.readouterr().err.splitlines() == [
        '  error: seat 2 [llm]: "no key\\x1b[31m in $K"',
        "  warning: the coder ignores model",
    ]


FORGED_NAME = "evil\nFAKE  decision: land (seat 9)"
BIDI_NAME = "report\u202eexe.txt"


def test_a_hostile_name_cannot_forge_a_progress_line() -> None:
    """A file name with a newline and a forged decision, a name with a bidi override, and a
    finding and an error that carry them: every line printed is one of ours, and each name
    is shown escaped, on its line."""
    progress = Progress()
    out = io.StringIO()
    progress.console = Console(file=out, highlight=False, width=400, soft_wrap=True)
    progress(
        RunEvent(
            "seat.finished",
            {
                "seat": 1,
                "coder": "command",
                "files": [FORGED_NAME, BIDI_NAME],
                "viable": False,
                "error": "boom\n  decision: land (seat 9)",
            },
        )
    )
    progress(
        RunEvent(
            "attempt.decided",
            {
                "action": "halt",
                "seat": 1,
                "why": f"scope: {FORGED_NAME}",
                "failures": [f"scope: forbidden by rule: {FORGED_NAME}"],
            },
        )
    )
    progress(RunEvent("run.warning", {"message": f"ignored: {BIDI_NAME}\n  decision: land"}))
    lines = out.getvalue().splitlines()
    # the seat and its error's output (quoted, as a failed check's), the decision, its
    # failure (a line after its first is quoted output), the warning
    assert len(lines) == 6, lines
    assert [line.split()[0] for line in lines] == [
        "seat", "│", "decision:", "✗", "│", "warning:"
    ]  # fmt: skip
    assert not any(line.lstrip().startswith(("FAKE", "decision: land")) for line in lines)
    assert '"evil\\nFAKE  decision: land (seat 9)"' in lines[0]
    assert '"report<U+202E>exe.txt"' in lines[0] and "\u202e" not in out.getvalue()
    assert lines[0].endswith(" · boom") and lines[1] == "      │   decision: land (seat 9)"


def test_off_a_terminal_a_hostile_error_stays_on_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    quiet = WarningsOnly()
    error = f"cannot write {BIDI_NAME}\n  decision: land (seat 9)"
    quiet(RunEvent(kind="seat.finished", data={"seat": 1, "coder": "c", "error": error}))
    quiet(RunEvent(kind="run.warning", data={"message": FORGED_NAME}))
    assert capsys.readouterr().err.splitlines() == [
        '  error: seat 1 [c]: "cannot write report<U+202E>exe.txt"',
        "      │   decision: land (seat 9)",  # its output, quoted under it
        '  warning: "evil\\nFAKE  decision: land (seat 9)"',
    ]


@pytest.mark.parametrize(
    ("advisory", "said"), [(True, "validator lint: warn"), (False, "validator lint: error")]
)
def test_a_check_that_could_not_run_is_an_error_only_when_it_may_block(
    advisory: bool, said: str
) -> None:
    progress = Progress()
    out = io.StringIO()
    progress.console = Console(file=out, highlight=False, width=400)
    severity = "warn" if advisory else "block"
    data: dict[str, JsonValue] = {
        "attempt": 1, "seat": 1, "validator": "lint", "severity": severity, "error": True,
        "advisory": advisory, "justification": "exit 127", "findings": ["exit 127"],
    }  # fmt: skip
    progress(RunEvent("validator.finished", data))
    assert out.getvalue().strip() == said


def test_off_a_terminal_a_coder_error_quotes_the_last_lines_it_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not one escaped string of its whole output: its first line on the seat's, the last
    lines of the output under it, quoted as a failed validator's are."""
    printed = "\n".join(f"usage line {n}" for n in range(1, 9))
    error = f"`sed -x` exited with code 1; output tail:\n{printed}"
    WarningsOnly()(RunEvent(kind="seat.finished", data={"seat": 1, "coder": "c", "error": error}))
    assert capsys.readouterr().err.splitlines() == [
        "  error: seat 1 [c]: `sed -x` exited with code 1; output tail:",
        *[f"      │ usage line {n}" for n in range(4, 9)],
    ]
