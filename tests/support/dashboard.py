"""The dashboard's credentials as its tests use them: a token store in a folder of the test's
own (never the operator's config) and a client logged in the way a browser logs in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.web.auth import Credentials
from assay.web.tokens import TokenStore

BASE = "http://127.0.0.1:8765"
OPERATOR = "operator"
TOKEN = "operator-token-for-the-tests-0123456789"


def credentials(folder: Path, name: str = OPERATOR, secret: str = TOKEN) -> Credentials:
    """The credentials of a store in ``folder`` holding the token ``secret`` named ``name``."""
    store = TokenStore(folder)
    if not any(r.name == name for r in store.records()):
        store.add(name, secret)
    return Credentials.of(store)


def log_in(client: Any, token: str = TOKEN) -> None:
    """``/login?token=…`` as the URL ``assay serve`` prints: the session cookie is set."""
    done = client.get("/login", params={"token": token}, follow_redirects=False)
    assert done.status_code == 303, done.text
