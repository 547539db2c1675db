"""assay's own secrets (the ledger's URL and password, the dashboard's token, the Temporal API
key) never reach a coder, validator or judge: a contract that would hand one on is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from assay.adapters.assay_secrets import assay_secrets
from assay.adapters.envpolicy import agent_environment, child_environment, contract_leak
from assay.adapters.process import run_process
from assay.cli.workspace import refuse_secret_env
from assay.core.contract import Contract, parse_contract

PASSWORD = "s3cret-ledger-pw"
OPERATOR = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/op",
    "ASSAY_DATABASE_URL": f"postgresql+psycopg://assay:{PASSWORD}@db:5432/assay",
    "PGPASSWORD": PASSWORD,
    "ASSAY_WEB_TOKEN": "dashboard-token-0123456789",
    "ASSAY_TEMPORAL_API_KEY_ENV": "TEMPORAL_API_KEY",
    "TEMPORAL_API_KEY": "temporal-key-0123456789abcdef",
    "GITHUB_TOKEN": "gh-token-value",
    "ASSAY_TEMPORAL_TLS_KEY": "/etc/assay/worker-key.pem",
}
SECRETS = (PASSWORD, "dashboard-token-0123456789", "temporal-key-0123456789abcdef")


def contract(body: str) -> Contract:
    coder = "" if "coder:" in body else "coder: {kind: command, command: 'true'}\n"
    return parse_contract(f"task: x\n{coder}{body}")


def test_the_secrets_are_the_url_its_password_the_token_and_the_temporal_key() -> None:
    found = assay_secrets({**OPERATOR, "ASSAY_DATABASE_URL": "postgresql://u:p%40ss-word@h/db"})
    assert {s.value for s in found.values} >= {"p%40ss-word", "p@ss-word"}  # as written, decoded
    assert {"ASSAY_DATABASE_URL", "ASSAY_WEB_TOKEN", "TEMPORAL_API_KEY"} <= found.names
    query = assay_secrets({"ASSAY_DATABASE_URL": "postgresql://h/db?user=u&password=from-query"})
    assert "from-query" in {s.value for s in query.values}
    assert assay_secrets({"ASSAY_DATABASE_URL": "postgresql://u@h/db"}).values[1:] == ()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("env: {PW: $PGPASSWORD}\n", "env: PW holds the ledger's password"),
        (f"env: {{DSN: 'postgresql://assay:{PASSWORD}@db/assay'}}\n", "env: DSN holds"),
        ("env: {KEY: $TEMPORAL_API_KEY}\n", "env: KEY names $TEMPORAL_API_KEY"),
        ("env: {T: dashboard-token-0123456789}\n", "the dashboard's token"),
        ("env: {K: /etc/assay/worker-key.pem}\n", "the Temporal client key's path"),
        (
            "coder: {kind: claude, api_key_env: TEMPORAL_API_KEY}\n",
            "the coder's credential TEMPORAL_API_KEY",
        ),
        (
            "judges: 2\nseats: 2\njudge: {kind: llm, model: m, api_key_env: PGPASSWORD}\n",
            "the judge's credential PGPASSWORD holds the ledger's password",
        ),
        (
            "validators: [{id: j, kind: judge, model: m, api_key_env: TEMPORAL_API_KEY}]\n",
            "validator j's credential TEMPORAL_API_KEY",
        ),
        (
            f"coder: {{kind: command, command: 'true', args: ['--db={PASSWORD}']}}\n",
            "the coder's command line holds the ledger's password",
        ),
        (f"validators: [{{id: t, run: 'psql -W {PASSWORD}'}}]\n", "validator t's run holds"),
    ],
)
def test_a_contract_that_hands_one_on_is_refused_without_saying_it(body: str, said: str) -> None:
    problem = contract_leak(contract(body), OPERATOR)
    assert problem is not None and said in problem, problem
    assert "never hands its own secrets" in problem
    assert not any(secret in problem for secret in SECRETS)


def test_a_contract_without_one_runs_and_a_short_password_is_matched_whole_only() -> None:
    plain = contract("env: {GH: $GITHUB_TOKEN, MODE: ci}\nvalidators: [{id: t, run: make}]\n")
    assert contract_leak(plain, OPERATOR) is None
    short = {"ASSAY_DATABASE_URL": "postgresql://u:pw@h/db", "PW": "pw"}
    assert contract_leak(contract("env: {P: /usr/lib/pwd}\n"), short) is None
    assert contract_leak(contract("env: {P: $PW}\n"), short) is not None
    assert contract_leak(plain, {}) is None  # no ledger URL, no token, no key: nothing to hide


def test_run_start_refuses_it_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in OPERATOR.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(typer.Exit) as stopped:
        refuse_secret_env(contract("env: {PW: $PGPASSWORD}\n"))
    assert stopped.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.startswith("assay: the contract cannot run: env: PW holds the ledger's password")
    assert PASSWORD not in err
    refuse_secret_env(contract("env: {MODE: ci}\n"))  # passes


def test_what_gets_past_the_check_is_dropped_from_the_childs_environment(tmp_path: Path) -> None:
    # As if a contract had skipped parsing and the run-start check: nothing reaches the child.
    env = child_environment(
        OPERATOR,
        credentials={"ASSAY_DATABASE_URL", "TEMPORAL_API_KEY", "PGPASSWORD"},
        declared={
            "URL": "$ASSAY_DATABASE_URL",
            "TOKEN": "$ASSAY_WEB_TOKEN",
            "KEY": "$TEMPORAL_API_KEY",
            "PW": "$PGPASSWORD",
            "LITERAL": f"x{PASSWORD}x",
            "MODE": "ci",
        },
    )
    assert env["MODE"] == "ci"
    assert not {"URL", "TOKEN", "KEY", "PW", "LITERAL", "ASSAY_DATABASE_URL"} & set(env)
    ran = run_process(["env"], cwd=tmp_path, env=env, timeout=5, log_path=tmp_path / "env.log")
    assert not any(secret in ran.stdout for secret in SECRETS)


def test_no_coder_kind_is_handed_the_ledger_url() -> None:
    for kind in ("claude", "codex", "aider", "mini", "llm", "command", "replay"):
        env = agent_environment(OPERATOR, kind, {"api_key_env": "ASSAY_DATABASE_URL"})
        assert not any(PASSWORD in value for value in env.values()), kind
        assert "ASSAY_DATABASE_URL" not in env


def test_a_password_less_ledger_url_keeps_libpqs_password_variables_to_itself() -> None:
    # libpq reads the password from $PGPASSWORD (or the file $PGPASSFILE names) when the URL
    # has none: handing those on hands on the ledger.
    operator = {
        "PATH": "/usr/bin:/bin",
        "ASSAY_DATABASE_URL": "postgresql+psycopg://assay@db.internal/assay",
        "PGPASSWORD": "libpq-only-password",
        "PGPASSFILE": "/srv/assay/pgpass",
    }
    for body in ("env: {PW: $PGPASSWORD}", "env: {F: $PGPASSFILE}", "env: {F: /srv/assay/pgpass}"):
        assert contract_leak(contract(body), operator) is not None, body
    leaked = {"PW": "$PGPASSWORD", "F": "$PGPASSFILE", "LIT": "libpq-only-password"}
    env = child_environment(operator, declared=leaked)
    assert not {"PW", "F", "LIT"} & env.keys()
    claude = agent_environment(operator, "claude", {"api_key_env": "PGPASSWORD"})
    assert "PGPASSWORD" not in claude
    # A SQLite ledger's machine may use PGPASSWORD for something else: not assay's then.
    sqlite = {**operator, "ASSAY_DATABASE_URL": "sqlite:////srv/assay.db"}
    assert child_environment(sqlite, declared={"PW": "$PGPASSWORD"})["PW"] == "libpq-only-password"
