"""The dashboard's named tokens, kept in the operator's config folder (never the repository).

``web-tokens.json`` holds, per token, its name, the sha256 of its secret and when it was made:
the secret itself is shown once, when it is made, and never stored. The folder is
``$ASSAY_CONFIG_DIR``, else ``$XDG_CONFIG_HOME/assay``, else ``~/.config/assay``; it is
created 0700 and the file is written 0600, whole (a temporary file renamed over it) and under
a lock (``web-tokens.lock``), so two ``assay token add`` at once both land. A file or folder
another user could write is refused: whoever can add a line there can let themselves in.

Standard library only: ``assay token`` must start fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from assay.adapters.store.halt_files import write_json_atomic

CONFIG_DIR_ENV = "ASSAY_CONFIG_DIR"
TOKENS_FILE = "web-tokens.json"
LOCK_FILE = "web-tokens.lock"
# A name is what the ledger records as who acted: short, plain, one word.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
NAME_RULE = "1-40 letters, digits, '.', '_' or '-', starting with a letter or digit"
MIN_SECRET_BYTES = 16
FIRST_TOKEN_NAME = "operator"
FORMAT_VERSION = 1


class TokenError(Exception):
    """A refusal of the token store (a user message)."""


class BadName(TokenError):
    pass


class NameTaken(TokenError):
    pass


class NoSuchToken(TokenError):
    pass


class UnsafeStore(TokenError):
    """The file cannot be read, is not ours, or others could write it."""


@dataclass(frozen=True)
class TokenRecord:
    name: str
    sha256: str
    created: str  # ISO 8601, UTC

    def document(self) -> dict[str, str]:
        """What ``assay token list --json`` shows: never the hash, never the secret."""
        return {"name": self.name, "created": self.created}


def config_dir() -> Path:
    """Where the operator's assay settings live (see the module's docstring)."""
    override = os.environ.get(CONFIG_DIR_ENV, "").strip()
    if override:
        return Path(override).expanduser().absolute()
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "assay"


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise BadName(f"token name {name!r} is not valid: {NAME_RULE}")
    return name


def check_secret(secret: str, what: str = "a token") -> str:
    """Refuse a secret too short to stand for an operator (fewer than 16 bytes)."""
    if len(secret.encode("utf-8")) < MIN_SECRET_BYTES:
        raise TokenError(f"{what} must be at least {MIN_SECRET_BYTES} bytes long")
    return secret


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class TokenStore:
    """The token file in ``folder`` (default: :func:`config_dir`)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else config_dir()
        self.path = self.folder / TOKENS_FILE
        self._seen: tuple[int, ...] | None = None  # the file's stat when last read
        self._cached: list[TokenRecord] = []

    def records(self) -> list[TokenRecord]:
        """Every token, oldest first; re-read only when the file changed (a token added or
        removed by ``assay token`` counts at the next request, without a restart)."""
        try:
            info = self.path.stat()
            _check_safe(self.folder.stat(), self.folder)
        except FileNotFoundError:
            self._seen, self._cached = None, []
            return []
        except OSError as exc:
            raise UnsafeStore(f"cannot read {self.path}: {exc.strerror}") from exc
        # The change time moves with a chmod or chown too: then the file is checked again.
        signature = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if signature != self._seen:
            self._cached = self._read()
            self._seen = signature
        return list(self._cached)

    def match(self, secret: str) -> TokenRecord | None:
        """The token whose secret this is, comparing every digest in constant time."""
        given = digest(secret)
        found = None
        for record in self.records():
            if hmac.compare_digest(given, record.sha256):
                found = record
        return found

    def add(self, name: str, secret: str | None = None) -> tuple[TokenRecord, str]:
        """A new token ``name`` (its secret generated unless given); returns it and the secret."""
        check_name(name)
        secret = check_secret(secret) if secret is not None else new_secret()
        with self._locked():
            records = self._read()
            if any(r.name == name for r in records):
                raise NameTaken(f"a token named {name!r} exists (remove it first)")
            record = TokenRecord(name, digest(secret), _now())
            self._write([*records, record])
        return record, secret

    def add_first(self, name: str = FIRST_TOKEN_NAME) -> str | None:
        """A token named ``name`` when the store has none (its secret), else None."""
        with self._locked():
            if self._read():
                return None
            secret = new_secret()
            self._write([TokenRecord(name, digest(secret), _now())])
        return secret

    def remove(self, name: str) -> TokenRecord:
        check_name(name)
        with self._locked():
            records = self._read()
            gone = [r for r in records if r.name == name]
            if not gone:
                raise NoSuchToken(f"no token named {name!r} (see `assay token list`)")
            self._write([r for r in records if r.name != name])
        return gone[0]

    def _read(self) -> list[TokenRecord]:
        try:
            with self.path.open("rb") as handle:
                _check_safe(os.fstat(handle.fileno()), self.path)
                raw = handle.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise UnsafeStore(f"cannot read {self.path}: {exc.strerror}") from exc
        try:
            document = json.loads(raw)
            return [
                TokenRecord(str(t["name"]), str(t["sha256"]), str(t["created"]))
                for t in document["tokens"]
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise UnsafeStore(f"{self.path} is not a token file assay wrote ({exc})") from exc

    def _write(self, records: list[TokenRecord]) -> None:
        document = {
            "version": FORMAT_VERSION,
            "tokens": [{"name": r.name, "sha256": r.sha256, "created": r.created} for r in records],
        }
        write_json_atomic(self.path, document, mode=0o600)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            _check_safe(self.folder.stat(), self.folder)
            lock = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise UnsafeStore(f"cannot use {self.folder}: {exc.strerror}") from exc
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)  # closing releases the lock


def _check_safe(info: os.stat_result, path: Path) -> None:
    if info.st_uid != os.getuid():
        raise UnsafeStore(f"{path} belongs to another user; refusing to trust it")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeStore(f"{path} is writable by others; chmod go-w {path}")


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()
