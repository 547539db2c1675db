"""The coder flags of ``assay run`` and ``assay task add``: ``--coder KIND[:MODEL]``, ``--model``,
``--base-url``, ``--api-key-env``, ``--coder-command``. A flag the chosen kind does not use is
refused naming the kinds that do; ``--coder llm`` is usable from flags alone; nothing is created
before a refusal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.model_server import ModelServer, Turn
from support.repo import CHECK_TESTS, make_repo
from typer.testing import CliRunner, Result

from assay.adapters.store.contracts import load_task_contract
from assay.adapters.store.sql import Ledger
from assay.cli.app import build_app
from assay.core.vocab import CoderKind

COMMANDS = (["run", "Fix it."], ["task", "add", "Fix it."])
URL = "http://localhost:8000/v1"


def invoke(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(repo)
    monkeypatch.delenv("ASSAY_DATABASE_URL", raising=False)
    monkeypatch.delenv("ASSAY_HOME", raising=False)
    return CliRunner().invoke(build_app(), list(args))


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ["--coder", "llm"],
            "--coder llm needs --model NAME (the model its endpoint serves), e.g.",
        ),
        (["--coder", "llm:"], "--coder llm: names no model after the colon"),
        (["--coder", "llm", "--model", " "], "--model needs a model name"),
        (["--coder", "claude:a", "--model", "b"], "--coder claude:a and --model b name different"),
        (
            ["--coder", "command", "--coder-command", "true", "--base-url", URL],
            "--base-url is for --coder claude, codex, aider, mini or llm; the command coder does",
        ),
        (["--coder-command", "true", "--model", "m"], "--model is for --coder claude, codex,"),
        (["--api-key-env", "MY_KEY"], "--api-key-env is for --coder codex or llm; the claude"),
        (["--coder", "aider", "--api-key-env", "K"], "the aider coder does not use it"),
        (["--coder", "claude", "--coder-command", "x"], "--coder-command is for --coder command"),
        (["--coder", "llm:m", "--base-url", "localhost:8000"], "--base-url needs an http://"),
        # A URL the HTTP client cannot read: refused here, never an internal error mid-run.
        (["--coder", "llm:m", "--base-url", "http://h:port/v1"], "--base-url needs a port from"),
        (["--coder", "llm:m", "--base-url", "http://h:99999/v1"], "--base-url needs a port from"),
        (["--coder", "llm:m", "--base-url", "http:///v1"], "--base-url names no host"),
        (["--coder", "llm:m", "--base-url", "http://h/v1 "], "--base-url needs the URL alone"),
        (["--coder", "llm:m", "--api-key-env", "MY KEY"], "--api-key-env names the environment"),
        (
            ["--coder", "llm:m", "--api-key-env", "ASSAY_DATABASE_URL"],
            "--api-key-env ASSAY_DATABASE_URL holds assay's own secret",
        ),
        (["--coder", "replay"], "the replay coder needs steps: give it in a contract file"),
        # A validator flag without a command: said as the flag, not as a contract's key path.
        (["--coder-command", "x", "--validator", ""], "--validator '' gives no command to run"),
        (["--coder-command", "x", "--validator", "t= "], "--validator 't= ' gives no command"),
    ],
)
def test_a_flag_the_coder_cannot_use_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], said: str
) -> None:
    repo = make_repo(tmp_path).root
    for command in COMMANDS:
        result = invoke(repo, monkeypatch, *command, *flags, "--sandbox", "none")
        assert result.exit_code == 2, result.output
        assert said in result.output and "valid list" not in result.output, result.output
        assert result.output.count("\n") == 1 and "Traceback" not in result.output
        assert not (repo / ".assay").exists()


@pytest.mark.parametrize("flag", [["--model", "m"], ["--base-url", URL], ["--api-key-env", "K"]])
def test_the_endpoint_flags_beside_a_contract_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: list[str]
) -> None:
    repo = make_repo(tmp_path).root
    (repo / "c.yaml").write_text("task: Fix it.\ncoder: {kind: llm, model: m}\n")
    for command in (["run"], ["task", "add"]):
        result = invoke(repo, monkeypatch, *command, "--contract", "c.yaml", *flag)
        assert result.exit_code == 2, result.output
        assert f"{flag[0]} cannot be combined with --contract" in result.output
        assert not (repo / ".assay").exists()


@pytest.mark.parametrize(
    "flags",
    [["--model", "m"], ["--coder", "claude"], ["--land", "merge"], ["--api-key-env", "K"]],
)
@pytest.mark.parametrize("given", [["--task", "t1"], ["--resume"]])
def test_a_contract_flag_beside_task_or_resume_is_refused_never_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], given: list[str]
) -> None:
    repo = make_repo(tmp_path).root
    result = invoke(repo, monkeypatch, "run", *given, *flags, "--max-cost", "2")
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"assay: {flags[0]}, --max-cost cannot be combined with --task or --resume: the "
        "task's contract sets these (give them when it is created)\n"
    )
    assert not (repo / ".assay").exists()


def stored_coder(repo: Path, result: Result) -> object:
    assert result.exit_code == 0, result.output
    task_id = json.loads(result.stdout)["id"]
    ledger = Ledger.open(f"sqlite:///{repo / '.assay' / 'assay.db'}")
    return load_task_contract(ledger, task_id).coder_for_seat(1)


def test_task_add_stores_an_llm_coder_built_from_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path).root
    args = ["--coder", "llm", "--model", "gpt-x", "--base-url", URL, "--api-key-env", "MY_KEY"]
    result = invoke(
        repo,
        monkeypatch,
        "task",
        "add",
        "Fix it.",
        *args,
        "--sandbox",
        "none",
        "--no-check",
        "--json",
    )
    spec = stored_coder(repo, result)
    assert (spec.kind, spec.model, spec.base_url, spec.api_key_env) == (  # type: ignore[attr-defined]
        CoderKind.LLM,
        "gpt-x",
        URL,
        "MY_KEY",
    )


@pytest.mark.parametrize(
    ("flags", "kind", "model"),
    [
        (["--coder", "codex:o3", "--model", "o3"], CoderKind.CODEX, "o3"),  # they agree
        (["--coder", "claude:sonnet"], CoderKind.CLAUDE, "sonnet"),  # the shorthand
        (["--model", "opus"], CoderKind.CLAUDE, "opus"),  # the default kind
        (["--coder", "llm:m", "--base-url", URL], CoderKind.LLM, "m"),
    ],
)
def test_the_model_shorthand_and_the_flag_name_the_same_model(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    kind: CoderKind,
    model: str,
) -> None:
    repo = make_repo(tmp_path).root
    result = invoke(
        repo,
        monkeypatch,
        "task",
        "add",
        "Fix it.",
        *flags,
        "--sandbox",
        "none",
        "--no-check",
        "--json",
    )
    spec = stored_coder(repo, result)
    assert (spec.kind, spec.model) == (kind, model)  # type: ignore[attr-defined]


def test_run_with_the_llm_flags_alone_fixes_the_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path).root
    monkeypatch.setenv("MY_KEY", "sk-local")
    with ModelServer() as server:
        server.script(
            Turn.call("replace", {"path": "src/slug.py", "old": "isalpha", "new": "isalnum"}),
            Turn.call("finish", {"summary": "slugify keeps digits"}),
        )
        result = invoke(
            repo, monkeypatch, "run", "Make slugify keep digits.",
            "--coder", "llm", "--model", "scripted-model", "--base-url", server.base_url,
            "--api-key-env", "MY_KEY", "--validator", CHECK_TESTS, "--sandbox", "none",
            "--land", "branch", "--json", "--progress", "never",
        )  # fmt: skip
        requests = server.completions
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["status"] == "ready"
    assert requests[0].body["model"] == "scripted-model"
    assert requests[0].headers["authorization"] == "Bearer sk-local"
