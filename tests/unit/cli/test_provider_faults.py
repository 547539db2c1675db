"""A provider outage through the `assay` command (in-process): the `llm` coder against a scripted
server that answers 503 to every call.

The client retries (Retry-After: 0 keeps it fast), the seat is lost to a provider fault, the
run is refunded and the task waits; ``budgets.max_refunds`` such runs in a row hold the task
for a human with the faults listed; a release starts the count again.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
from support.model_server import (
    HttpError,
    ModelServer,
    OpenAIChat,
    RecordedRequest,
    Response,
    Turn,
    Usage,
    json_response,
)
from support.repo import CHECK_TESTS, Repo, make_repo
from support.spending import journal, mismatches, usage_report

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "payload.schema.json").read_text()
)
OUTAGE = Turn(error=HttpError(503, "server", "service unavailable", retry_after=0))


def llm_contract(repo: Repo, server: ModelServer) -> Path:
    return repo.contract(
        "llm.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: llm, model: m, base_url: "{server.base_url}", max_turns: 4}}
validators:
  - {{id: tests, kind: command, run: "{CHECK_TESTS}"}}
budgets: {{max_attempts: 2, max_recovery: 1, max_refunds: 3}}
land: merge
""",
    )


def run_json(repo: Repo, *args: str, expect: int) -> dict[str, Any]:
    done = repo.main("run", *args, "--json", OPENAI_API_KEY="local-test-key")
    assert done.returncode == expect, done.stderr
    payload: dict[str, Any] = json.loads(done.stdout)
    jsonschema.validate(payload, SCHEMA)
    return payload


def show(repo: Repo, task_id: str) -> dict[str, Any]:
    shown = repo.main("task", "show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    loaded: dict[str, Any] = json.loads(shown.stdout)
    return loaded


def test_a_provider_outage_is_refunded_until_the_streak_holds_the_task(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    with ModelServer(when_exhausted=OUTAGE) as server:
        first = run_json(repo, "--contract", str(llm_contract(repo, server)), expect=1)
        calls = len(server.completions)
        task_id = first["task_id"]

        # One run: three calls (retried), no recovery wave, the attempt refunded.
        assert calls == 3
        assert first["status"] == "failed" and first["halt_type"] == "environment_error"
        assert first["attempt_spent"] is False and first["task_status"] == "failed"
        assert first["reason"].startswith("every seat lost to a provider fault: llm: HTTP 503")
        assert first["reason"].endswith("3 of 3 calls")
        [seat] = first["candidates"]
        assert seat["lost_to_provider_fault"] is True and seat["viable"] is False
        assert seat["fault"].startswith("lost to a provider fault: llm: HTTP 503")
        assert first["attempts"]["total"] == 1
        shown = show(repo, task_id)
        assert shown["waiting"] is True and shown["attempts"] == 0
        assert shown["runs"][0]["settle_row"] == "failed_machine_fault"
        text = repo.main("task", "show", task_id).stdout
        assert "every seat lost to a provider fault: llm: HTTP 503" in text
        assert "for a machine fault to clear" in text
        # The agent is never asked to "fix" the provider's fault.
        assert not any("503" in json.dumps(r.body) for r in server.completions)

        second = run_json(repo, "--task", task_id, "--ignore-wait", expect=1)
        assert second["task_status"] == "failed" and second["attempt_spent"] is False
        third = run_json(repo, "--task", task_id, "--ignore-wait", expect=3)
        assert third["task_status"] == "held" and third["attempt_spent"] is False

        held = show(repo, task_id)
        assert held["status"] == "held" and held["held_by"] == "machine"
        assert held["attempts"] == 0 and held["not_before"] is None
        reason = held["hold_reason"]
        assert reason.startswith("3 refunded runs in a row (budgets.max_refunds: 3)")
        assert reason.count("every seat lost to a provider fault: llm: HTTP 503") == 3

        released = repo.main("task", "release", task_id)
        assert released.returncode == 0, released.stderr
        # After a release the streak starts again: one more outage is refunded, not held.
        fourth = run_json(repo, "--task", task_id, expect=1)
        assert fourth["task_status"] == "failed" and fourth["attempt_spent"] is False
    assert [r["settle_row"] for r in show(repo, task_id)["runs"]] == ["failed_machine_fault"] * 4


class _NoChoice(OpenAIChat):
    """Answers a turn whose text is ``NO_CHOICE`` with 200, its usage and no choice at all (a
    gateway whose upstream failed after it was billed)."""

    def render(self, turn: Turn, request: RecordedRequest, seq: int) -> Response:
        answer = super().render(turn, request, seq)
        if turn.text != NO_CHOICE:
            return answer
        doc = {**json.loads(answer.body), "choices": []}
        return replace(json_response(200, doc), usage=turn.usage)


NO_CHOICE = "<no choice>"


def test_a_billed_answer_without_a_choice_is_still_counted(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    empty = Turn(text=NO_CHOICE, usage=Usage(5000, 0))
    listing = Turn.call("list_files", {"path": "."})
    with ModelServer([listing, listing], dialects=[_NoChoice()], when_exhausted=empty) as server:
        payload = run_json(repo, "--contract", str(llm_contract(repo, server)), expect=1)
        handed = server.handed_out
    assert payload["reason"].endswith("the endpoint answered without any choice, 3 of 3 calls")
    assert handed.answers == 5 and handed.tokens == 2 * 120 + 3 * 5000
    assert mismatches(handed, journal(repo.root), [payload], usage_report(repo)) == []
