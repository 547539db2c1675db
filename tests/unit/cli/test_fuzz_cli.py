"""Random command lines through ``assay.cli.main.main``, in-process: only documented exit
codes, never a traceback, never an internal error.

``run`` and ``serve`` are left out (they start coders or loop forever); everything else is
driven in a real git repository with a commit, with tokens that mix real commands, real flags
and hostile text (no path separators, so nothing is written outside the temporary folder).
"""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.cli.main import main

DOCUMENTED = {0, 1, 2, 3, 4}
WORDS = [
    "task", "list", "show", "hold", "release", "cancel", "add", "ledger", "payload",
    "schema", "contract", "check", "init", "halt", "arm", "attest", "rearm", "--json",
    "--pretty", "--dispatch-id", "--state-dir", "--condition", "--fire", "--evidence",
    "--contract", "--status", "--reason", "--force", "-h", "--help", "--version", "--coder",
    "--land", "--seats", "--max-attempts", "--validator", "halt-scope-breach", "d-1", "queued",
    "held", "merge", "-1", "0", "99999999999999999999", "", "--", "-", "true",
]  # fmt: skip
HOSTILE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/\x00")
    | st.sampled_from("\ud800\udcff-=.:'\" "),
    max_size=12,
).filter(lambda t: ".." not in t)
TOKEN = st.sampled_from(WORDS) | HOSTILE
FIRST = st.sampled_from(["task", "ledger", "payload", "contract", "halt", "-h", "--version"])


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("fuzz") / "repo"
    root.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
            cwd=root,
            check=True,
        )
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("ASSAY_")}
    here = Path.cwd()
    os.chdir(root)
    try:
        yield root
    finally:
        os.chdir(here)
        os.environ.update(saved)


def invoke(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code is None or isinstance(exc.code, int), exc.code
            return int(exc.code or 0), err.getvalue()
    return 0, err.getvalue()


@settings(
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(FIRST, st.lists(TOKEN, max_size=6))
def test_random_command_lines_exit_with_a_documented_code(
    repo: Path, first: str, rest: list[str]
) -> None:
    code, stderr = invoke([first, *rest])
    assert code in DOCUMENTED, (code, stderr)
    assert "Traceback" not in stderr, stderr
    assert "internal error" not in stderr, stderr
