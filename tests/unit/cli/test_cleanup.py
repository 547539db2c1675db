"""What a closed run leaves behind, through `assay run` (in-process): a blocked or failed run
keeps its candidate as one branch and drops its working copies (unless ``--keep-worktrees``), a
merged run leaves nothing, and `.assay` stays small after many blocked runs. A run killed
after its close is tests/e2e/cli/test_cleanup_e2e.py."""

from __future__ import annotations

import gc
import json
import subprocess
from pathlib import Path

from support.repo import CHECK_TESTS, Repo, git, make_repo


def _contract(repo: Repo, fixture: str, *, seats: int = 1, land: str = "merge") -> Path:
    return repo.contract(
        f"{fixture}-{seats}-{land}.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: {json.dumps(repo.put(f"{fixture}.py", "src/slug.py"))}}}
seats: {seats}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_recovery: 0}}
land: {land}
""",
    )


def _left(repo: Repo) -> list[str]:
    """Every path under ``.assay/seats`` and ``.assay/worktrees`` (none when they are gone)."""
    home = repo.root / ".assay"
    return sorted(
        str(p.relative_to(home))
        for folder in (home / "seats", home / "worktrees")
        if folder.exists()
        for p in [folder, *folder.rglob("*")]
    )


def _relay_folders(run_id: str) -> list[Path]:
    return list(Path("/tmp").glob(f"assay-halt-{run_id}-*"))


def test_a_blocked_run_keeps_its_candidate_as_a_branch_and_drops_its_working_copies(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    done = repo.main("run", "--contract", str(_contract(repo, "wrong", seats=2)), "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "blocked"
    run = payload["run_id"]
    # Nothing of the seats is left: no working copy, no seat home, no judges' home, no folder.
    assert _left(repo) == []
    assert _relay_folders(run) == []
    # Each candidate stays as one commit on the base, for a human to look at.
    branches = git(repo.root, "branch", "--list", "--format=%(refname:short)", "assay/*")
    assert branches.splitlines() == [f"assay/{run}/seat-1", f"assay/{run}/seat-2"]
    for branch in branches.splitlines():
        assert git(repo.root, "rev-list", "--count", f"main..{branch}") == "1"
        shown = git(repo.root, "show", f"{branch}:src/slug.py", strip=False)
        assert shown == (repo.fixes / "wrong.py").read_text()
    # The account stays: the payload, the ledger's run, its halt state.
    assert (repo.root / ".assay" / "runs" / run / "payload.json").is_file()
    assert (repo.root / ".assay" / "halt-state" / f"{run}.json").is_file()


def test_a_failed_run_keeps_its_candidate_as_a_branch_and_drops_its_working_copy(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    contract = repo.contract(
        "broken.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: {json.dumps(repo.put("fixed.py", "src/slug.py"))}}}
validators: [{{id: tests, kind: command, run: "sleep 5", timeout_seconds: 1}}]
budgets: {{max_recovery: 0}}
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    payload = json.loads(done.stdout)
    assert payload["status"] == "failed", payload
    assert payload["halt_type"] == "validator_error", payload
    assert _left(repo) == []
    branch = f"assay/{payload['run_id']}/seat-1"
    assert git(repo.root, "branch", "--list", "--format=%(refname:short)", "assay/*") == branch


def test_a_run_blocked_for_a_secret_leaves_neither_its_seat_nor_a_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo.fixes / "leak.py").write_text('AWS_ACCESS_KEY_ID = "AKIA' + 'Z7QX4MB2LPWV9KDT"\n')
    command = f"{repo.put('fixed.py', 'src/slug.py')} && {repo.put('leak.py', 'src/config.py')}"
    contract = repo.contract(
        "leak.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: {json.dumps(command)}}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_recovery: 0}}
""",
    )
    done = repo.main("run", "--contract", str(contract), "--json")
    payload = json.loads(done.stdout)
    assert payload["status"] == "blocked", payload
    assert "halt-secret-exposure" in json.dumps(payload["halts"])
    # The candidate never entered the repository, and its seat (the one copy of it) is gone.
    assert git(repo.root, "branch", "--list", "assay/*") == ""
    assert _left(repo) == []


def test_keep_worktrees_keeps_a_blocked_runs_seats_and_its_branch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    contract = str(_contract(repo, "wrong"))
    done = repo.main("run", "--contract", contract, "--json", "--keep-worktrees")
    assert done.returncode == 1, done.stderr
    run = json.loads(done.stdout)["run_id"]
    assert _left(repo) == [
        "seats",
        f"seats/{run}",
        *[f"seats/{run}/{p}" for p in _seat_listing(repo, run)],
    ]
    assert (repo.root / ".assay" / "seats" / run / "seat-1" / ".git").is_dir()
    assert git(repo.root, "branch", "--list", "assay/*").strip() == f"assay/{run}/seat-1"
    # A later recovery sweep leaves what the operator asked to keep.
    assert repo.main("run", "--resume").returncode == 0
    assert (repo.root / ".assay" / "seats" / run / "seat-1" / ".git").is_dir()


def _seat_listing(repo: Repo, run: str) -> list[str]:
    root = repo.root / ".assay" / "seats" / run
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_merged_run_leaves_no_seat_branch_or_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    done = repo.main("run", "--contract", str(_contract(repo, "fixed", seats=2)), "--json")
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["run_id"]
    assert _left(repo) == []
    assert git(repo.root, "branch", "--list", "assay/*") == ""
    assert _relay_folders(run) == []


def test_assay_stays_small_after_many_blocked_runs(tmp_path: Path) -> None:
    """The suite's small version of the bench's figure (20 blocked runs on 5,000 files < 5 MB):
    200 files, 5 blocked runs, and `.assay` grows by a few kilobytes per run, not a working
    copy per run."""
    repo = make_repo(tmp_path)
    for n in range(200):
        path = repo.root / "pkg" / f"m{n // 20}" / f"f{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE_{n} = {n}\n" * 80)
    git(repo.root, "add", ".")
    git(repo.root, "commit", "-q", "-m", "200 files")
    contract = str(_contract(repo, "wrong"))
    sizes = []
    for _ in range(5):
        done = repo.main("run", "--contract", contract)
        assert done.returncode in (1, 3), done.stderr
        # The command's ledger is closed as its process would close it at exit (its connections
        # wait for the collector in-process): SQLite then folds its write-ahead log into the file.
        gc.collect()
        sizes.append(_size(repo.root / ".assay"))
    working_copy = _size(repo.root) - _size(repo.root / ".assay") - _size(repo.root / ".git")
    assert working_copy > 250_000  # one working copy of this repository: ~300 kB
    assert _left(repo) == []
    growth = (sizes[-1] - sizes[0]) / 4
    assert growth < 60_000, sizes  # a run's payload, logs and ledger rows only
    assert len(git(repo.root, "branch", "--list", "assay/*").splitlines()) == 5


def _size(path: Path) -> int:
    done = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])
