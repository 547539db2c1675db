"""Who a request is: the named credentials a dashboard accepts, and its login sessions.

A credential is a token of the operator's store (:mod:`assay.web.tokens`, by its name) or the
one ``--web-token`` / ``ASSAY_WEB_TOKEN`` of this server (named ``web-token``). Only digests
are held and compared, each in constant time.

A login trades the token for a session: a random id in an HttpOnly, SameSite=Strict cookie,
kept here in memory. So the token itself crosses the wire once and never sits in the
browser's cookie jar; a session ends when its token is removed (checked on every request), after
a day without use or a week in all, or when the server stops (log in again then).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from assay.web.tokens import TokenStore, check_name, check_secret, digest

SESSION_COOKIE = "assay_session"  # the login session's cookie

EXTRA_NAME = "web-token"
SESSION_IDLE_SECONDS = 24 * 3600
SESSION_MAX_SECONDS = 7 * 24 * 3600
MAX_SESSIONS = 1000


@dataclass(frozen=True)
class Credential:
    """Who acts (``name``, what the ledger records) and the digest of the secret they used."""

    name: str
    sha256: str


@dataclass
class Credentials:
    """The store's tokens (when there is a store) and the server's own extra token."""

    store: TokenStore | None = None
    extra: Credential | None = None

    @classmethod
    def of(cls, store: TokenStore | None = None, token: str | None = None) -> Credentials:
        """``token``: the ``--web-token`` (refused, ``TokenError``, below 16 bytes)."""
        extra = None
        if token is not None:
            extra = Credential(check_name(EXTRA_NAME), digest(check_secret(token, "--web-token")))
        return cls(store=store, extra=extra)

    def any(self) -> bool:
        return self.extra is not None or bool(self.store and self.store.records())

    def match(self, secret: str) -> Credential | None:
        if not secret:
            return None
        found = None
        given = digest(secret)
        if self.extra is not None and hmac.compare_digest(given, self.extra.sha256):
            found = self.extra
        record = self.store.match(secret) if self.store is not None else None
        if record is not None and found is None:
            found = Credential(record.name, record.sha256)
        return found

    def valid(self, credential: Credential) -> bool:
        """Whether ``credential`` still stands (its token not removed nor replaced)."""
        if credential == self.extra:
            return True
        if self.store is None:
            return False
        return any(
            r.name == credential.name and hmac.compare_digest(r.sha256, credential.sha256)
            for r in self.store.records()
        )


@dataclass
class _Session:
    credential: Credential
    created: float
    seen: float


@dataclass
class Sessions:
    """Login sessions by the sha256 of their id (a lookup leaks nothing of a live id)."""

    limit: int = MAX_SESSIONS
    _by_key: OrderedDict[str, _Session] = field(default_factory=OrderedDict)

    def open(self, credential: Credential) -> str:
        session_id = secrets.token_urlsafe(32)
        now = time.monotonic()
        self._by_key[_key(session_id)] = _Session(credential, now, now)
        while len(self._by_key) > self.limit:
            self._by_key.popitem(last=False)  # the oldest login goes first
        return session_id

    def find(self, session_id: str) -> Credential | None:
        if not session_id:
            return None
        key = _key(session_id)
        session = self._by_key.get(key)
        if session is None:
            return None
        now = time.monotonic()
        if now - session.seen > SESSION_IDLE_SECONDS or now - session.created > SESSION_MAX_SECONDS:
            del self._by_key[key]
            return None
        session.seen = now
        return session.credential

    def close(self, session_id: str) -> None:
        self._by_key.pop(_key(session_id), None)

    def __len__(self) -> int:
        return len(self._by_key)


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()
