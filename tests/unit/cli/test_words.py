"""What the CLI prints names what failed, in the README's words.

Each wording is pinned where it is made (a run's outcome, a failed validator, a refused flag
or move, a wait, the convergence ledger); then a few representative runs go through the real
command in-process, and every line they and the task commands print is read for words a user
was never told: a settle row, a Python value, an internal name, a word said twice, a status
"change" that changes nothing.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.repo import CHECK_TESTS, Repo, git, make_repo, replay_contract

from assay.cli.explain import span, wait_note, waits_message
from assay.cli.main import main
from assay.cli.new_task import build_contract, unverified_warning
from assay.cli.outcome import run_said, state_said, task_said
from assay.cli.progress import WarningsOnly, failure_lines
from assay.cli.task_views import ledger_text
from assay.cli.usage_views import TaskUsage
from assay.core.results import ValidatorResult
from assay.core.tasks import Task
from assay.core.vocab import RunStatus, SettleRow, Severity, StageVerdict, TaskStatus
from assay.engine.effects import RunEvent
from assay.engine.graph.records import failure_summary

README = (Path(__file__).resolve().parents[3] / "README.md").read_text()
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def task(status: TaskStatus = TaskStatus.FAILED, attempts: int = 1) -> Task:
    made = Task.new(id="t1", title="Fix it", instruction="Fix it", now=NOW)
    return made.model_copy(update={"status": status, "attempts": attempts})


# -- a run's outcome ------------------------------------------------------------------------


def test_a_reason_that_starts_with_its_status_is_said_once() -> None:
    assert run_said("merged", "merged into main as one commit, 1a2b") == (
        "merged into main as one commit, 1a2b"
    )
    assert run_said("blocked", "stuck: attempt 2 failed exactly as attempt 1 did") == (
        "blocked: stuck: attempt 2 failed exactly as attempt 1 did"
    )
    assert run_said("ready", None) == "ready"


def test_the_task_is_said_in_words_never_by_its_settle_row() -> None:
    assert task_said(task(), spent=True, max_attempts=3) == (
        "failed, runnable again (attempts: 1 of 3 used)"
    )
    refunded = task_said(task(attempts=0), spent=False, max_attempts=3)
    assert refunded == (
        "failed, runnable again (refunded, this run does not count; attempts: 0 of 3 used)"
    )
    held = task_said(task(TaskStatus.HELD, 3), spent=True, max_attempts=3)
    assert held.startswith("held for a human (attempts: 3 of 3 used)")
    assert "`assay task show t1`" in held
    assert state_said("done", "t1") == "done"
    assert "refunded" in README and "does not count" in README  # the word is explained


def test_a_settled_run_is_never_said_as_a_change_from_a_status_to_itself() -> None:
    said = state_said(RunStatus.FAILED.value, "t1")
    assert "->" not in said and said == "failed, runnable again"


def test_a_workflow_is_said_in_the_same_words() -> None:
    from assay.cli.outcome import workflow_said
    from assay.engine.temporal.calls import RunOutcome

    ended = RunOutcome("t1", runs=["r1", "r2"], status="failed", task_status="failed", lost=1)
    assert workflow_said(ended) == (
        "task t1: the last run ended failed (1 run(s) lost with their worker); the task is failed, "
        "runnable again (runs: r1, r2)"
    )
    stopped = RunOutcome("t1", runs=["r1"], task_status="held", stopped=True, note="SIGTERM")
    assert workflow_said(stopped).startswith("task t1: stopped (SIGTERM); the task is held for")


# -- a failed validator ---------------------------------------------------------------------


def command_result(tail: str, code: int = 1) -> ValidatorResult:
    return ValidatorResult(
        validator_id="tests",
        severity=Severity.BLOCK,
        justification=f"`python3 -m pytest -q` exited {code}; output tail:\n{tail}",
        findings=["FAILED test_x.py::test_y"],
    )


def test_a_failed_command_says_its_exit_and_the_last_lines_of_its_output() -> None:
    tail = "\n".join(f"line {n}" for n in range(1, 9)) + "\n\n"
    summary = failure_summary(command_result(tail))
    assert summary.splitlines() == [
        "tests: `python3 -m pytest -q` exited 1",
        "line 4", "line 5", "line 6", "line 7", "line 8",
    ]  # fmt: skip


def test_a_check_with_one_line_says_its_findings_under_it_once() -> None:
    scope = ValidatorResult(
        validator_id="scope",
        severity=Severity.BLOCK,
        justification="the change touches paths inside scope.protect: .github/ci.yml",
        findings=["inside scope.protect: .github/ci.yml", "forbidden by rule: x\ny"],
    )
    assert failure_summary(scope).splitlines() == [
        "scope: the change touches paths inside scope.protect: .github/ci.yml",
        '"forbidden by rule: x\\ny"',  # a finding is one line, whatever it holds
    ]


def test_off_a_terminal_the_run_ending_failures_are_said_as_the_terminal_says_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failures = [failure_summary(command_result("E   assert 1 == 2\n1 failed in 0.5s"))]
    decided = {"attempt": 2, "action": "recover", "seat": 1, "failures": failures}
    quiet = WarningsOnly()
    quiet(RunEvent("attempt.decided", {**decided, "next": "recover"}))  # not the end yet
    assert capsys.readouterr().err == ""
    quiet(RunEvent("attempt.decided", {**decided, "next": "end"}))
    said = capsys.readouterr().err.splitlines()
    assert said == failure_lines(failures, markup=False)  # one path for both displays
    assert said == [
        "    ✗ tests: `python3 -m pytest -q` exited 1",
        "      │ E   assert 1 == 2",
        "      │ 1 failed in 0.5s",
    ]


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "key"),
    [
        (["--land", "merge"], "`land:`"),
        (["--coder", "claude"], "`coder:`"),
        (["--coder-command", "true"], "`coder.command`"),
        (["--validator", "true"], "`validators:`"),
        (["--seats", "2"], "`seats:`"),
        (["--max-attempts", "2"], "`budgets.max_attempts`"),
        (["--max-recovery", "0"], "`budgets.max_recovery`"),
    ],
)
def test_a_flag_beside_a_contract_names_the_key_it_would_set(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    key: str,
) -> None:
    contract = tmp_path / "c.yaml"
    contract.write_text("task: Fix it.\n")
    monkeypatch.chdir(tmp_path)
    for command in (["run"], ["task", "add"]):
        with pytest.raises(SystemExit) as done:
            main([*command, "--contract", str(contract), *flags])
        err = capsys.readouterr().err
        assert done.value.code == 2
        assert f"{flags[0]} cannot be combined with --contract" in err
        # The file sets none of them: it decides them by default, and says no more than that.
        assert "the contract file decides it, written or by default" in err
        assert f"set {key} in the file" in err and "max_recovery" not in err.replace(key, "")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "Fix it", "--land", "nope"], "'--land': 'nope' is not one of 'merge', 'branch'"),
        (["usage", "--by", "week"], "'--by': 'week' is not one of 'task', 'coder'"),
        (["completion", "tcsh"], "'shell': 'tcsh' is not one of 'bash', 'zsh', 'fish'"),
    ],
)
def test_a_choice_not_offered_is_said_without_the_validators_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], words: str,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    code, text = said(argv, capsys)
    assert code == 2 and words in text and "Value error" not in text, text


def test_an_instruction_beside_a_contract_says_it_replaces_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = tmp_path / "c.yaml"
    contract.write_text("task: Describe the change.\n")
    built = build_contract("Fix add()", contract, None, None, None, "branch", 1, 3, 2)
    assert built.task == "Fix add()"
    assert "the instruction given replaces the `task:` of" in capsys.readouterr().err
    build_contract("Describe the change.", contract, None, None, None, "branch", 1, 3, 2)
    assert capsys.readouterr().err == ""  # the same task: nothing to say


def test_the_unverified_warning_speaks_of_merge_only_when_merging(tmp_path: Path) -> None:
    def warning(land: str, extra: str = "") -> str:
        contract = tmp_path / f"{land}.yaml"
        contract.write_text(f"task: Fix it.\nvalidators: []\nland: {land}\n{extra}")
        return unverified_warning(build_contract(None, contract, *[None] * 3, land, 1, 3, 2), False)

    for land in ("branch", "pr", "none"):
        assert "merge" not in warning(land), land
    assert "the merge will leave the change on a branch" in warning("merge")
    assert "lets the merge land it" in warning("merge", "land_unverified: true\n")


# -- waits and the convergence ledger -------------------------------------------------------


def test_a_wait_never_reads_in_0s_and_one_that_is_over_says_so() -> None:
    waiting = task().model_copy(update={"not_before": NOW + timedelta(milliseconds=300)})
    assert span(NOW + timedelta(milliseconds=300), NOW) == "1s"
    assert "(in 1s)" in (wait_note(waiting.not_before, NOW) or "")
    over = waits_message(waiting, NOW + timedelta(seconds=1))
    assert "(in " not in over and "the wait is over: it is runnable now" in over


def test_the_ledger_is_said_in_words() -> None:
    document = {
        "task_id": "t1",
        "laps": 6,
        "converged": False,
        "oscillating": True,
        "stage_state": {
            "dispatch": {"attempts": 6, "last_verdict": StageVerdict.UNVISITED.value},
            "recover": {"attempts": 4, "last_verdict": StageVerdict.LOOP_BACK.value},
            "task": {"attempts": 2, "last_verdict": StageVerdict.ESCALATE.value},
        },
        "foreign_stages": {},
    }
    text = ledger_text(document, TaskUsage.of([]))
    assert text.splitlines()[:4] == [
        "task t1: 6 judged attempt(s) in all; its newest attempt repeats the failures of an "
        "attempt just before it (stuck, or going in circles)",
        "  dispatch  6 coder dispatch(es)",
        "  recover   4 recovery wave(s)     last verdict: loop back (the last attempt was blocked)",
        "  task      2 run(s) spent         last verdict: escalate (held for a human)",
    ]
    unexplained(text)


# -- the rule, over what real runs print ----------------------------------------------------

# Internal names no line may carry: settle rows (those that are not also a status the README
# explains), the ledger's verdicts, Python values, a word said twice, a status "change" to
# itself, an expired wait's "in 0s".
STATUS_WORDS = {s.value for s in RunStatus} | {s.value for s in TaskStatus}
INTERNAL = sorted(
    ({r.value for r in SettleRow} - STATUS_WORDS) | {"loop_back", "unvisited", "lap(s)"}
)
FORBIDDEN = [
    (re.compile(r"\brow\b"), "a settle row"),
    (re.compile("|".join(re.escape(w) for w in INTERNAL)), "an internal name"),
    (re.compile(r"\b(True|False|None)\b"), "a Python value"),
    (re.compile(r"<\w+\.\w+: "), "an enum's repr"),
    (re.compile(r"\b([A-Za-z]+) \1\b", re.IGNORECASE), "a word said twice"),
    (re.compile(r"\b(\w+) -> \1\b"), "a status change to itself"),
    (re.compile(r"\(in 0s\)"), "a wait of 0s"),
]
# A snake_case word is a contract key or a field: the README must name it.
SNAKE = re.compile(r"(?<![\w/.-])[a-z]+(?:_[a-z0-9]+)+(?![\w/.-])")


def unexplained(text: str) -> None:
    for line in text.splitlines():
        if line.lstrip().startswith("│"):
            continue  # a validator's own output, quoted
        for pattern, what in FORBIDDEN:
            found = pattern.search(line)
            assert found is None, f"{what} ({found.group()!r}) in: {line}"
        for word in SNAKE.findall(line):
            assert word in README, f"{word!r} is not a word of the README, in: {line}"


def said(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    made = make_repo(tmp_path)
    monkeypatch.chdir(made.root)
    for name in ("ASSAY_PROGRESS", "ASSAY_HOME", "ASSAY_DATABASE_URL", "ASSAY_TEMPORAL"):
        monkeypatch.delenv(name, raising=False)
    return made


def test_what_representative_runs_print_is_in_the_readme_words(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    fix, wrong = repo.put("fixed.py", "src/slug.py"), repo.put("wrong.py", "src/slug.py")
    coder = ["--coder", "command", "--sandbox", "none"]
    texts: list[str] = []

    def run(*argv: str) -> tuple[int, str]:
        code, text = said(list(argv), capsys)
        texts.append(text)
        return code, text

    code, text = run("run", "Fix it", *coder, "--coder-command", wrong, "--validator", CHECK_TESTS)
    assert code == 1 and "✗ v1: `" in text and "exited 1" in text  # what failed, off a tty
    code, text = run("run", "Fix it", *coder, "--coder-command", fix, "--land", "merge")
    assert code == 0 and "the merge will leave the change on a branch" in text
    assert "to merge, give a validator that can block (--validator, or the contract's" in text
    code, text = run(
        "run",
        "Fix it",
        *coder,
        "--coder-command",
        fix,
        "--validator",
        CHECK_TESTS,
        "--land",
        "merge",
    )
    assert code == 0 and "merged into main as one commit" in text
    code, text = run("run", "Fix it", *coder, "--coder-command", "mkdir -p .github && touch "
                     ".github/x.yml", "--validator", "true")  # fmt: skip
    assert code == 3 and "held for a human" in text and "✗ scope:" in text
    # The checkout gets dirty while the run goes on (the preflight refuses one dirty before).
    note = f"echo note > notes.txt && echo '# dirty' > {repo.root / 'tests' / 'test_slug.py'}"
    code, text = run(
        "run", "Note it", *coder, "--coder-command", note, "--validator", "true", "--land", "merge"
    )
    assert code == 0 and "uncommitted changes to tests/test_slug.py" in text
    assert "the change is left on branch assay/" in text
    git(repo.root, "checkout", "-q", "--", "tests")
    code, text = run("run", "--contract", str(replay_contract(repo, "wrong")), "--land", "none")
    assert code == 2 and "set `land:` in the file" in text
    code, listed = run("task", "list")
    ids = [line.split()[0] for line in listed.splitlines()[1:]]
    assert len(ids) == 5
    for task_id in ids:
        run("task", "show", task_id)
        run("ledger", "show", task_id)
    code, text = run("task", "cancel", ids[2])  # the merged one: done
    assert code == 2 and "cannot cancel task" in text and "it is done" in text
    run("task", "hold", ids[0])
    code, text = run("task", "hold", ids[0])
    assert code == 2 and "it is held already" in text
    for text in texts:
        unexplained(text)


def test_serve_says_the_attempts_of_the_budget_as_run_does(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = repo.put("wrong.py", "src/slug.py")
    queued = ["--coder", "command", "--sandbox", "none", "--coder-command", wrong]
    said(
        ["task", "add", "Fix it", *queued, "--validator", CHECK_TESTS, "--max-attempts", "2"],
        capsys,
    )
    code, text = said(["serve", "--once", "--no-web", "--poll", "0.1"], capsys)
    assert code == 0, text
    assert "; the task is failed, runnable again (attempts: 1 of 2 used)" in text
    assert "; the task is held for a human (attempts: 2 of 2 used)" in text
    unexplained(text)
