"""``assay token add | list | remove`` in-process (typer's CliRunner), over a config folder of
the test's own (``ASSAY_CONFIG_DIR``): the secret printed once, only names and times listed,
refusals with exit 2 and one line, never a traceback."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
from typer.testing import CliRunner

from assay.cli.app import build_app
from assay.web.tokens import CONFIG_DIR_ENV, TOKENS_FILE, TokenStore

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "cli.schema.json").read_text()
)


def valid(name: str, document: object) -> None:
    """``document`` validates against the published ``#/$defs/<name>``."""
    jsonschema.Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{name}"}).validate(document)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "config"


def token(config: Path, *args: str) -> tuple[int, str, str]:
    runner = CliRunner()
    done = runner.invoke(build_app("token"), ["token", *args], env={CONFIG_DIR_ENV: str(config)})
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    return done.exit_code, done.stdout, done.stderr


def test_add_prints_the_token_once_and_keeps_only_its_hash(config: Path) -> None:
    code, out, err = token(config, "add", "alice")
    assert code == 0
    secret = out.strip()
    assert len(secret) >= 32 and "shown only now" in err
    assert TokenStore(config).match(secret) is not None
    assert secret not in (config / TOKENS_FILE).read_text()
    assert stat.S_IMODE((config / TOKENS_FILE).stat().st_mode) == 0o600
    code, listed, _ = token(config, "list")
    assert code == 0 and "alice" in listed and secret not in listed


def test_json_outputs(config: Path) -> None:
    code, out, _ = token(config, "add", "ci-bot", "--json")
    made = json.loads(out)
    assert code == 0 and set(made) == {"name", "created", "token"} and made["name"] == "ci-bot"
    valid("token_add", made)
    listed = json.loads(token(config, "list", "--json")[1])
    valid("token_list", listed)
    assert listed == {
        "path": str(config / TOKENS_FILE),
        "tokens": [{"name": "ci-bot", "created": made["created"]}],
    }
    removed = json.loads(token(config, "remove", "ci-bot", "--json")[1])
    valid("token_remove", removed)
    assert removed == {"removed": {"name": "ci-bot", "created": made["created"]}}
    assert json.loads(token(config, "list", "--json")[1])["tokens"] == []


def test_remove_stops_the_token(config: Path) -> None:
    secret = token(config, "add", "alice")[1].strip()
    code, out, _ = token(config, "remove", "alice")
    assert code == 0 and "removed token 'alice'" in out
    assert TokenStore(config).match(secret) is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["add", "has space"], "is not valid: 1-40 letters"),
        (["add", "x" * 41], "is not valid"),
        (["add", "-x"], ""),  # an option to click, a usage error all the same
        (["remove", "nobody"], "no token named 'nobody'"),
        (["remove", "bad/name"], "is not valid"),
    ],
)
def test_refusals_are_exit_2_with_one_line(config: Path, args: list[str], says: str) -> None:
    code, out, err = token(config, *args)
    assert code == 2, (out, err)
    assert says in err and "Traceback" not in err + out


def test_a_name_taken_is_exit_2(config: Path) -> None:
    token(config, "add", "alice")
    code, _, err = token(config, "add", "alice")
    assert code == 2 and "a token named 'alice' exists" in err


def test_list_with_no_store_says_how_to_make_one(config: Path) -> None:
    code, out, _ = token(config, "list")
    assert code == 0 and "assay token add NAME" in out
    assert not config.exists()  # listing creates nothing


def test_an_unsafe_store_is_exit_2(config: Path) -> None:
    token(config, "add", "alice")
    (config / TOKENS_FILE).chmod(0o666)
    code, _, err = token(config, "list")
    assert code == 2 and "writable by others" in err


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"token": "x"}, "at least 16 bytes"),  # the observed 1-character token
        ({"token": "fifteen-bytes.."}, "at least 16 bytes"),
        ({"host": "0.0.0.0", "anonymous_read": True}, "loopback dashboard only"),
    ],
)
def test_serve_refuses_a_short_token_and_anonymous_reading_off_loopback(
    settings: dict[str, object], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from assay.cli.web_options import WebOptions

    given: dict[str, Any] = {"host": "127.0.0.1", "token": None, **settings}
    with pytest.raises(typer.Exit) as refused:
        WebOptions.of(no_web=False, web_only=True, port=0, **given)
    assert refused.value.exit_code == 2 and says in capsys.readouterr().err
    assert WebOptions.of(no_web=False, web_only=True, host="::1", port=0, token="y" * 16).token
