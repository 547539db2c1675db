"""Each seat a repository of its own, through the real `assay run`: a hostile coder that
rewrites its repository's config and hooks leaves the user's ``.git`` byte-for-byte unchanged,
a seat whose ``.git`` was replaced is never followed, and a candidate blocked for a secret
never enters the user's repository.

The contracts say ``sandbox: none`` on purpose: what is tested is the seat alone (its own
``.git``, reset by assay after the coder), not the sandbox around it.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from support.repo import CHECK_TESTS, FIXED, Repo, git, make_repo

# Run by the coder in its seat: every way of reaching "the" repository's config and hooks a
# coder has from inside it, then the fix. The markers prove no hook nor fsmonitor of the
# coder's ran in assay's own git commands afterwards.
HOSTILE = """set -e
git config user.name EVIL
git config user.email evil@example.org
git config core.hooksPath {marks}/hooks
git config core.fsmonitor "touch {marks}/fsmonitor-ran; false"
git config alias.status '!touch {marks}/alias-ran'
hooks=$(git rev-parse --git-common-dir)/hooks
mkdir -p "$hooks" {marks}/hooks
for hook in post-commit pre-commit post-checkout reference-transaction; do
  printf '#!/bin/sh\\ntouch {marks}/$hook-ran\\n' > "$hooks/$hook"
  cp "$hooks/$hook" {marks}/hooks/$hook
  chmod +x "$hooks/$hook" {marks}/hooks/$hook
done
cp {fixes}/fixed.py src/slug.py
"""


def _snapshot(git_dir: Path) -> dict[str, bytes]:
    """The user's ``.git/config`` and every file under ``.git/hooks``, byte for byte."""
    files = {"config": (git_dir / "config").read_bytes()}
    for path in sorted((git_dir / "hooks").rglob("*")):
        if path.is_file():
            files[str(path.relative_to(git_dir))] = path.read_bytes()
    return files


def _contract(repo: Repo, name: str, command: str, *, land: str = "merge", extra: str = "") -> Path:
    return repo.contract(
        f"{name}.yaml",
        f"""task: Make slugify keep digits.
coder: {{kind: command, command: {json.dumps(command)}}}
validators: [{{id: tests, kind: command, run: "{CHECK_TESTS}"}}]
budgets: {{max_recovery: 0}}
sandbox: none
land: {land}
{extra}""",
    )


