"""A ledger whose every text an operator can see is hostile or huge, filled by real runs.

Two ``assay run``s (in this process, as the unit tier runs them): one whose replay coder writes
a file with a bidi override in its 200-character name and a 200 KB single line, leaves a 1 MB
summary, and whose warn-only check prints pytest ``--color=yes`` output (broken and partial
escapes, an OSC 8 hyperlink, cursor moves, ``\\r`` progress bars) for megabytes; one whose
coder fires a block halt with a 60 KB one-word ``--evidence`` (the task is held with it as its
reason). Then what no replay can make is written into the same ledger the way the engine
writes it: a 200 KB title, a huge last error and diagnostic, a run reason, a warning, the
judges' reasons, and a queued task whose id and branch are as long as the ledger allows.

Every text carries HTML and script (``window.__pwned`` is set if any of it runs), bidi
overrides and isolates, zero-width characters, NUL and other controls, emoji and wide CJK.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from assay.adapters.store.schema import BRANCH_LENGTH, NAME_LENGTH, runs, tasks
from assay.adapters.store.sql import Ledger
from assay.core.tasks import Task
from assay.core.vocab import EventKind
from support.repo import CHECK_TESTS, Repo, git, make_repo

SCRIPT = (
    '<script>window.__pwned = 1</script>"><img src=x onerror="window.__pwned = 2">'
    '<a href="javascript:window.__pwned = 3">click</a> javascript:window.__pwned=4 '
)
BIDI = "\u202eexe.txt\u202c \u2066isolate\u2069 \u2067rtl\u2069 \u2068first\u2069"
INVISIBLE = "zero\u200bwidth\u200djoiner\ufeffbom"
CONTROLS = "nul\x00bell\x07back\x08vt\x0bdel\x7fc1\x85"
WIDE = (
    "🚀🔥👩\u200d👩\u200d👧 中文字符テスト한국어 \uff57\uff49\uff44\uff45"  # emoji, CJK, fullwidth
)
HOSTILE = f"{BIDI} {CONTROLS} {INVISIBLE} {SCRIPT}{WIDE} "
# What pytest --color=yes writes, and what a terminal program leaves in its output.
PYTEST = (
    "\x1b[1m=========================== test session starts ============================\x1b[0m\n"
    "collected 3 items\n\n"
    "tests/test_x.py \x1b[32m.\x1b[0m\x1b[31mF\x1b[0m\x1b[31m                    [100%]\x1b[0m\n"
    "\x1b[1m\x1b[31mE       assert 1 == 2\x1b[0m\n"
    "\x1b[94mdef\x1b[39;49;00m \x1b[92mtest_x\x1b[39;49;00m():\n"
    "\x1b]8;;https://evil.example/\x1b\\a hyperlink\x1b]8;;\x1b\\ and \x1b[2J\x1b[H\x1b[10A moved\n"
    "progress \r 10%\r 50%\r100%\n"
    "\x1b[38;2;255;0;0mtrue colour\x1b[0m \x1b[38;5;196m256 colour\x1b[0m\n"
)
BROKEN = "a partial \x1b[1 escape, a lone \x1b and \x1b[38;5;"  # the text ends mid-sequence


def hostile(size: int, word: bool = False) -> str:
    """``size`` characters of hostile text (after :data:`HOSTILE` and the pytest output): one
    word when ``word`` (no space anywhere to wrap at), else lines of output."""
    head = HOSTILE + PYTEST.replace("\n", " ") if word else HOSTILE + "\n" + PYTEST
    head = head.replace(" ", "_") if word else head
    filler = "x" if word else "line of output \x1b[33mwarn\x1b[0m " * 3 + "\n"
    body = head + filler * ((size - len(head)) // len(filler) + 1)
    return body[:size] + BROKEN


SUMMARY = hostile(700_000)  # its report stays under the 1 MiB a report may be
EVIDENCE = hostile(60_000, word=True).replace("\x00", "")  # one word; no NUL in an argv
TITLE = hostile(200_000, word=True)
LAST_ERROR = hostile(300_000, word=True)
DIAGNOSTIC = hostile(100_000)
REASON = hostile(500_000, word=True)
WARNING = hostile(80_000, word=True)
INSTRUCTION = hostile(2_500_000)  # a task's text at its worst: the log view opens it whole
JUDGE_REASONS = hostile(50_000, word=True)
FILE_NAME = "src/\u202e" + "n" * 150 + "\u2066 中文🚀.py"
LONG_ID = ("t-" + "i" * NAME_LENGTH)[:NAME_LENGTH]
LONG_BRANCH = ("assay/" + "b" * BRANCH_LENGTH)[:BRANCH_LENGTH]

CODER = """import json, os, pathlib
names = json.loads(pathlib.Path("hostile/names.json").read_text())
pathlib.Path(names["file"]).write_text("value = '" + names["line"] + "'\\n")
pathlib.Path("src/slug.py").write_text(names["fixed"])
report = {"summary": names["summary"], "files": [
    {"path": names["file"], "kind": "created"}, {"path": "src/slug.py", "kind": "modified"},
    {"path": names["claimed"], "kind": "modified"}]}
