"""The budget flags: each sets its contract key (over a contract file's), and a value the
contract refuses is named by its flag, exit 2, before anything is created."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.repo import git
from typer.testing import CliRunner

from assay.cli.app import build_app
from assay.cli.new_task import build_contract, spending_flags


def test_each_flag_sets_its_budget_and_beats_the_contract_file(tmp_path: Path) -> None:
    contract = tmp_path / "c.yaml"
    contract.write_text("task: Fix it.\nbudgets: {max_tokens: 50, task_max_cost_usd: 9}\n")
    built = build_contract(
        None, contract, None, None, None, "branch", 1, 3, 2,
        spending=spending_flags(0.5, None, None, 9000),
    )  # fmt: skip
    budgets = built.budgets
    assert (budgets.max_cost_usd, budgets.max_tokens) == (0.5, 50)
    assert (budgets.task_max_cost_usd, budgets.task_max_tokens) == (9, 9000)


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--max-cost", "0", "--max-cost: input should be greater than 0"),
        ("--task-max-cost", "nan", "--task-max-cost: input should be a finite number"),
        ("--max-tokens", "0", "--max-tokens"),
    ],
)
def test_a_refused_value_names_its_flag_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str, value: str, said: str
) -> None:
    git(tmp_path, "init", "-q")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        build_app(), ["task", "add", "Fix it.", "--coder-command", "true", flag, value]
    )
    assert result.exit_code == 2
    assert said in result.output
    assert not (tmp_path / ".assay").exists()


def test_a_budget_flag_beside_task_is_refused_never_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(tmp_path, "init", "-q")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(build_app(), ["run", "--task", "t1", "--max-tokens", "240"])
    assert result.exit_code == 2
    assert "--max-tokens cannot be combined with --task" in result.output
