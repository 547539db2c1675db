"""A secret the scan caught is redacted from every file assay keeps for the run.

A ``command`` coder writes a fake AWS key and a private key into the tree and prints them
(stdout, stderr); a command validator prints the file again. The run is held for the secret,
and afterwards no file under ``.assay/`` but the seat's own tree (the blocked candidate itself)
holds either value: the coder's logs, the validators' logs, the payload, the ledger.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support.repo import make_repo

# Built here, so the values appear in no contract and no command line assay records.
AWS_KEY = "AKIA" + "Q3EGT7Z2LMXW5RPN"
KEY_BODY = [
    "MIIEowIBAAKCAQEAw3nP0cG4kX2Hh0Zr1mB3o7cQd9sV1hJk2Lq8VtYfXe5Wb6Rn",
    "Zp4xk1y9Vq3o2HtU8dLrFj5GmP7sNc0aBhQeWlK6iJv4TgXyRu2DzE1fO3pMnAqS",
    "b0yC5wI8rL9hK2jGx7tF6vE4uD3sN1mB0aZ9yX8wV7uT6sR5qP4oN3mL2kJ1iH0g",
]
PRIVATE_KEY = "\n".join(
    ["-----BEGIN RSA PRIVATE KEY-----", *KEY_BODY, "-----END RSA PRIVATE KEY-----"]
)
SEAT_TREES = ("worktrees", "seats")  # the candidate itself, not a log


def _grep(root: Path, value: str) -> list[str]:
    done = subprocess.run(
        ["grep", "-rlaF", value, str(root)], capture_output=True, text=True, check=False
    )
    return [
        line
        for line in done.stdout.splitlines()
        if not any(f"/.assay/{tree}/" in line for tree in SEAT_TREES)
    ]


def test_a_caught_secret_is_redacted_from_logs_payload_and_ledger(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo.fixes / "key.pem").write_text(PRIVATE_KEY + "\n")
    script = repo.fixes / "leak.sh"
    script.write_text(
        f"echo 'AWS_KEY = \"{AWS_KEY}\"' > src/config.py\n"
        f"cp $FIXES/key.pem src/id_rsa\n"
        f"echo using the key {AWS_KEY}\n"
        f"cat src/id_rsa\n"
        f"echo 'also on stderr: {AWS_KEY}' >&2\n"
        # the report's summary reaches the payload (coder_report) and the seat's report.json
        f'printf \'{{"summary": "added {AWS_KEY}"}}\' > "$ASSAY_REPORT_PATH"\n'
    )
    contract = repo.contract(
        "leak.yaml",
        f"""task: Add the configuration.
coder: {{kind: command, command: "sh $FIXES/leak.sh"}}
# The sources stay out of every command line: the fixtures' folder is handed to the coder by
# the contract's env (an absolute path there is visible, read-only, in the seat's sandbox).
env: {{FIXES: "{repo.fixes}"}}
validators: [{{id: show, kind: command, run: "cat src/config.py src/id_rsa"}}]
budgets: {{max_attempts: 2, max_recovery: 1}}
land: merge
""",
    )
    # The sources hold the values, not anything assay keeps; take them away before grepping.
    done = repo.main("run", "--contract", str(contract), "--json")
    script.unlink()
    (repo.fixes / "key.pem").unlink()
    assert done.returncode == 3, done.stderr
    payload = json.loads(done.stdout)
    assert payload["task_status"] == "held"
    assert [h["name"] for h in payload["halts"]["fired"]] == ["halt-secret-exposure"]
    assay_dir = repo.root / ".assay"
    run_dir = assay_dir / "runs" / payload["run_id"]
    logs = sorted(p for p in run_dir.rglob("*") if p.is_file())
    assert any("coder" in p.name for p in logs), logs
    for value in [AWS_KEY, *KEY_BODY]:
        assert _grep(assay_dir, value) == [], value
    coder_log = (run_dir / "attempt-1" / "seat-1" / "coder-attempt1.log").read_text()
    assert "[REDACTED:AWS Access Key]" in coder_log
    assert "[REDACTED:Private Key]" in coder_log
    assert "-----BEGIN RSA PRIVATE KEY-----" in coder_log  # only the values went
    validator_log = run_dir / "attempt-1" / "seat-1" / "validators" / "validator-show.log"
    assert "[REDACTED:AWS Access Key]" in validator_log.read_text()
    assert AWS_KEY not in done.stdout and AWS_KEY not in done.stderr
    written = json.loads((run_dir / "payload.json").read_text())
    assert written["coder_report"]["summary"] == "added [REDACTED:AWS Access Key]"