pathlib.Path(os.environ["ASSAY_REPORT_PATH"]).write_text(json.dumps(report))
"""
CHECK = """import json, pathlib, sys
names = json.loads(pathlib.Path("hostile/names.json").read_text())
out = sys.stdout
for n in range(60):
    out.write(names["pytest"])
out.write(names["output"])
sys.exit(1)
"""
HALT = """import json, os, pathlib, subprocess, sys
names = json.loads(pathlib.Path("hostile/names.json").read_text())
subprocess.run([names["assay"], "halt", "check", "--dispatch-id", os.environ["ASSAY_DISPATCH_ID"],
    "--condition", "halt-scope-breach", "--fire", "--evidence", names["evidence"]], check=True)
"""


@dataclass(frozen=True)
class HostileWorld:
    """The repository, its ledger's URL and the hostile tasks and runs in it."""

    repo: Repo
    url: str
    task: str  # the run with the 1 MB summary, the huge title, error and diagnostic
    run: str
    halted_task: str  # held with the 60 KB evidence
    halt_run: str
    long_task: str  # held by an operator, its id and branch as long as the ledger allows

    def ledger(self) -> Ledger:
        return Ledger(self.url)


def _ok(done: Any, *expect: int) -> Any:
    assert done.returncode in (expect or (0,)), done.stderr[-4000:]
    return done


def _contract(repo: Repo, name: str, task: str, script: str, check: str, on_fail: str) -> Path:
    return repo.contract(
        name,
        f"""task: {task}
scope: {{allow: ["src/**"]}}
coder: {{kind: replay, steps: [{{script: "{sys.executable} -B hostile/{script}"}}]}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
  - {{id: "{check}", kind: command, run: "{sys.executable} -B hostile/check.py",
     on_fail: {on_fail}}}
land: branch
""",
    )


def build_hostile_world(root: Path) -> HostileWorld:
    repo = make_repo(root)
    folder = repo.root / "hostile"
    folder.mkdir()
    names = {
        "file": FILE_NAME,
        # git shows a file with a NUL as binary: this one has none.
        "line": "".join(c for c in hostile(200_000, word=True) if c not in "\x00'\\"),
        "fixed": (repo.fixes / "fixed.py").read_text(),
        "summary": SUMMARY,
        "claimed": "src/" + "\u202eclaimed" + "c" * 180 + ".py",
        "pytest": PYTEST,
        "output": hostile(400_000),
        "evidence": EVIDENCE,
        "assay": str(Path(sys.executable).with_name("assay")),
    }
    (folder / "names.json").write_text(json.dumps(names))
    for name, text in (("coder.py", CODER), ("check.py", CHECK), ("fire_halt.py", HALT)):
        (folder / name).write_text(text)
    git(repo.root, "add", "hostile")
    git(repo.root, "commit", "-q", "-m", "hostile fixtures")

    made = _contract(repo, "hostile.yaml", "Keep digits.", "coder.py", "pytest-color", "warn")
    ran = json.loads(_ok(repo.main("run", "--contract", str(made), "--json"), 0).stdout)
    halting = _contract(repo, "halt.yaml", "Rename it.", "fire_halt.py", "never-run", "warn")
    halted = json.loads(_ok(repo.main("run", "--contract", str(halting), "--json"), 3).stdout)

    url = f"sqlite:///{repo.root / '.assay' / 'assay.db'}"
    now = datetime.now(UTC)
    with Ledger(url) as ledger:
        long_task = Task.new(id=LONG_ID, title=TITLE, instruction=INSTRUCTION, now=now)
        ledger.add_task(long_task)
        with ledger._engine.begin() as conn:  # what no command writes: the texts at their worst
            conn.execute(
                sa.update(tasks)
                .where(tasks.c.id == ran["task_id"])
                .values(title=TITLE, last_error=LAST_ERROR, diagnostic=DIAGNOSTIC)
            )
            conn.execute(sa.update(tasks).where(tasks.c.id == LONG_ID).values(branch=LONG_BRANCH))
            conn.execute(sa.update(runs).where(runs.c.id == ran["run_id"]).values(reason=REASON))
        ledger.append_event(
            EventKind.WARNING,
            {"message": WARNING},
            at=now,
            task_id=ran["task_id"],
            run_id=ran["run_id"],
        )
        ledger.append_event(
            EventKind.JUDGES_RANKED,
            {
                "attempt": 1,
                "winner": HOSTILE,
                "present": 1,
                "quorum": 1,
                "first_choices": {HOSTILE: 1},
                "borda": {HOSTILE: 0},
                "tie_break": None,
                "judges": [
                    {
                        "judge": 1,
                        "name": HOSTILE,
                        "round": 0,
                        "ranking": [HOSTILE],
                        "reasons": JUDGE_REASONS,
                        "reasons_cut": 0,
                        "error": HOSTILE * 20 + BROKEN,  # ends as every hostile text
                    }
                ],
            },
            at=now,
            task_id=ran["task_id"],
            run_id=ran["run_id"],
        )
    # An operator's hold, through the command: its reason is as hostile as a coder's text.
    _ok(repo.main("task", "hold", LONG_ID, "--reason", REASON.replace("\x00", "")))
    return HostileWorld(
        repo=repo,
        url=url,
        task=ran["task_id"],
        run=ran["run_id"],
        halted_task=halted["task_id"],
        halt_run=halted["run_id"],
        long_task=LONG_ID,
    )
