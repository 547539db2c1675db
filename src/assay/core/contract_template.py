"""The contract ``assay contract init`` writes, with validators that run where it was written.

A template whose checks cannot run fails its first run for a reason that has nothing to do with
the task, so its validators follow what was found on the machine (:class:`ToolFacts`, found by
the CLI): ``tests`` when pytest runs for this repository and it has test files, ``lint`` (warn
only) when ruff runs; a check that was not found is written commented out, with a comment that
says what was looked for. Pure: the finding is the caller's.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from assay.core.contract_yaml import TEMPLATE, VALIDATORS_MARK

# The coder settings the template writes: a value equal to one of these (or to the default) is
# not one the user chose, so a run never warns that a coder kind ignores it.
TEMPLATE_CODER: Mapping[str, object] = MappingProxyType(
    {"kind": "claude", "model": None, "timeout_seconds": 1800, "max_turns": 40}
)

# How pytest and ruff are written when they were not found (commented out).
PYTEST_MODULE = "python3 -m pytest"
RUFF = "ruff"
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py")
_WIDTH = 96  # the template's comment lines stay within this
_REVIEW = '  # - {id: review, kind: judge, model: gpt-5-mini, criteria: ["public API unchanged"]}'


@dataclass(frozen=True, slots=True)
class FoundTool:
    """A tool that ran where ``assay contract init`` ran: the command that runs it
    (``python3 -m pytest``, ``pytest``, ``ruff``) and the repository folder it came from
    (``.venv/bin``; empty: the PATH)."""

    command: str
    folder: str = ""

    def where(self) -> str:
        program = self.command.split()[0]
        if self.folder:
            return f"{program} from the repository's {self.folder}"
        return f"{program} from your PATH"


@dataclass(frozen=True, slots=True)
class ToolFacts:
    """What ``assay contract init`` found for the repository: pytest and ruff (None: neither
    runs there), and whether it has Python test files."""

    pytest: FoundTool | None = None
    test_files: bool = False
    ruff: FoundTool | None = None


def render_template(facts: ToolFacts | None = None) -> str:
    """The commented contract, its validators those ``facts`` say run here."""
    return TEMPLATE.replace(VALIDATORS_MARK, validators_block(facts or ToolFacts()).rstrip("\n"))


def validators_block(facts: ToolFacts) -> str:
    """The comment saying what was found, the ``validators:`` key and its lines."""
    said: list[str] = []
    active: list[str] = []
    commented: list[str] = []
    tests = _tests_line(facts.pytest.command if facts.pytest else PYTEST_MODULE)
    if facts.pytest is None:
        said.append(
            "tests: pytest runs neither as `python3 -m pytest` nor as `pytest` here (looked in "
            ".venv/bin, venv/bin, then PATH): install it, then uncomment `tests`."
        )
        commented.append(tests)
    elif not facts.test_files:
        said.append(
            f"tests: `{facts.pytest.command}` runs ({facts.pytest.where()}), but the repository "
            f"has no {' or '.join(TEST_FILE_PATTERNS)} file yet: uncomment `tests` once it has."
        )
        commented.append(tests)
    else:
        said.append(f"tests: `{facts.pytest.command}` runs ({facts.pytest.where()}).")
        active.append(tests)
    lint = _lint_line(facts.ruff.command if facts.ruff else RUFF)
    if facts.ruff is None:
        said.append(
            "lint: ruff not found (.venv/bin, venv/bin, PATH): install it, then uncomment `lint`."
        )
        commented.append(lint)
    else:
        said.append(f"lint: `{facts.ruff.command}` runs ({facts.ruff.where()}).")
        active.append(lint)
    lines = ["# Found by `assay contract init` where it ran (run it again to look again):"]
    for sentence in said:
        wrapped = textwrap.wrap(sentence, width=_WIDTH - 4, break_on_hyphens=False)
        lines += [f"#   {wrapped[0]}", *(f"#     {more}" for more in wrapped[1:])]
    if active:
        lines += ["validators:", *active]
    else:
        lines.append("validators: []  # nothing found that runs here: delete [], uncomment a line")
    lines += [f"  # - {line.removeprefix('  - ')}" for line in commented]
    lines.append(_REVIEW)
    return "\n".join(lines) + "\n"


def _tests_line(command: str) -> str:
    return f'  - {{id: tests, kind: command, run: "{command} -q", timeout_seconds: 600}}'


def _lint_line(command: str) -> str:
    return f'  - {{id: lint, kind: command, run: "{command} check .", on_fail: warn}}'
