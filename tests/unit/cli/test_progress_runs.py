"""The progress line says what the run does next, never a recovery that will not happen."""

from __future__ import annotations

from pathlib import Path

from support.repo import make_repo, replay_contract


def test_a_block_with_no_recovery_left_says_end_not_recover(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = replay_contract(repo, "wrong", extra="budgets: {max_recovery: 0}")
    done = repo.main("run", "--contract", str(contract), "--progress", "always")
    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown
    assert "decision: recover" not in shown
    assert "decision: end (seat 1): no recovery left (max_recovery 0)" in shown


def test_a_wrong_fix_then_the_right_one_says_recover_then_land(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main(
        "run", "--contract", str(replay_contract(repo, "wrong", "fixed")), "--progress", "always"
    )
    shown = done.stdout + done.stderr
    assert done.returncode == 0, shown
    recover = shown.index("decision: recover (seat 1): attempt 2 of 3 follows")
    assert shown.index("decision: land (seat 1)") > recover


def test_a_fired_block_halt_says_end_with_the_halt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo.fixes / "leak.py").write_text('KEY = "AKIA' + 'Z7QX4MB2LPWV9KDT"\n')
    command = repo.put("leak.py", "src/config.py")
    done = repo.main(
        "run", "Add the config", "--coder", "command", "--coder-command", command,
        "--validator", "true", "--progress", "always",
    )  # fmt: skip
    shown = done.stdout + done.stderr
    assert done.returncode == 3, shown
    assert "decision: recover" not in shown
    assert "decision: end (seat 1): block halt fired: halt-secret-exposure" in shown


def test_a_flag_the_contract_sets_is_refused_beside_it_never_ignored(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = str(replay_contract(repo, "fixed"))
    for command in ("run", "task add"):
        done = repo.main(*command.split(), "--contract", contract, "--max-recovery", "0")
        assert done.returncode == 2, done.stderr
        assert "--max-recovery cannot be combined with --contract" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (repo.root / ".assay").exists()  # nothing was created
    # --sandbox is the one documented override of a contract file.
    done = repo.main("run", "--contract", contract, "--sandbox", "bwrap")
    assert done.returncode == 0, done.stdout + done.stderr
