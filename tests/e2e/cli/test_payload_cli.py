"""``assay payload schema`` prints the committed schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_payload_schema_command_prints_the_committed_schema() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "assay.cli.main", "payload", "schema"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    committed = json.loads((ROOT / "schemas" / "payload.schema.json").read_text())
    assert json.loads(done.stdout) == committed
