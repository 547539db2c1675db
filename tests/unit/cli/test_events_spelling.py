"""One spelling for every event kind: code names a kind only as ``EventKind.X``, and every
token that looks like a kind (``run.closed``) anywhere in the sources, the dashboard's files
or the tests is one the ledger accepts.

A kind written as text in a second place can drift from the enum unnoticed (the store refuses
it when written, but a reader matching a misspelt kind just never matches); an alias
(``PUSHED = EventKind.LAND_PUSHED``) gives one kind two names to search for.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import assay
from assay.core.vocab import EventKind

SRC = Path(assay.__file__).parent
TESTS = Path(__file__).parents[2]
VOCAB = SRC / "core" / "vocab.py"
MIGRATIONS = SRC / "adapters" / "store" / "migrations"  # they rewrite the old spellings

KINDS = {kind.value for kind in EventKind}
# The spellings migration 0003 rewrote: never written again.
LEGACY = {"task_added", "task_saved", "run_started", "run_closed"}
PREFIXES = sorted({kind.split(".")[0] for kind in KINDS})
LOOKS_LIKE_A_KIND = re.compile(rf"^(?:{'|'.join(PREFIXES)})\.[a-z_]+$")
# Names that share a kind's prefix but are files or folders (run.sh, task.html, seat.home), or
# a payload's JSON path (usage.wall_time_ms).
NOT_KINDS = {"sh", "log", "html", "yaml", "home", "wall_time_ms"}


def python_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        if MIGRATIONS not in path.parents:
            yield path


def strings(path: Path) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def kind_like(token: str) -> bool:
    return bool(LOOKS_LIKE_A_KIND.match(token)) and token.rsplit(".", 1)[1] not in NOT_KINDS


def test_the_sources_name_every_kind_through_the_enum() -> None:
    stray = [
        f"{path.relative_to(SRC)}:{line}: {text!r}"
        for path in python_files(SRC)
        if path != VOCAB
        for line, text in strings(path)
        if text in KINDS or text in LEGACY or kind_like(text)
    ]
    assert stray == [], "write EventKind.X, not the text:\n" + "\n".join(stray)


def test_no_kind_has_a_second_name() -> None:
    aliases = []
    for path in python_files(SRC):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if (
                isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Name)
                and value.value.id == "EventKind"
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    name = target.id if isinstance(target, ast.Name) else ast.unparse(target)
                    aliases.append(f"{path.relative_to(SRC)}: {name} = {ast.unparse(value)}")
    assert aliases == [], "use EventKind.X itself:\n" + "\n".join(aliases)


def test_every_kind_the_tests_and_the_dashboard_spell_out_exists() -> None:
    stray = [
        f"{path.relative_to(TESTS)}:{line}: {text!r}"
        for path in python_files(TESTS)
        for line, text in strings(path)
        if kind_like(text) and text not in KINDS
    ]
    web = SRC / "web"
    for path in sorted([*web.rglob("*.js"), *web.rglob("*.html")]):
        for token in re.findall(r"[\"']([a-z_]+\.[a-z_]+)[\"']", path.read_text("utf-8")):
            if kind_like(token) and token not in KINDS:
                stray.append(f"{path.relative_to(SRC)}: {token!r}")
    assert stray == [], "not an EventKind:\n" + "\n".join(stray)


def test_the_check_would_catch_a_stray_spelling() -> None:
    misspelt = ["run" + ".close", "seat" + ".finish"]  # built, or this file would hold them
    assert all(kind_like(token) and token not in KINDS for token in misspelt)
    assert not kind_like("run.sh") and not kind_like("task.html")
    assert all(kind_like(kind) for kind in KINDS)
