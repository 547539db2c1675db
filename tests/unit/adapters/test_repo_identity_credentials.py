"""No credential of an origin's URL reaches the ledger through a task's repository id: a
remote helper's ``<transport>::`` prefix and a URL pasted as ``assay.repository`` included."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.fixed_run import fixed_contract, home_ledger
from support.repo import git, make_repo

from assay.adapters.repo_identity import repository_id
from assay.cli.new_task import queue_task

SECRET = "hunter2"


@pytest.mark.parametrize(
    "url",
    [
        f"https::https://bob:{SECRET}@example.com/org/repo.git",
        f"gcrypt::https://bob:{SECRET}@example.com/org/repo",
    ],
)
def test_a_transport_prefixed_url_leaves_no_credential_in_the_ledger(
    tmp_path: Path, url: str
) -> None:
    made = make_repo(tmp_path)
    git(made.root, "remote", "add", "origin", url)
    ledger = home_ledger(made.root)
    task = queue_task(
        ledger, fixed_contract(made, "true", land="merge"), datetime.now(UTC), repo=made.root
    )
    stored = ledger.get_task(task.id).repository
    assert stored is not None and SECRET not in stored, f"tasks.repository = {stored!r}"


def test_an_assay_repository_override_that_is_a_url_is_normalized(tmp_path: Path) -> None:
    made = make_repo(tmp_path)
    git(made.root, "config", "assay.repository", f"https://ci:{SECRET}@Example.com/org/repo.git")
    ident = repository_id(made.root)
    assert ident is not None and SECRET not in ident, f"repository id = {ident!r}"
