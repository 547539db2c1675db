"""The demo: a dispatch's halts armed, checked, fired, sticky, re-armed and attested.

Every step runs the real ``assay halt`` command (through ``tools/halt-*.sh`` where seed 002
names a wrapper) in a temporary directory and prints what it said and how it exited.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.syntax import Syntax

ROOT = Path(__file__).resolve().parent.parent
ASSAY = str(Path(sys.executable).parent / "assay")
console = Console()


def step(title: str, argv: list[str], cwd: Path, expect: int) -> dict[str, object]:
    shown = " ".join(a if " " not in a else repr(a) for a in argv)
    console.rule(f"[bold]{title}")
    console.print(f"$ {shown}", style="cyan")
    done = subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        check=False,
        text=True,
        env={"ASSAY": ASSAY, "PATH": "/usr/bin:/bin"},
    )
    document: dict[str, object] = json.loads(done.stdout)
    console.print(Syntax(json.dumps(document, indent=2), "json", word_wrap=True))
    verdict = "as expected" if done.returncode == expect else f"UNEXPECTED (wanted {expect})"
    console.print(
        f"exit {done.returncode} ({verdict})", style="green" if done.returncode == expect else "red"
    )
    if done.returncode != expect:
        raise SystemExit(1)
    return document


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="assay-demo-"))
    try:
        shutil.copy(ROOT / "examples" / "contract.yaml", work / "contract.yaml")
        arm = str(ROOT / "tools" / "halt-arm.sh")
        check = str(ROOT / "tools" / "halt-check.sh")
        d = ["--dispatch-id", "demo-001"]
        console.print(Panel("assay halt lifecycle: DECLARED → ARMED → CHECKED → FIRED → ATTESTED"))
        step(
            "Arm the contract's halts (pre-flight)",
            [arm, "--contract", "contract.yaml", *d],
            work,
            0,
        )
        step(
            "A coder queries a halt mid-dispatch (ARMED → CHECKED)",
            [check, *d, "--condition", "halt-scope-breach"],
            work,
            0,
        )
        step(
            "A warn halt fires: reported, the run goes on (exit 0)",
            [
                check,
                *d,
                "--condition",
                "halt-budget-exhausted",
                "--fire",
                "--evidence",
                "40 of 40 turns used",
            ],
            work,
            0,
        )
        step(
            "A block halt fires: halt and surface (exit 1)",
            [
                check,
                *d,
                "--condition",
                "halt-scope-breach",
                "--fire",
                "--evidence",
                "diff touches .github/workflows/ci.yml",
            ],
            work,
            1,
        )
        step(
            "Firing it again is refused: a FIRED block halt is sticky",
            [check, *d, "--condition", "halt-scope-breach", "--fire", "--evidence", "again"],
            work,
            1,
        )
        step(
            "An operator re-arms it with evidence of the remedy",
            [
                ASSAY,
                "halt",
                "rearm",
                *d,
                "--condition",
                "halt-scope-breach",
                "--evidence",
                "reverted ci.yml in 4f2c1e0",
            ],
            work,
            0,
        )
        step(
            "Closure: every halt ATTESTED (exit 0: no block halt is left fired)",
            [ASSAY, "halt", "attest", *d],
            work,
            0,
        )
        state = work / ".assay" / "halt-state" / "demo-001.json"
        console.rule("[bold]The state file")
        console.print(Syntax(state.read_text(), "json", word_wrap=True))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
