"""Helpers to drive the ``assay halt`` command: as a real process (``assay``, the end-to-end
tier) or in this process (``assay_main``, the unit tier), with the same arguments and results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assay.adapters import process
from assay.adapters.store import halt_ops
from assay.core.halts import CANONICAL_HALTS

CANONICAL: list[tuple[str, str]] = [(n.value, s.value) for n, s in CANONICAL_HALTS.items()]
ADDITIONS: list[tuple[str, str]] = [("halt-task-warn", "warn"), ("halt-task-log", "log")]

_SCRIPT = Path(sys.executable).with_name("assay")
COMMAND: list[str] = (
    [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "assay.cli.main"]
)


@dataclass(frozen=True)
class Ran:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def doc(self) -> dict[str, Any]:
        """stdout as the single JSON object the halt commands print."""
        assert self.stdout.endswith("\n"), self
        loaded = json.loads(self.stdout)
        assert isinstance(loaded, dict), self
        return loaded


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_HALT_STATE_DIR"}
    env.update(extra or {})
    return env


class Assay:
    """``assay(*args)`` runs ``assay <args>`` in ``cwd`` (default: the test's tmp_path)."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(
        self,
        *args: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> Ran:
        proc = subprocess.run(
            [*COMMAND, *args],
            cwd=cwd or self.cwd,
            env=clean_env(env),
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=preexec_fn,
            check=False,
        )
        return Ran(tuple(args), proc.returncode, proc.stdout, proc.stderr)

    def popen(self, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*COMMAND, *args],
            cwd=cwd or self.cwd,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


class InProcessAssay(Assay):
    """:class:`Assay` that runs ``main(args)`` in this process instead of starting ``assay``."""

    def __call__(
        self,
        *args: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> Ran:
        if preexec_fn is not None:  # a process limit would bind the test run itself
            raise TypeError("preexec_fn needs a real process: use the `assay` fixture (e2e)")
        from support.in_process import run_assay

        done = run_assay(args, cwd=cwd or self.cwd, env=clean_env(env))
        return Ran(tuple(args), done.returncode, done.stdout, done.stderr)

    def popen(self, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        raise TypeError("popen starts a process: use the `assay` fixture (e2e)")


@pytest.fixture
def assay(tmp_path: Path) -> Assay:
    return Assay(tmp_path)


@pytest.fixture
def assay_main(tmp_path: Path) -> InProcessAssay:
    """``assay_main(*args)``: ``assay <args>`` run in this process, in ``tmp_path``."""
    return InProcessAssay(tmp_path)


def _write_contract(path: Path, halts: Iterable[tuple[str, Any]], **fields: Any) -> Path:
    """A dispatch contract YAML with the given ``halt_classes`` (name, severity) pairs."""
    lines = [f"{key}: {json.dumps(value)}" for key, value in fields.items()]
    lines.append("halt_classes:")
    lines.extend(
        f"  - {{name: {name}, severity: {json.dumps(severity)}}}" for name, severity in halts
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class Armed:
    dispatch_id: str
    state_dir: Path
    contract: Path

    @property
    def state_file(self) -> Path:
        return self.state_dir / f"{self.dispatch_id}.json"

    def load(self) -> dict[str, Any]:
        loaded = json.loads(self.state_file.read_text(encoding="utf-8"))
        assert isinstance(loaded, dict)
        return loaded

    def halt(self, name: str) -> dict[str, Any]:
        found = [h for h in self.load()["halts"] if h["name"] == name]
        assert len(found) == 1, name
        return found[0]

    def fire(self, name: str, evidence: str) -> None:
        """Setup shortcut: fire in-process (the command itself is tested elsewhere)."""
        doc, _ = halt_ops.check(
            self.dispatch_id, name, self.state_dir, fire=True, evidence=evidence
        )
        assert doc.get("fired") is True, doc

    def flags(self) -> list[str]:
        return ["--dispatch-id", self.dispatch_id, "--state-dir", str(self.state_dir)]


def _arm_in_process(
    root: Path, halts: Iterable[tuple[str, str]], dispatch_id: str = "d-1"
) -> Armed:
    contract = _write_contract(root / "contract.yaml", halts, task="fix it")
    state_dir = root / "states"
    doc, code = halt_ops.arm(contract, dispatch_id, state_dir)
    assert code == 0, doc
    return Armed(dispatch_id, state_dir, contract)


@pytest.fixture
def write_contract() -> Callable[..., Path]:
    """``write_contract(path, [(name, severity), ...], **top_level_fields)``."""
    return _write_contract


@pytest.fixture
def arm_dispatch(tmp_path: Path) -> Callable[..., Armed]:
    """``arm_dispatch(halts, dispatch_id="d-1")``: arm in-process under ``tmp_path/states``."""

    def arm(halts: Iterable[tuple[str, str]], dispatch_id: str = "d-1") -> Armed:
        return _arm_in_process(tmp_path, halts, dispatch_id)

    return arm


@pytest.fixture
def armed(tmp_path: Path) -> Armed:
    """A dispatch armed (in-process, for speed) with the 7 canonical halts plus 2 additions."""
    return _arm_in_process(tmp_path, [*CANONICAL, *ADDITIONS])


@pytest.fixture(autouse=True)
def no_stop_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each CLI test starts, and leaves, with no stop request (a Ctrl-C) recorded in this
    process: a test driving ``assay`` in-process may stop a run on purpose."""
    monkeypatch.setattr(process, "_stop", [])
    yield
