"""child_environment: an allowlist, so the operator's tokens stay out of agents' processes."""

from __future__ import annotations

from pathlib import Path

from assay.adapters.envpolicy import (
    CODER_CREDENTIALS,
    agent_environment,
    child_environment,
    credential_variables,
    model_environment,
)
from assay.adapters.process import run_process

OPERATOR = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/home/op",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "GITHUB_TOKEN": "operator-github-token-value",
    "AWS_SECRET_ACCESS_KEY": "operator-aws-secret-value",
    "ANTHROPIC_API_KEY": "operator-anthropic-key-value",
    "DATABASE_URL": "postgresql://op:pw@db/prod",
}


def test_a_secret_in_the_operator_env_does_not_reach_the_child(tmp_path: Path) -> None:
    env = child_environment(OPERATOR)
    assert set(env) == {"PATH", "HOME", "LANG", "LC_ALL"}
    ran = run_process(["env"], cwd=tmp_path, env=env, timeout=5, log_path=tmp_path / "env.log")
    for secret in ("operator-github-token-value", "operator-aws-secret-value", "op:pw"):
        assert secret not in ran.stdout
        assert secret not in (tmp_path / "env.log").read_text()


def test_declared_dollar_name_passes_the_operator_value_through(tmp_path: Path) -> None:
    env = child_environment(OPERATOR, declared={"GH_TOKEN": "$GITHUB_TOKEN", "MODE": "ci"})
    assert env["GH_TOKEN"] == "operator-github-token-value"
    assert env["MODE"] == "ci"
    assert "GITHUB_TOKEN" not in env  # only under the declared name
    ran = run_process(
        ["/bin/sh", "-c", 'echo "$GH_TOKEN/$MODE/$GITHUB_TOKEN"'],
        cwd=tmp_path,
        env=env,
        timeout=5,
        log_path=tmp_path / "p.log",
    )
    assert ran.stdout == "operator-github-token-value/ci/\n"


def test_a_declared_reference_to_an_unset_variable_is_left_unset() -> None:
    env = child_environment(OPERATOR, declared={"X": "$NOT_SET_ANYWHERE"})
    assert "X" not in env


def test_a_lone_dollar_is_a_literal_value() -> None:
    assert child_environment(OPERATOR, declared={"PRICE": "$"})["PRICE"] == "$"


def test_a_coder_gets_its_own_credentials_only() -> None:
    env = child_environment(OPERATOR, credentials=CODER_CREDENTIALS["claude"])
    assert env["ANTHROPIC_API_KEY"] == "operator-anthropic-key-value"
    assert "GITHUB_TOKEN" not in env
    assert "ANTHROPIC_API_KEY" not in child_environment(
        OPERATOR, credentials=CODER_CREDENTIALS["command"]
    )


def test_assay_variables_win_and_path_has_a_default() -> None:
    env = child_environment({"HOME": "/h"}, declared={"ASSAY_SEAT": "9"}, extra={"ASSAY_SEAT": "1"})
    assert env["ASSAY_SEAT"] == "1"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"


def test_an_llm_model_reads_openai_key_and_base_url() -> None:
    assert credential_variables("llm") == {"OPENAI_API_KEY", "OPENAI_BASE_URL"}
    env = model_environment({"OPENAI_API_KEY": "k", "GITHUB_TOKEN": "t"}, "llm")
    assert env["OPENAI_API_KEY"] == "k" and "GITHUB_TOKEN" not in env


def test_api_key_env_names_the_variable_read() -> None:
    operator = {"OPENAI_API_KEY": "default", "JUDGE_KEY": "named"}
    assert "JUDGE_KEY" in credential_variables("llm", {"api_key_env": "JUDGE_KEY"})
    env = model_environment(operator, "llm", {"api_key_env": "JUDGE_KEY"})
    assert env["JUDGE_KEY"] == "named" and "OPENAI_API_KEY" not in env
    assert "JUDGE_KEY" in credential_variables("codex", {"api_key_env": "JUDGE_KEY"})


def test_the_llm_coders_commands_never_see_its_key() -> None:
    env = agent_environment({"OPENAI_API_KEY": "k", "PATH": "/bin"}, "llm")
    assert "OPENAI_API_KEY" not in env and env["PATH"] == "/bin"


def test_a_cli_agent_gets_its_own_credentials_and_not_others() -> None:
    operator = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    env = agent_environment(operator, "claude")
    assert env["ANTHROPIC_API_KEY"] == "a" and "OPENAI_API_KEY" not in env


def test_the_contract_env_overrides_an_exported_key() -> None:
    env = model_environment({"OPENAI_API_KEY": "exported"}, "llm", declared={"OPENAI_API_KEY": "x"})
    assert env["OPENAI_API_KEY"] == "x"
