"""assay's own secrets, which no coder, validator or judge is ever handed.

Whoever holds the ledger's URL (and its password), the dashboard's token, or the Temporal
client's key can change any task: rewrite a queued task's contract, release a held one. The
contract parser refuses a ``"$NAME"`` of these variables already; here the operator's actual
values are known too, so a contract that would hand one on under another name (``env: {PW:
$PGPASSWORD}`` with the same password, the URL written out literally, an ``api_key_env``
naming the Temporal key's variable) is refused when the run starts, and
:func:`assay.adapters.envpolicy.child_environment` drops whatever got past that. A PostgreSQL
ledger's URL may carry no password at all: libpq then reads ``$PGPASSWORD`` or the file
``$PGPASSFILE`` / ``$PGSERVICEFILE`` names, so those are assay's secrets too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

from assay.adapters.store.names import DATABASE_URL_ENV
from assay.adapters.temporal_connection import API_KEY_ENV_ENV, CODEC_KEY_ENV, TLS_KEY_ENV
from assay.core.contract_rules import SECRET_VARIABLES

if TYPE_CHECKING:
    pass

# A secret this short is matched as a whole value only: "pw" inside any path is no leak.
MIN_CONTAINED = 6
# Where libpq (so a PostgreSQL ledger) also finds the password when its URL has none: the
# variable itself, and the files the other two name.
PG_PASSWORD_ENV = "PGPASSWORD"
PG_FILE_VARIABLES = ("PGPASSFILE", "PGSERVICEFILE")


@dataclass(frozen=True)
class Secret:
    what: str  # said in a refusal ("the ledger's password (in $ASSAY_DATABASE_URL)")
    value: str

    def found_in(self, text: str) -> bool:
        if len(self.value) < MIN_CONTAINED:
            return text == self.value
        return self.value in text


@dataclass(frozen=True)
class AssaySecrets:
    names: frozenset[str]  # variables never passed to a child, under any name
    values: tuple[Secret, ...]  # text no child's variable or argument may hold

    def leak(self, text: str) -> Secret | None:
        return next((s for s in self.values if s.found_in(text)), None)


def assay_secrets(operator_env: Mapping[str, str]) -> AssaySecrets:
    """The operator's secrets of assay's own: their variables and their values."""
    names = set(SECRET_VARIABLES)
    values: list[Secret] = []
    url = operator_env.get(DATABASE_URL_ENV, "").strip()
    if url:
        where = f"${DATABASE_URL_ENV}"
        values.append(Secret(f"the ledger's URL ({where})", url))
        values += [Secret(f"the ledger's password (in {where})", p) for p in _passwords(url)]
        if url.lower().startswith("postgres"):
            password = operator_env.get(PG_PASSWORD_ENV, "").strip()
            if password:
                values.append(Secret(f"the ledger's password (${PG_PASSWORD_ENV})", password))
            for name in PG_FILE_VARIABLES:
                path = operator_env.get(name, "").strip()
                if path:  # named, the file would be shown to the sandbox as a declared path
                    values.append(Secret(f"the ledger's password file (${name})", path))
    token = operator_env.get("ASSAY_WEB_TOKEN", "").strip()
    if token:
        values.append(Secret("the dashboard's token ($ASSAY_WEB_TOKEN)", token))
    key_file = operator_env.get(TLS_KEY_ENV, "").strip()
    if key_file:  # named, its file would be shown to the sandbox as a declared path
        values.append(Secret(f"the Temporal client key's path (${TLS_KEY_ENV})", key_file))
    codec_key = operator_env.get(CODEC_KEY_ENV, "").strip()
    if codec_key:
        values.append(
            Secret(f"the key that seals Temporal's histories (${CODEC_KEY_ENV})", codec_key)
        )
    key_env = operator_env.get(API_KEY_ENV_ENV, "").strip()
    if key_env:
        names.add(key_env)
        key = operator_env.get(key_env, "").strip()
        if key:
            values.append(Secret(f"the Temporal API key (${key_env})", key))
    return AssaySecrets(frozenset(names), tuple(values))


def secret_files(operator_env: Mapping[str, str]) -> tuple[Path, ...]:
    """The files that hold one of assay's secrets (the Temporal client's private key, a
    PostgreSQL ledger's password file), as absolute paths: a sandbox hides them wherever they
    are, since the root it shows read-only would show them too."""
    names = [TLS_KEY_ENV]
    url = operator_env.get(DATABASE_URL_ENV, "").strip()
    if url.lower().startswith("postgres"):
        names += PG_FILE_VARIABLES
    paths = [Path(operator_env.get(name, "").strip()) for name in names]
    paths += _sqlite_files(url)
    return tuple(p for p in paths if p.is_absolute())


def _sqlite_files(url: str) -> list[Path]:
    """A SQLite ledger named by URL outside the homes a sandbox already hides: its file and
    the journals beside it (other tasks' contracts and events are not a seat's to read)."""
    scheme, _, rest = url.partition(":///")
    if not scheme.lower().startswith("sqlite") or not rest:
        return []
    database = Path(rest.split("?", 1)[0]).absolute()
    return [database.with_name(database.name + suffix) for suffix in _SQLITE_SUFFIXES]


_SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")


def _passwords(url: str) -> list[str]:
    """The password of a database URL as written and decoded (``user:pw@`` or
    ``?password=``), or none."""
    try:
        parts = urlsplit(url)
        given = [parts.password or ""]
    except ValueError:
        return []
    given += parse_qs(parts.query).get("password", [])
    found: list[str] = []
    for raw in given:
        for text in (raw, unquote(raw)):
            if text and text not in found:
                found.append(text)
    return found
