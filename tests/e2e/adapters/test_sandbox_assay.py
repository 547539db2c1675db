"""The assay program starts inside the sandbox although its install lives under the hidden
home: a coder calls ``assay halt check`` from there. A process of assay's, so not a unit test."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from support.sandbox_world import World

from assay.adapters.sandbox import bwrap_problem


def test_assay_starts_although_it_lives_under_the_hidden_home(tmp_path: Path) -> None:
    assert bwrap_problem() is None, "this test needs a working bubblewrap"
    world = World(tmp_path)
    # sys.executable's base installation lives in ~/.pyenv here: under the hidden home.
    spec = replace(world.spec, hidden=(*world.spec.hidden, Path.home()))
    assay = Path(sys.executable).parent / "assay"
    code, out, err = world.run(f"{assay} --version", spec=spec, name="assay")
    assert code == 0, err
    assert out.startswith("assay ")
