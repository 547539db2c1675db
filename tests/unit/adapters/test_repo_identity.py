"""A repository's id: the override, origin's URL normalized (never its credentials), the root
commit; and the normalization's properties over generated URLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.repo import git as sh

from assay.adapters.repo_identity import (
    current_target_branch,
    local_path,
    normalize_remote,
    repository_id,
)

# Hosts and paths use lowercase letters; credentials use only what neither can contain, so a
# credential found in an id can only be the credential itself.
_NAME = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=8)
_SECRET = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ!$*~", min_size=1, max_size=12)
_HOSTS = st.lists(_NAME, min_size=1, max_size=3).map(".".join)
_PATHS = st.lists(_NAME, min_size=1, max_size=4).map("/".join)
_SUFFIX = st.sampled_from(["", ".git", "/", ".git/"])


@st.composite
def remote_urls(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    """(a URL, the id it must come to, the credentials it carries)."""
    host, path, suffix = draw(_HOSTS), draw(_PATHS), draw(_SUFFIX)
    user = draw(st.none() | _SECRET)
    password = draw(st.none() | _SECRET) if user is not None else None
    creds = "" if user is None else user + (f":{password}" if password else "") + "@"
    form = draw(st.sampled_from(["https", "http", "ssh", "git", "git+ssh", "scp"]))
    shown_host = draw(st.sampled_from([host, host.upper()]))
    if form == "scp":
        url = f"{creds}{shown_host}:{path}{suffix}"
    else:
        port = draw(st.none() | st.integers(1, 65535))
        url = f"{form}://{creds}{shown_host}{'' if port is None else f':{port}'}/{path}{suffix}"
    secrets = [s for s in (user, password) if s]
    return url, f"{host}/{path}", secrets


@given(remote_urls())
def test_a_remote_comes_to_host_and_path_without_its_credentials(
    case: tuple[str, str, list[str]],
) -> None:
    url, expected, secrets = case
    ident = normalize_remote(url)
    assert ident == expected
    for secret in secrets:
        assert secret not in ident
    assert "@" not in ident


@given(st.text(max_size=60) | remote_urls().map(lambda case: case[0]))
def test_normalizing_is_idempotent(url: str) -> None:
    once = normalize_remote(url)
    assert normalize_remote(once) == once


@given(st.text("abcdefghijklmnopqrstuvwxyz:/@.-", max_size=40), _SECRET, _SECRET)
def test_no_credential_survives_whatever_follows_it(rest: str, user: str, password: str) -> None:
    for url in (f"https://{user}:{password}@{rest}", f"{user}:{password}@{rest}"):
        ident = normalize_remote(url)
        assert user not in ident
        assert password not in ident


@given(_NAME, _NAME, _SUFFIX, _SUFFIX)
def test_ssh_and_https_forms_of_one_github_repository_agree(
    owner: str, name: str, one: str, other: str
) -> None:
    forms = {
        normalize_remote(f"git@github.com:{owner}/{name}{one}"),
        normalize_remote(f"ssh://git@github.com/{owner}/{name}{other}"),
        normalize_remote(f"https://github.com/{owner}/{name}{one}"),
        normalize_remote(f"https://token:x-oauth@GitHub.com:443/{owner}/{name}{other}"),
    }
    assert forms == {f"github.com/{owner}/{name}"}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://u:p@example.com/a/b.git?x=1#frag", "example.com/a/b"),
        ("git@[::1]:team/repo.git", "[::1]/team/repo"),
        ("ssh://[::1]:2222/team/repo", "[::1]/team/repo"),
        ("github.com/o/r", "github.com/o/r"),
    ],
)
def test_examples(url: str, expected: str) -> None:
    assert normalize_remote(url) == expected


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("/srv/git/project.git", "/srv/git/project.git"),
        ("../project", "../project"),
        ("file:///srv/git/project", "/srv/git/project"),
        ("file://localhost/srv/git/project", "/srv/git/project"),
        ("https://example.com/a", None),
        ("git@example.com:a", None),
    ],
)
def test_local_paths_are_told_from_network_remotes(url: str, path: str | None) -> None:
    assert local_path(url) == path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    sh(root, "init", "-q", "-b", "main")
    return root


def commit(repo: Path) -> None:
    (repo / "f.txt").write_text("x\n", encoding="utf-8")
    sh(repo, "add", "f.txt")
    sh(repo, "commit", "-q", "-m", "one")


@pytest.mark.usefixtures("isolated_git")
def test_a_repository_with_no_commit_and_no_origin_has_no_id(repo: Path) -> None:
    assert repository_id(repo) is None


@pytest.mark.usefixtures("isolated_git")
def test_without_origin_its_own_path_names_it(repo: Path) -> None:
    commit(repo)
    root = sh(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    assert repository_id(repo) == f"{repo.resolve()}#{root[:12]}"
    assert current_target_branch(repo) == "main"
    # A clone made from it names it as its origin: both agree without any setting.
    clone = repo.parent / "clone"
    sh(repo.parent, "clone", "-q", str(repo), str(clone))
    assert repository_id(clone) == repository_id(repo)


@pytest.mark.usefixtures("isolated_git")
def test_origin_names_it_credentials_dropped_and_the_override_wins(repo: Path) -> None:
    commit(repo)
    sh(repo, "remote", "add", "origin", "https://bot:s3cr3t@Example.COM/team/project.git/")
    assert repository_id(repo) == "example.com/team/project"
    sh(repo, "config", "assay.repository", "team-project")
    assert repository_id(repo) == "team-project"


@pytest.mark.usefixtures("isolated_git")
def test_a_local_origin_is_its_resolved_absolute_path(repo: Path, tmp_path: Path) -> None:
    commit(repo)
    (tmp_path / "origin.git").mkdir()
    sh(repo, "remote", "add", "origin", "../origin.git")
    root = sh(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    at = f"{(tmp_path / 'origin.git').resolve()}#{root[:12]}"
    assert repository_id(repo) == at
    sh(repo, "remote", "set-url", "origin", (tmp_path / "origin.git").as_uri())
    assert repository_id(repo) == at
