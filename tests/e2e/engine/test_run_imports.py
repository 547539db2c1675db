"""What starting a run imports: the engine's entry leaves out what only some runs use (the
pull-request lander and its GitHub client, recovery's usage accounting with its judge and model
client, detect-secrets), each imported where it is used. Checked on ``sys.modules`` of a fresh
interpreter, never on a timer."""

from __future__ import annotations

import json
import subprocess
import sys

# Imported by the code that uses them: a PR landing, the recovery of a dead run, a scan.
ONLY_WHERE_USED = (
    "assay.adapters.github",
    "assay.engine.local.pull_request",
    "assay.engine.recovery.usage",
    "assay.adapters.forced_call",
    "assay.adapters.llm_client",
    "assay.adapters.validators.judge",
    "assay.adapters.validators.secret_scan",
    "detect_secrets",
    "requests",
)


def test_the_engine_s_entry_imports_only_what_every_run_uses() -> None:
    code = "import json, sys, assay.engine.local.runner; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(done.stdout))
    assert "assay.engine.recovery.close" in loaded  # the entry itself was imported
    assert sorted(loaded.intersection(ONLY_WHERE_USED)) == []
