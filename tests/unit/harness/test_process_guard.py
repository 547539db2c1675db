"""The unit tier's guard (tests/unit/conftest.py) refuses every way a test may start ``assay``.

Each case here would start the real program if the guard let it through: the test then fails
because nothing was refused.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.repo import make_repo

ASSAY = str(Path(sys.executable).parent / "assay")
REFUSED = "a unit test started the assay program"


def refused(start: Callable[[], object]) -> None:
    with pytest.raises(RuntimeError, match=REFUSED):
        start()


def run(argv: list[str] | str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, check=False, timeout=30, **kwargs)  # type: ignore[call-overload,no-any-return]


@pytest.mark.parametrize(
    "argv",
    [
        ["assay", "--version"],
        [ASSAY, "--version"],
        [sys.executable, "-m", "assay", "--version"],
        [sys.executable, "-m", "assay.cli.main", "--version"],
        [sys.executable, "-c", "from assay.cli.main import main; main(['--version'])"],
        ["sh", "-c", "assay --version"],
        ["bash", "-c", "cd /tmp && assay --version"],
        ["env", "ASSAY_HOME=/tmp/x", "assay", "--version"],
        ["timeout", "5", "assay", "--version"],
    ],
    ids=lambda argv: " ".join(argv)[-40:],
)
def test_popen_of_assay_in_any_form(argv: list[str]) -> None:
    refused(lambda: run(argv))


def test_a_shell_string() -> None:
    refused(lambda: run("assay --version", shell=True))
    refused(lambda: run(f"true; {ASSAY} --version | cat", shell=True))


def test_os_system() -> None:
    refused(lambda: os.system("assay --version >/dev/null"))


def test_posix_spawn() -> None:
    refused(lambda: os.posix_spawn(ASSAY, [ASSAY, "--version"], os.environ))
    refused(lambda: os.posix_spawnp("assay", ["assay", "--version"], os.environ))


def test_asyncio_subprocess() -> None:
    async def start() -> None:
        proc = await asyncio.create_subprocess_exec(ASSAY, "--version")
        await proc.wait()

    refused(lambda: asyncio.run(start()))


def test_a_link_to_assay_under_another_name(tmp_path: Path) -> None:
    link = tmp_path / "tool"
    link.symlink_to(ASSAY)
    refused(lambda: run([str(link), "--version"]))


def test_a_support_helper_that_starts_assay(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    refused(lambda: repo.assay("--version"))  # Repo.assay is the e2e tier's; Repo.main runs here


def test_exec_in_a_forked_child_ends_the_child() -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.execv(ASSAY, [ASSAY, "--version"])
        finally:
            os._exit(0)  # only if the guard let exec fail without ending the child itself
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3


def test_other_programs_still_run() -> None:
    assert run(["git", "--version"]).returncode == 0
    assert run("echo assay", shell=True).stdout == b"assay\n"
    assert run([sys.executable, "-c", "print('assay')"]).stdout == b"assay\n"
    assert os.system("true") == 0


@pytest.fixture(scope="session")
def started_before_the_test() -> BaseException | None:
    """A session fixture is set up before any function-scoped one (the old guard too)."""
    try:
        run([ASSAY, "--version"])
    except RuntimeError as refusal:
        return refusal
    return None


def test_a_fixture_of_wider_scope(started_before_the_test: BaseException | None) -> None:
    assert started_before_the_test is not None
    assert REFUSED in str(started_before_the_test)


def test_inside_the_sandbox() -> None:
    argv = ["bwrap", "--ro-bind", "/", "/", "--chdir", "/tmp", "--", "/bin/sh", "-c", "assay -V"]
    refused(lambda: run(argv))


# A second line behind the audit hook, for the forms read straight off a test's source: the
# path of the assay script (support.repo.ASSAY), Repo.assay, and the os-level process starts
# no unit test needs (a spawn of `assay` through them is refused at run time as well).
SPAWN_FORMS = re.compile(
    r"\bos\.(?:system|posix_spawnp?|exec\w*|spawn\w*)\(|\bimport\b.*\bASSAY\b|\.assay\(|\.popen\("
)


def test_no_unit_test_names_a_way_to_start_assay() -> None:
    unit = Path(__file__).parent
    hits = [
        f"{path.relative_to(unit)}:{number}: {line.strip()}"
        for path in sorted(unit.rglob("*.py"))
        if path.name != "conftest.py" and path != Path(__file__)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SPAWN_FORMS.search(line)
    ]
    assert hits == [], "start assay in tests/e2e, not here:\n" + "\n".join(hits)
