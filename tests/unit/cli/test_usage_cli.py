"""``assay usage``, and the usage ``task show`` and ``ledger show`` print, in-process (typer's
CliRunner) over a real SQLite ledger whose journal has priced, unpriced and unreported
dispatches (``support.usage_journal``): sums per group, unknown costs counted apart and never
printed as $0, ``--since``, the JSON documents against the published schema, and a read-only
command that creates nothing where there is no ledger."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support.repo import git
from support.usage_journal import PRICED_COST, TITLES, fill
from typer.testing import CliRunner

from assay.adapters.store.sql import Ledger
from assay.cli.app import build_app
from assay.cli.usage import parse_since

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "cli.schema.json").read_text()
)
NOW = datetime(2026, 12, 4, 12, 30, tzinfo=UTC)


def valid(name: str, document: object) -> None:
    """``document`` validates against the published ``#/$defs/<name>``."""
    jsonschema.Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{name}"}).validate(document)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty repository as the working directory, no ledger in it yet."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name in ("ASSAY_HOME", "ASSAY_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def journal(repo: Path) -> datetime:
    """A ledger in the repository whose journal ``support.usage_journal`` describes, filled
    relative to the time returned."""
    now = datetime.now(UTC)
    with Ledger.open(f"sqlite:///{repo / '.assay' / 'assay.db'}") as ledger:
        fill(ledger, now)
    return now


def assay(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(build_app(args[0]), list(args))
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    return done.exit_code, done.stdout, done.stderr


def usage_json(*args: str) -> dict[str, Any]:
    code, out, err = assay("usage", "--json", *args)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    valid("usage", document)
    return document


# -- --since ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", NOW - timedelta(minutes=30)),
        ("12h", NOW - timedelta(hours=12)),
        ("7d", NOW - timedelta(days=7)),
        ("2w", NOW - timedelta(weeks=2)),
        (" 7D ", NOW - timedelta(days=7)),
        ("0", NOW),
        ("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-12-01T10:00", datetime(2026, 12, 1, 10, tzinfo=UTC)),
        ("2026-12-01T10:00+02:00", datetime(2026, 12, 1, 8, tzinfo=UTC)),
        ("2026-12-01T10:00:00Z", datetime(2026, 12, 1, 10, tzinfo=UTC)),
    ],
)
def test_since_reads_durations_and_iso_dates(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


@pytest.mark.parametrize("text", ["3x", "", "-7d", "7 days", "45", "yesterday", "99999999w"])
def test_since_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|longer"):
        parse_since(text, NOW)


# -- assay usage -----------------------------------------------------------------------------


def test_by_task_sums_each_task_and_keeps_unknown_costs_apart(journal: datetime) -> None:
    document = usage_json()
    assert document["by"] == "task" and document["since"] is None
    fix, docs = document["groups"]
    assert fix == {
        "key": "t-fix",
        "title": TITLES["t-fix"],
        "runs": 1,
        "dispatches": 3,
        "tokens_in": 20_900,
        "tokens_out": 1_450,
        "tokens": 22_350,
        "cost_usd": None,  # the llm coder reported no cost
        "priced_cost_usd": 0.0761,
        "unpriced_dispatches": 1,
        "unreported_dispatches": 0,
    }
    assert (docs["key"], docs["cost_usd"], docs["priced_cost_usd"]) == ("t-docs", None, 0.034)
    assert (docs["unpriced_dispatches"], docs["unreported_dispatches"], docs["tokens"]) == (
        0,
        1,
        7_900,
    )
    total = document["total"]
    assert (total["runs"], total["dispatches"], total["tokens"]) == (2, 5, 30_250)
    assert total["cost_usd"] is None and total["priced_cost_usd"] == PRICED_COST
    for wrong in (
        {**document, "total": {**total, "extra": 1}},
        {**document, "groups": [{**fix, "cost_usd": 0.0, "extra": 1}]},
        {**document, "groups": [{k: v for k, v in fix.items() if k != "unpriced_dispatches"}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            valid("usage", wrong)


def test_by_coder_model_and_day(journal: datetime) -> None:
    coders = {g["key"]: g for g in usage_json("--by", "coder")["groups"]}
    assert list(coders) == ["claude", "llm", "judge:j1", "aider"]
    assert coders["claude"]["cost_usd"] == 0.109 and coders["claude"]["runs"] == 2
    assert coders["judge:j1"]["cost_usd"] == 0.0011
    assert coders["aider"]["cost_usd"] is None and coders["aider"]["unreported_dispatches"] == 1
    models = [g["key"] for g in usage_json("--by", "model")["groups"]]
    assert models == ["claude-sonnet-4", "gpt-4.1-mini", "claude-haiku", None]
    days = usage_json("--by", "day")["groups"]
    # A dispatch counts on the (UTC) day it first reported, with all it spent since.
    minute = timedelta(minutes=1)
    firsts = [journal - timedelta(days=3) + n * minute for n in (1, 2, 3)]
    firsts += [journal - 50 * minute, journal - 30 * minute]
    assert [g["key"] for g in days] == sorted({t.date().isoformat() for t in firsts})
    assert days[0]["dispatches"] == 3 and days[0]["tokens_in"] == 20_900


def test_since_keeps_the_dispatches_that_first_reported_since_each_with_all_it_spent(
    journal: datetime,
) -> None:
    document = usage_json("--since", "2d", "--by", "coder")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", document["since"])
    coders = {g["key"]: g for g in document["groups"]}
    assert set(coders) == {"claude", "aider"}  # the llm coder and the judge spoke 3 days ago
    # r-1's claude seat first reported 3 days ago (and again yesterday): left out whole; r-2's
    # counts, as the usage page counts a range.
    assert coders["claude"]["tokens_in"] == 7_000 and coders["claude"]["dispatches"] == 1
    since_three = usage_json("--since", "3d", "--by", "coder")
    (claude,) = (g for g in since_three["groups"] if g["key"] == "claude")
    assert claude["tokens_in"] == 15_000 + 7_000
    assert usage_json("--since", "30d")["total"]["dispatches"] == 5
    assert usage_json("--since", "2999-01-01")["groups"] == []


def test_the_table_never_prints_an_unknown_cost_as_zero(journal: datetime) -> None:
    code, out, _ = assay("usage", "--by", "coder")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "coder", "runs", "dispatches", "tokens_in", "tokens_out", "tokens", "cost",
        "unpriced", "unreported",
    ]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert rows["claude"][1:] == ["2", "2", "22,000", "1,900", "23,900", "$0.109", "0", "0"]
    assert rows["llm"][6:] == ["unknown", "1", "0"]
    assert rows["aider"][3:] == ["0", "0", "0", "unknown", "0", "1"]
    assert rows["total"][1:] == ["2", "5", "27,900", "2,350", "30,250", "≥", "$0.1101", "1", "1"]
    assert lines[-1] == (
        "2 of 5 dispatches have no known cost (1 reported tokens but no cost, 1 reported no "
        "usage): the total is at least $0.1101"
    )
    assert "$0 " not in out and not out.rstrip().endswith("$0")
    code, out, _ = assay("usage")
    assert out.splitlines()[1].split()[:4] == ["t-fix", "fix", "the", "parser"]


def test_a_known_total_has_no_note(journal: datetime) -> None:
    code, out, _ = assay("usage", "--by", "model", "--since", "40m")
    assert code == 0
    assert out.splitlines()[-1].split() == ["total", "1", "1", "7,000", "900", "7,900",
                                            "$0.034", "0", "0"]  # fmt: skip


def test_bad_options_are_one_line_and_exit_2(journal: datetime) -> None:
    code, out, err = assay("usage", "--since", "last week")
    assert (code, out) == (2, "")
    assert err.strip() == (
        "assay: --since: 'last week' is not a duration back from now (30m, 12h, 7d, 2w) or an "
        "ISO date or time (2026-12-01)"
    )
    code, _, err = assay("usage", "--by", "colour")
    assert code == 2 and "--by" in err and "Traceback" not in err


def test_no_ledger_is_said_and_nothing_is_created(repo: Path, tmp_path: Path) -> None:
    code, out, err = assay("usage")
    assert (code, err) == (0, "")
    assert out == "no usage journaled: no ledger here yet (nothing has been queued or run)\n"
    document = usage_json("--by", "day")
    assert document["groups"] == [] and document["total"]["dispatches"] == 0
    assert not (repo / ".assay").exists()
    elsewhere = tmp_path / "home"
    done = CliRunner().invoke(build_app("usage"), ["usage"], env={"ASSAY_HOME": str(elsewhere)})
    assert done.exit_code == 0 and not elsewhere.exists()


def test_an_empty_ledger_says_nothing_was_journaled(repo: Path) -> None:
    Ledger.open(f"sqlite:///{repo / '.assay' / 'assay.db'}").close()
    assert assay("usage") == (0, "no usage journaled\n", "")
    _, out, _ = assay("usage", "--since", "2026-01-01")
    assert out == "no usage journaled since 2026-01-01T00:00:00Z\n"


def test_outside_a_repository_it_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = assay("usage")
    assert (code, out) == (2, "") and "is not inside a git repository" in err


# -- task show, ledger show ------------------------------------------------------------------


def test_task_show_prints_each_runs_usage_and_the_total(journal: datetime) -> None:
    code, out, err = assay("task", "show", "t-fix")
    assert code == 0, err
    lines = out.splitlines()
    run = lines.index(next(line for line in lines if line.startswith("  run r-1:")))
    spent = "22,350 tokens (20,900 in, 1,450 out), cost ≥ $0.0761, 3 dispatches (1 unpriced)"
    assert lines[run + 1] == f"    usage: {spent}"
    assert lines[run + 2] == f"usage (all runs): {spent}"
    _, out, _ = assay("task", "show", "t-idle")
    assert "usage: none journaled" in out.splitlines()
    document = json.loads(assay("task", "show", "t-docs", "--json")[1])
    valid("task_show", document)
    assert document["usage"]["total"] == {
        "dispatches": 2,
        "tokens_in": 7_000,
        "tokens_out": 900,
        "tokens": 7_900,
        "cost_usd": None,
        "priced_cost_usd": 0.034,
        "unpriced_dispatches": 0,
        "unreported_dispatches": 1,
    }
    assert [r["run_id"] for r in document["usage"]["runs"]] == ["r-2"]
    idle = json.loads(assay("task", "show", "t-idle", "--json")[1])
    assert idle["usage"]["runs"] == [] and idle["usage"]["total"]["dispatches"] == 0


def test_ledger_show_prints_the_usage_too(journal: datetime) -> None:
    code, out, err = assay("ledger", "show", "t-docs")
    assert code == 0, err
    assert out.splitlines()[-2:] == [
        "usage (all runs): 7,900 tokens (7,000 in, 900 out), cost ≥ $0.034, 2 dispatches "
        "(1 reported no usage)",
        "  run r-2: 7,900 tokens (7,000 in, 900 out), cost ≥ $0.034, 2 dispatches "
        "(1 reported no usage)",
    ]
    document = json.loads(assay("ledger", "show", "t-fix", "--json")[1])
    valid("ledger_show", document)
    assert document["usage"]["total"]["priced_cost_usd"] == 0.0761
