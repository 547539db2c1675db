"""What the stand-in coder executables share (standard library only: they run as scripts).

Each stand-in accepts its real tool's flags, speaks its documented output format, and picks
its behaviour from ``STANDIN_SCENARIO``. ``STANDIN_RECORD`` names a file where the stand-in
writes the argv and stdin it received, so tests can check the command line the adapter built.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

SCENARIOS = (
    "edit",
    "max_turns",
    "rate_limit",
    "usage_limit",
    "context",
    "server_error",
    "auth",
    "crash",
    "sleep",
    "rank",
)


def scenario() -> str:
    return os.environ.get("STANDIN_SCENARIO", "edit")


_RECORDED_ENV = (
    "ASSAY_",
    "ANTHROPIC_",
    "OPENAI_",
    "MSWEA_",
    "CLAUDE_",
    "IS_SANDBOX",
    "CODEX_",
)


def record(argv: list[str], stdin: str | None) -> None:
    """Write what this process was given (argv, stdin, cwd, the variables tests care about)."""
    target = os.environ.get("STANDIN_RECORD")
    if target:
        env = {k: v for k, v in os.environ.items() if k.startswith(_RECORDED_ENV)}
        doc = {"argv": argv, "stdin": stdin, "cwd": os.getcwd(), "env": env}
        Path(target).write_text(json.dumps(doc))


def read_stdin() -> str:
    return "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()


def apply_edit(tool: str) -> Path:
    """Write the scenario's edit into the working directory; return the absolute path."""
    name = os.environ.get("STANDIN_EDIT_FILE", "standin.txt")
    content = os.environ.get("STANDIN_EDIT_CONTENT", f"edited by the {tool} stand-in\n")
    path = Path.cwd() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def reset_epoch(default_delay: int = 3600) -> int:
    """The reset time a limit scenario reports: ``STANDIN_RESET_EPOCH`` or an hour from now."""
    value = os.environ.get("STANDIN_RESET_EPOCH")
    return int(value) if value else int(time.time()) + default_delay


def ranking_answer() -> str:
    """The final answer of a judge run (scenario ``rank``): ``STANDIN_ANSWER`` verbatim, or a
    ranking of the ``*.diff`` files in the working directory, last label first."""
    given = os.environ.get("STANDIN_ANSWER")
    if given is not None:
        return given
    labels = sorted((p.stem for p in Path.cwd().glob("*.diff")), reverse=True)
    answer = {"ranking": labels, "reasons": f"{labels[0] if labels else '?'} reads best."}
    return "Here is my ranking.\n```json\n" + json.dumps(answer) + "\n```"


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event), flush=True)


def say(*lines: str) -> None:
    for line in lines:
        print(line, flush=True)


def sleep() -> None:
    time.sleep(float(os.environ.get("STANDIN_SLEEP", "30")))


def crash(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(code)
