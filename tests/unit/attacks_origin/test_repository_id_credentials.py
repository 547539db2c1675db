"""Attack (rule 3): credentials of the origin's URL reaching the ledger through the task's
repository id.

``normalize_remote`` strips ``user:password@`` from a ``scheme://`` URL and from git's
scp-like form, but git also takes ``<transport>::<address>`` (``https::https://…``,
``gcrypt::https://…``, any remote helper's): ``_SCHEME`` does not match it (``::``), so
``_scp_split`` reads it as scp-like with the host ``https`` and keeps the whole address,
password included, as the path. ``queue_task`` records that id in ``tasks.repository``, where
every machine sharing the ledger (and ``task show``, and a worker's refusal message) reads it.

The second test: ``git config assay.repository`` is recorded as given; an operator who pastes
their clone URL there (the README's use for it: "clones that reach one origin by URLs that
differ") puts its token in the ledger. The id is the operator's word, but it is still "a
remote URL's credential" reaching the ledger; normalizing it (``normalize_remote`` is
idempotent on an id it made) would keep both promises.
"""

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
