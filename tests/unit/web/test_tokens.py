"""The dashboard's token store: where it lives, what it keeps (hashes, 0600), how it writes
(whole, under a lock), and what it refuses."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from assay.web import tokens
from assay.web.auth import Credentials, Sessions
from assay.web.tokens import TokenStore


def test_the_folder_is_the_override_else_xdg_else_dot_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(tokens.CONFIG_DIR_ENV, raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert tokens.config_dir() == tmp_path / "home" / ".config" / "assay"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/is/ignored")
    assert tokens.config_dir() == tmp_path / "home" / ".config" / "assay"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert tokens.config_dir() == tmp_path / "xdg" / "assay"
    monkeypatch.setenv(tokens.CONFIG_DIR_ENV, str(tmp_path / "override"))
    assert tokens.config_dir() == tmp_path / "override"


def test_a_token_is_kept_as_its_hash_in_a_0600_file(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "assay")
    record, secret = store.add("alice")
    assert len(secret.encode()) >= 32
    text = store.path.read_text()
    assert secret not in text
    assert json.loads(text)["tokens"] == [
        {"name": "alice", "sha256": hashlib.sha256(secret.encode()).hexdigest(),
         "created": record.created}
    ]  # fmt: skip
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.folder.stat().st_mode) == 0o700
    assert store.match(secret) == record and store.match(secret + "x") is None
    assert record.document() == {"name": "alice", "created": record.created}  # no hash shown


def test_add_list_and_remove(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    _, alice = store.add("alice")
    _, bob = store.add("bob.ci_2-x")
    assert [r.name for r in store.records()] == ["alice", "bob.ci_2-x"]
    with pytest.raises(tokens.NameTaken, match="exists"):
        store.add("alice")
    store.remove("alice")
    assert [r.name for r in store.records()] == ["bob.ci_2-x"]
    assert store.match(alice) is None and store.match(bob) is not None
    with pytest.raises(tokens.NoSuchToken, match="no token named 'alice'"):
        store.remove("alice")


@pytest.mark.parametrize("name", ["", "a b", "-leading", ".hidden", "x" * 41, "é", "a/b", "a\n"])
def test_names_are_a_short_slug(tmp_path: Path, name: str) -> None:
    with pytest.raises(tokens.BadName, match="not valid"):
        TokenStore(tmp_path).add(name)
    assert not (tmp_path / tokens.TOKENS_FILE).exists()


def test_a_given_secret_shorter_than_16_bytes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(tokens.TokenError, match="at least 16 bytes"):
        TokenStore(tmp_path).add("short", "x" * 15)
    with pytest.raises(tokens.TokenError, match="at least 16 bytes"):
        Credentials.of(token="k")
    assert Credentials.of(token="k" * 16).match("k" * 16) is not None


def test_writes_are_whole_files_renamed_into_place(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    store.add("alice")
    before = store.path.stat().st_ino
    store.add("bob")
    assert store.path.stat().st_ino != before  # a new file replaced it, never edited in place
    assert {p.name for p in tmp_path.iterdir()} == {tokens.LOCK_FILE, tokens.TOKENS_FILE}


def test_concurrent_adds_all_land(tmp_path: Path) -> None:
    names = [f"op{n}" for n in range(16)]
    threads = [threading.Thread(target=TokenStore(tmp_path).add, args=(n,)) for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.name for r in TokenStore(tmp_path).records()) == sorted(names)


def test_the_first_token_is_made_once(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    secret = store.add_first()
    assert secret is not None and store.match(secret).name == tokens.FIRST_TOKEN_NAME  # type: ignore[union-attr]
    assert store.add_first() is None and len(store.records()) == 1


def test_a_file_others_could_write_is_refused(tmp_path: Path) -> None:
    store = TokenStore(tmp_path / "assay")
    store.add("alice")
    os.chmod(store.path, 0o622)
    with pytest.raises(tokens.UnsafeStore, match="writable by others"):
        TokenStore(store.folder).records()
    os.chmod(store.path, 0o600)
    os.chmod(store.folder, 0o777)
    with pytest.raises(tokens.UnsafeStore, match="writable by others"):
        store.add("bob")


def test_a_file_assay_did_not_write_is_a_clear_refusal(tmp_path: Path) -> None:
    (tmp_path / tokens.TOKENS_FILE).write_text("{not json")
    os.chmod(tmp_path / tokens.TOKENS_FILE, 0o600)
    with pytest.raises(tokens.UnsafeStore, match="not a token file"):
        TokenStore(tmp_path).records()


def test_a_token_added_elsewhere_is_seen_without_a_restart(tmp_path: Path) -> None:
    serving = TokenStore(tmp_path)
    assert serving.records() == []
    _, secret = TokenStore(tmp_path).add("grace")  # `assay token add` in another process
    assert serving.match(secret) is not None


def test_sessions_end_when_idle_or_too_many() -> None:
    sessions = Sessions(limit=2)
    credential = Credentials.of(token="k" * 16).match("k" * 16)
    assert credential is not None
    first = sessions.open(credential)
    assert sessions.find(first) == credential and sessions.find("forged") is None
    second, third = sessions.open(credential), sessions.open(credential)
    assert sessions.find(first) is None  # the oldest went first
    assert sessions.find(second) == credential and sessions.find(third) == credential
    sessions.close(second)
    assert sessions.find(second) is None and len(sessions) == 1
