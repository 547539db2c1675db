"""A queue served through a flaky provider and a `kill -9` of `assay serve`: every token the
model server handed out is in the ledger and in the runs' payloads, once.

Three queued tasks, each an `llm` coder that fixes the bug in three answers (a read, the fix,
the finish). Every fourth call the server answers 503 (the client retries it at once); one call
is held while serve is killed with SIGKILL, so that answer never goes out. A second
`assay serve --once` closes the dead run (refunded) and drains the queue.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
from pathlib import Path

from support.model_server import HttpError, ModelServer, RecordedRequest, Turn, Usage
from support.repo import ASSAY, CHECK_TESTS, Repo, make_repo
from support.spending import journal, mismatches, payloads, usage_report

READ = Turn.call("read_file", {"path": "src/slug.py"}, usage=Usage(300, 12))
FIX = Turn.call(
    "replace",
    {"path": "src/slug.py", "old": "isalpha", "new": "isalnum"},
    usage=Usage(400, 30),
)
FINISH = Turn.call("finish", {"summary": "slugify keeps digits"}, usage=Usage(450, 9))
UNAVAILABLE = Turn(error=HttpError(503, "server", "service unavailable", retry_after=0))
TASKS = 3
# One task at a time: calls 1-3 are the first task's, 4 fails, 5-6 are the second's, and
# serve dies during 7 (its finish). The second serve: 8 fails, then 9-11, 12 fails, 13-15.
HELD = 7


def contract(repo: Repo, server: ModelServer) -> Path:
    return repo.contract(
        "llm.yaml",
        f"""task: Make slugify keep digits.
scope: {{allow: ["src/**"]}}
coder: {{kind: llm, model: m, base_url: "{server.base_url}", max_turns: 10}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
budgets: {{max_attempts: 2, max_recovery: 0}}
env: {{OPENAI_API_KEY: local-test-key}}
land: branch
""",
    )


def test_a_killed_serve_and_a_flaky_provider_lose_no_token(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    calls = itertools.count(1)

    def answer(request: RecordedRequest) -> Turn:
        if next(calls) % 4 == 0:
            return UNAVAILABLE
        return [READ, FIX, FINISH][min(len(request.messages) // 2, 3) - 1]

    with ModelServer(when_exhausted=answer) as server:
        llm = str(contract(repo, server))
        ids = []
        for _ in range(TASKS):
            added = repo.main("task", "add", "--contract", llm, "--json")
            assert added.returncode == 0, added.stderr
            ids.append(json.loads(added.stdout)["id"])
        held = server.hold(HELD)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
        serve = subprocess.Popen(
            [str(ASSAY), "serve", "--once", "--poll", "0.1", "--no-web"],
            cwd=repo.root,
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert held.wait(90), "serve never reached the held call"
        finally:
            serve.send_signal(signal.SIGKILL)
            serve.wait(timeout=30)
        held.open()
        before = server.handed_out
        again = repo.main("serve", "--once", "--poll", "0.1", "--json")
        handed = server.handed_out
    assert again.returncode == 0, again.stderr
    assert (before.answers, before.tokens) == (5, 1201 + 312 + 430)
    assert (len(server.completions), handed.answers, server.dropped) == (15, 11, 1)
    tasks = {t["id"]: t for t in json.loads(repo.main("task", "list", "--json").stdout)}
    assert [tasks[i]["status"] for i in ids] == ["done"] * TASKS

    runs = payloads(repo.root)
    statuses = sorted(p["status"] for p in runs.values())
    assert statuses == ["failed", "ready", "ready", "ready"]  # one run died with serve
    (dead,) = [p for p in runs.values() if p["status"] == "failed"]
    assert dead["attempts"]["history"][-1].get("interrupted") is True
    assert dead["usage"]["cost_usd"] is None
    # Each finished run was handed its three answers; the dead one what it got before serve died.
    assert dead["usage"]["tokens"] == 312 + 430
    assert handed.tokens == TASKS * 1201 + 312 + 430
    assert mismatches(handed, journal(repo.root), runs.values(), usage_report(repo)) == []
