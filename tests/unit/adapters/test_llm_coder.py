"""The ``llm`` coder's tool loop, against the scripted model server over real HTTP."""

from __future__ import annotations

import dataclasses
import json
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.llm_requests import make_request
from support.model_server import HttpError, ModelServer, ToolCall, Turn

from assay.adapters import stop_request
from assay.adapters.coders.base import DispatchResult
from assay.adapters.coders.llm import LlmCoder, PathRefused, confine
from assay.adapters.store import halt_ops
from assay.core.contract import canonical_halt_classes
from assay.core.vocab import FileChangeKind, StopReason


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    root = tmp_path / "wt"
    (root / "src").mkdir(parents=True)
    (root / "src" / "greet.py").write_text("def greet():\n    return 'hi'\n")
    (root / ".git").write_text("gitdir: elsewhere\n")
    return root


def dispatch(server: ModelServer, worktree: Path, **kw: Any) -> DispatchResult:
    return LlmCoder().dispatch(make_request(server, worktree, **kw))


def tool_results(server: ModelServer) -> list[str]:
    """The tool results the coder sent back, in order, from the recorded requests."""
    last = server.completions[-1].messages
    return [m["content"] for m in last if m["role"] == "tool"]


def test_solves_a_scripted_task(model_server: ModelServer, worktree: Path) -> None:
    model_server.script(
        Turn.call("list_files", {"path": "."}),
        Turn.call("write_file", {"path": "hello.txt", "content": "hello\n"}),
        Turn.calls(
            ToolCall("replace", {"path": "src/greet.py", "old": "'hi'", "new": "'hello'"}),
            ToolCall("run_validator", {"id": "check"}),
        ),
        Turn.call("finish", {"summary": "wrote hello.txt"}),
    )
    result = dispatch(model_server, worktree)

    assert (worktree / "hello.txt").read_text() == "hello\n"
    assert "'hello'" in (worktree / "src" / "greet.py").read_text()
    assert result.stop_reason is StopReason.COMPLETED
    assert result.exit_code == 0
    assert (result.turns_used, result.tokens_used) == (4, 4 * 120)
    report = result.report
    assert report is not None
    assert report.summary == "wrote hello.txt"
    assert report.stop_reason is StopReason.COMPLETED
    assert [(f.path, f.kind) for f in report.files or []] == [
        ("hello.txt", FileChangeKind.CREATED),
        ("src/greet.py", FileChangeKind.MODIFIED),
    ]
    listing, wrote, replaced, validated = tool_results(model_server)
    assert listing.splitlines() == ["src/greet.py"]  # .git is not listed
    assert wrote.startswith("wrote 6 characters")
    assert replaced.startswith("replaced 1 occurrence")
    assert validated.splitlines() == ["exit code: 0", "hello"]
    first = model_server.completions[0].body
    assert {t["function"]["name"] for t in first["tools"]} >= {"write_file", "finish"}
    assert "check: test -f hello.txt" in first["messages"][0]["content"]
    assert json.loads((worktree.parent / "report.json").read_text())["summary"] == "wrote hello.txt"
    assert result.log_path is not None
    events = [json.loads(line)["event"] for line in result.log_path.read_text().splitlines()]
    assert events[0] == "start"
    assert events[-1] == "end"


def test_paths_outside_the_worktree_are_refused(
    model_server: ModelServer, worktree: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (worktree / "link").symlink_to(outside)
    (worktree / "to-secret").symlink_to(outside / "secret.txt")
    attempts = [
        ("write_file", {"path": "../escaped.txt", "content": "x"}),
        ("write_file", {"path": str(tmp_path / "abs.txt"), "content": "x"}),
        ("write_file", {"path": "link/planted.txt", "content": "x"}),
        ("read_file", {"path": "to-secret"}),
        ("read_file", {"path": "src/../../outside/secret.txt"}),
        ("write_file", {"path": ".git/config", "content": "x"}),
    ]
    model_server.script(
        Turn.calls(*(ToolCall(name, args) for name, args in attempts)),
        Turn.call("finish", {"summary": "tried"}),
    )
    result = dispatch(model_server, worktree)

    assert result.stop_reason is StopReason.COMPLETED
    results = tool_results(model_server)
    assert len(results) == len(attempts)
    assert all(r.startswith("error: refused") for r in results), results
    assert not any("s3cret" in r for r in results)
    assert not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path / "abs.txt").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert result.report is not None
    assert result.report.files == []


