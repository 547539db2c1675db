"""``assay halt check --fire`` journals into the ledger only when one exists; with none it must
not pay for SQLAlchemy's import (a coder calls it mid-turn)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import sys
from pathlib import Path
from assay.adapters.store.halt_journal import journal_fired
journal_fired(Path(sys.argv[1]), "d1", {"name": "h", "severity": "block"})
print("sqlalchemy" in sys.modules)
"""


def test_firing_with_no_ledger_never_imports_sqlalchemy(tmp_path: Path) -> None:
    state_dir = tmp_path / "halt-state"
    state_dir.mkdir()
    env = {"PATH": "/usr/bin:/bin"}  # no ASSAY_DATABASE_URL
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(state_dir)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert done.stdout.strip() == "False"
