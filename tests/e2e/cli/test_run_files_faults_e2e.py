"""Faults of the file-size limit while assay writes a run's files, through the real `assay`
process: an llm coder's transcript (written by assay) or a validator's log hits RLIMIT_FSIZE,
set on the `assay` process (root cannot be denied a write; the limit holds for a whole
process, so only a process of its own can take it): the attempt is refunded as an
environment error that names the cause, never a traceback.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

from support.model_server import ModelServer, Turn
from support.repo import ASSAY, CHECK_TESTS, make_repo

LIMIT = 4_000_000  # far above the ledger, payload and git objects; below the model's answer


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def test_an_llm_transcript_over_the_file_size_limit_is_refunded(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer() as server:
        server.script(Turn.reply("x" * (LIMIT + 100_000)))
        contract = repo.contract(
            "llm.yaml",
            f"""task: Make slugify keep digits.
coder: {{kind: llm, model: m, base_url: "{server.base_url}", max_turns: 2}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
land: none
""",
        )
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
        done = subprocess.run(
            [str(ASSAY), "run", "--contract", str(contract), "--json"],
            cwd=repo.root,
            capture_output=True,
            text=True,
            env={**environ, "OPENAI_API_KEY": "local-test-key"},
            timeout=120,
            check=False,
            preexec_fn=_limit_file_size,
        )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    payload = json.loads(done.stdout)
    assert payload["halt_type"] == "environment_error" and payload["attempt_spent"] is False
    assert "hit the file-size limit (RLIMIT_FSIZE) writing " in payload["reason"]
    assert payload["reason"].endswith("attempt-1/seat-1/llm-transcript.jsonl")


def test_a_validator_log_over_the_file_size_limit_refunds_the_attempt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    done = subprocess.run(
        [
            str(ASSAY),
            *("run", "chatty tests", "--coder-command", "echo x >> src/slug.py"),
            *("--validator", f"head -c {LIMIT * 2} /dev/zero", "--land", "none", "--json"),
        ],
        cwd=repo.root,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
        preexec_fn=_limit_file_size,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    payload = json.loads(done.stdout)
    assert payload["halt_type"] == "environment_error" and payload["attempt_spent"] is False
    assert payload["reason"].startswith("environment error: a log hit the file-size limit")
    assert "validators/validator-" in payload["reason"]