def test_confine_allows_inner_dot_dot_and_refuses_escapes(worktree: Path) -> None:
    assert confine(worktree, "src/../new.txt") == worktree.resolve() / "new.txt"
    for bad in ("", "..", "../x", "/etc/passwd", "src/../../x"):
        with pytest.raises(PathRefused):
            confine(worktree, bad)


def test_file_tools_report_errors_to_the_model(model_server: ModelServer, worktree: Path) -> None:
    (worktree / "twice.txt").write_text("a a\n")
    model_server.script(
        Turn.calls(
            ToolCall("replace", {"path": "twice.txt", "old": "a", "new": "b"}),
            ToolCall("replace", {"path": "twice.txt", "old": "zzz", "new": "b"}),
            ToolCall("read_file", {"path": "missing.txt"}),
            ToolCall("run_validator", {"id": "nope"}),
            ToolCall("no_such_tool", {}),
            ToolCall("write_file", "{not json"),
            ToolCall("write_file", {"path": "x.txt"}),
        ),
        Turn.call("finish", {"summary": "done"}),
    )
    dispatch(model_server, worktree)
    results = tool_results(model_server)
    assert "found 2 times" in results[0]
    assert "not found" in results[1]
    assert all(r.startswith("error:") for r in results), results
    assert (worktree / "twice.txt").read_text() == "a a\n"
    assert not (worktree / "x.txt").exists()


def test_max_turns_stops_on_the_turn_budget(model_server: ModelServer, worktree: Path) -> None:
    model_server.script(*(Turn.call("list_files", {"path": "."}) for _ in range(3)))
    result = dispatch(model_server, worktree, max_turns=2)
    assert result.stop_reason is StopReason.TURN_BUDGET
    assert result.turns_used == 2
    assert model_server.remaining == 1
    assert result.report is not None
    assert result.report.turns_available == 2


def test_a_text_reply_is_nudged_back_to_the_tools(
    model_server: ModelServer, worktree: Path
) -> None:
    model_server.script(Turn.reply("I am done."), Turn.call("finish", {"summary": "ok"}))
    result = dispatch(model_server, worktree)
    assert result.stop_reason is StopReason.COMPLETED
    assert result.turns_used == 2
    assert "finish" in model_server.completions[1].messages[-1]["content"]


def test_a_rate_limit_is_a_provider_fault_with_its_reset_time(
    model_server: ModelServer, worktree: Path
) -> None:
    model_server.script(
        Turn.call("write_file", {"path": "hello.txt", "content": "hi"}),
        Turn.rate_limited(retry_after=7, reset="7s"),
    )
    before = datetime.now(UTC)
    result = dispatch(model_server, worktree)
    assert result.stop_reason is StopReason.PROVIDER_FAULT
    assert result.provider_fault
    assert result.exit_code == 1
    assert result.quota is not None
    assert result.quota.kind == "rate_limit"
    assert result.quota.reset_at is not None
    assert before + timedelta(seconds=6) < result.quota.reset_at < before + timedelta(seconds=9)
    assert result.turns_used == 1
    assert result.fault is None  # a rate limit is quota, not a provider fault
    assert (worktree / "hello.txt").exists()  # what was written is kept


def test_a_server_error_is_a_provider_fault_without_quota(
    model_server: ModelServer, worktree: Path
) -> None:
    model_server.when_exhausted = Turn.server_error(status=503)
    result = dispatch(model_server, worktree)
    assert result.stop_reason is StopReason.PROVIDER_FAULT
    assert result.quota is None
    assert result.error is not None
    assert "503" in result.error
    # retried by the client, then the seat is lost to the provider, not failed
    assert len(model_server.completions) == 3
    assert result.fault is not None
    assert result.fault.detail.startswith("llm: HTTP 503")
    assert result.fault.detail.endswith("3 of 3 calls")


def test_a_context_overflow_stops_on_the_context_budget(
    model_server: ModelServer, worktree: Path
) -> None:
    model_server.script(Turn.call("list_files", {"path": "."}), Turn.context_exceeded())
    result = dispatch(model_server, worktree)
    assert result.stop_reason is StopReason.CONTEXT_BUDGET
    assert result.quota is None
    assert result.turns_used == 1