def test_a_coder_rewriting_its_git_config_and_hooks_leaves_the_users_unchanged(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    script = repo.fixes / "hostile.sh"
    script.write_text(HOSTILE.format(marks=marks, fixes=repo.fixes))
    before = _snapshot(repo.root / ".git")
    done = repo.main("run", "--contract", str(_contract(repo, "hostile", f"sh {script}")), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "merged"
    assert (repo.root / "src" / "slug.py").read_text() == FIXED
    assert _snapshot(repo.root / ".git") == before
    assert git(repo.root, "config", "--get", "user.name", strip=True) != "EVIL"
    # Nothing of the coder's ran in assay's git (status, add, commit, fetch) afterwards.
    assert sorted(p.name for p in marks.iterdir()) == ["hooks"]
    # The landed commit is the user's own identity, not the coder's.
    assert "EVIL" not in git(repo.root, "log", "-1", "--format=%an %cn", "main")
    assert not (repo.root / ".assay" / "seats" / payload["run_id"]).exists()


@pytest.mark.parametrize(
    "replace",
    [
        "rm -rf .git && printf 'gitdir: {root}/.git\\n' > .git",
        "rm -rf .git && ln -s {root}/.git .git",
        "rm -rf .git/refs && ln -s {root}/.git/refs .git/refs",
    ],
    ids=["gitdir-file", "git-symlink", "refs-symlink"],
)
def test_a_seat_whose_git_was_replaced_is_never_followed(tmp_path: Path, replace: str) -> None:
    """The candidate is the seat's work tree, captured with a git directory of the collector's
    own: a ``.git`` replaced by a link or a ``gitdir:`` file to the user's repository is never
    read, so the fix lands and the user's ``.git`` holds nothing of the coder's."""
    repo = make_repo(tmp_path)
    before = _snapshot(repo.root / ".git")
    command = f"cp {repo.fixes}/fixed.py src/slug.py && " + replace.format(root=repo.root)
    done = repo.main("run", "--contract", str(_contract(repo, "swap", command)), "--json")
    payload = json.loads(done.stdout)
    assert payload["status"] == "merged", payload
    assert payload["candidates"][0]["files_changed"] == ["src/slug.py"]
    assert git(repo.root, "show", "main:src/slug.py", strip=False) == FIXED
    assert git(repo.root, "status", "--porcelain") == ""
    assert git(repo.root, "for-each-ref", "refs/heads/assay/") == ""
    assert _snapshot(repo.root / ".git") == before


def test_a_validator_replacing_its_checkouts_git_touches_nothing_of_the_users(
    tmp_path: Path,
) -> None:
    """A validator runs the coder's code in a fresh checkout of the candidate; replacing that
    checkout's ``.git`` with a ``gitdir:`` file naming the user's repository leads nowhere: the
    host never runs git there again."""
    repo = make_repo(tmp_path)
    before = _snapshot(repo.root / ".git")
    conftest = repo.fixes / "conftest.py"
    conftest.write_text(
        "import shutil, pathlib\n"
        "git = pathlib.Path(__file__).resolve().parent.parent / '.git'\n"
        "shutil.rmtree(git)\n"
        f"git.write_text('gitdir: {repo.root}/.git\\n')\n"
    )
    command = f"cp {repo.fixes}/fixed.py src/slug.py && cp {conftest} tests/conftest.py"
    done = repo.main("run", "--contract", str(_contract(repo, "conftest", command)), "--json")
    payload = json.loads(done.stdout)
    assert payload["status"] == "merged", payload
    assert git(repo.root, "show", "main:src/slug.py", strip=False) == FIXED
    assert git(repo.root, "status", "--porcelain") == ""
    assert _snapshot(repo.root / ".git") == before


def test_a_commondir_the_coder_wrote_is_removed_before_assay_runs_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    before = _snapshot(repo.root / ".git")
    command = f"cp {repo.fixes}/fixed.py src/slug.py && echo {repo.root}/.git > .git/commondir"
    base = git(repo.root, "rev-parse", "main")
    contract = _contract(repo, "common", command, land="branch")
    done = repo.main("run", "--contract", str(contract), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["status"] == "ready"
    assert _snapshot(repo.root / ".git") == before
    # The seat's own checkpoint, on the base, reached the user's repository by the fetch
    # alone (followed, the commondir would have had assay commit a root commit there).
    branch = f"refs/heads/assay/{payload['run_id']}/seat-1"
    assert git(repo.root, "rev-parse", f"{branch}^") == base
    assert git(repo.root, "rev-list", "--count", f"{base}..{branch}") == "1"
    assert git(repo.root, "rev-parse", "main") == base


SECRET = "AKIA" + "Z7QX4MB2LPWV9KDT"


@pytest.mark.parametrize("land", ["merge", "branch"])
def test_a_candidate_blocked_for_a_secret_never_enters_the_users_repository(
    tmp_path: Path, land: str
) -> None:
    repo = make_repo(tmp_path)
    leaked = f'AWS_ACCESS_KEY_ID = "{SECRET}"\n'
    (repo.fixes / "leak.py").write_text(leaked)
    command = f"cp {repo.fixes}/fixed.py src/slug.py && cp {repo.fixes}/leak.py src/config.py"
    contract = str(_contract(repo, "leak", command, land=land))
    done = repo.main("run", "--contract", contract, "--keep-worktrees")
    assert done.returncode != 0, done.stderr
    payload = repo.payloads()[-1]
    assert payload["status"] == "blocked"
    blob = hashlib.sha1(b"blob %d\0%s" % (len(leaked), leaked.encode())).hexdigest()
    assert _has_object(repo.root, blob) is False
    refs = git(repo.root, "for-each-ref", "--format=%(refname)", "refs/")
    assert not [r for r in refs.splitlines() if r.startswith("refs/heads/assay/")]
    # The seat, kept on request, holds the blob (it lives there, and only there).
    seat = repo.root / ".assay" / "seats" / payload["run_id"] / "seat-1"
    assert _has_object(seat, blob) is True


def test_a_blocked_candidate_that_passed_scope_and_secrets_is_kept_as_a_branch(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path)
    command = f"cp {repo.fixes}/wrong.py src/slug.py"
    contract = str(_contract(repo, "wrong", command))
    done = repo.main("run", "--contract", contract, "--keep-worktrees")
    assert done.returncode != 0
    payload = repo.payloads()[-1]
    assert payload["status"] == "blocked"
    branch = f"assay/{payload['run_id']}/seat-1"
    shown = git(repo.root, "show", f"refs/heads/{branch}:src/slug.py", strip=False)
    assert shown == (repo.fixes / "wrong.py").read_text()
    seat = repo.root / ".assay" / "seats" / payload["run_id"]  # kept: --keep-worktrees
    assert sorted(p.name for p in seat.iterdir()) == [
        "seat-1",
        "seat-1.candidates.git",
        "seat-1.home",
        "seat-1.index",
        "seat-1.out",
    ]
    # The seat has no remote and no hooks: nothing in it names the user's repository but the
    # borrowed object store.
    assert git(seat / "seat-1", "remote") == ""
    assert list((seat / "seat-1" / ".git" / "hooks").iterdir()) == []
    alternates = (seat / "seat-1" / ".git" / "objects" / "info" / "alternates").read_text()
    assert alternates.splitlines() == [
        str((repo.root / ".git" / "objects").resolve()),
        str(seat / "seat-1.candidates.git" / "objects"),
    ]


def _has_object(repo: Path, oid: str) -> bool:
    done = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "-e", oid], capture_output=True, check=False
    )
    return done.returncode == 0