def test_fire_halt_fires_in_the_dispatch_state_file(
    model_server: ModelServer, worktree: Path, tmp_path: Path
) -> None:
    contract = tmp_path / "contract.yaml"
    halts = "".join(
        f"  - {{name: {h.name}, severity: {h.severity.value}}}\n" for h in canonical_halt_classes()
    )
    contract.write_text(f"task: t\nhalt_classes:\n{halts}")
    _, code = halt_ops.arm(contract, "d-1", tmp_path / "halts")
    assert code == 0
    model_server.script(
        Turn.call(
            "fire_halt", {"name": "halt-spec-contradiction", "evidence": "asks for a and not a"}
        ),
        Turn.call("finish", {"summary": "halted"}),
    )
    dispatch(model_server, worktree)
    state = json.loads((tmp_path / "halts" / "d-1.json").read_text())
    [halt] = [h for h in state["halts"] if h["name"] == "halt-spec-contradiction"]
    assert halt["lifecycle"] == "FIRED"
    assert json.loads(tool_results(model_server)[0])["fired"] is True


def test_a_missing_key_is_the_operators_setting(model_server: ModelServer, worktree: Path) -> None:
    result = dispatch(model_server, worktree, api_key_env="ASSAY_TEST_UNSET_KEY")
    assert result.environment_error is None  # not a machine fault: never refunded
    assert result.setting_error is not None
    assert "ASSAY_TEST_UNSET_KEY" in result.setting_error
    assert model_server.requests == []


def test_a_refused_key_is_the_operators_setting(model_server: ModelServer, worktree: Path) -> None:
    model_server.script(Turn(error=HttpError(401, "auth", "Incorrect API key provided")))
    result = dispatch(model_server, worktree)
    assert result.environment_error is None and result.fault is None
    assert result.setting_error is not None and "HTTP 401" in result.setting_error
    assert len(model_server.completions) == 1  # never retried


def test_honoured_settings_cover_the_endpoint_settings() -> None:
    assert {"model", "base_url", "api_key_env", "max_turns"} <= LlmCoder.honoured_settings
    assert "command" not in LlmCoder.honoured_settings


def test_the_wall_clock_budget_ends_a_slow_dispatch(
    model_server: ModelServer, worktree: Path
) -> None:
    model_server.script(Turn(text="late", delay_seconds=1.5))
    request = make_request(model_server, worktree)
    slow = dataclasses.replace(request, timeout_seconds=0.5)
    result = LlmCoder().dispatch(slow)
    assert result.timed_out is True
    assert result.exit_code is None
    assert result.stop_reason is None
    assert result.quota is None


def test_the_brief_is_in_the_system_message(model_server: ModelServer, worktree: Path) -> None:
    model_server.script(Turn.call("finish", {"summary": "NO CHANGE NEEDED: hello.txt exists"}))
    brief = "# The rules of this task (assay)\n\n- `halt-db-migration` (block): fire it when …\n"
    request = dataclasses.replace(make_request(model_server, worktree), brief=brief)
    result = LlmCoder().dispatch(request)
    assert result.report is not None
    assert result.report.summary == "NO CHANGE NEEDED: hello.txt exists"  # finish → summary
    system, user = model_server.completions[0].body["messages"][:2]
    assert system["role"] == "system" and system["content"].endswith(brief)
    assert system["content"].startswith("You are a coding agent")  # the loop's own rules first
    assert user == {"role": "user", "content": "Create hello.txt saying hello."}
    # The system prompt (the operator's brief) is in the transcript, not in the coder's output.
    assert result.log_path is not None and "halt-db-migration" in result.log_path.read_text()
    assert "halt-db-migration" not in result.output
    assert "NO CHANGE NEEDED: hello.txt exists" in result.output


def test_a_stop_signal_ends_the_loop_before_its_next_call(
    model_server: ModelServer, worktree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT/SIGTERM stop a run's coders: the in-process loop makes no call after it."""
    model_server.script(*[Turn.call("list_files", {"path": "."}) for _ in range(6)])
    stopping = lambda: signal.SIGTERM if len(model_server.completions) >= 2 else None  # noqa: E731
    monkeypatch.setattr(stop_request, "stop_requested", stopping)  # what stopping_now reads
    result = dispatch(model_server, worktree)
    assert len(model_server.completions) == 2
    assert result.error == "stopped by assay: SIGTERM" and result.turns_used == 2
    assert result.usage is not None and result.usage.calls == 2
