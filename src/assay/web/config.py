"""What the dashboard is given: the ledger it reads, where this machine's halt states are, who
may use it, and how it is bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from assay.web.auth import Credentials

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger
    from assay.engine.operations.stopping import TemporalStop

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "ASSAY_WEB_TOKEN"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
# Open /events streams one client may hold: per credential, and per peer address (anonymous
# readers are counted by address alone).
STREAMS_PER_CLIENT = 4


@dataclass(frozen=True)
class WebConfig:
    """``state_dir``: the halt state files of runs on this machine (None: there are none here);
    ``credentials``: who may log in (none: nobody can, every page but /login is refused);
    ``anonymous_read``: pages (never actions) without a credential, on loopback only;
    ``home``: this machine's ``.assay``, whose running runs a stop reaches (None: none);
    ``temporal_stop``: how a stop reaches a task's workflow (None: runs are not on Temporal)."""

    ledger: Ledger
    state_dir: Path | None = None
    credentials: Credentials = field(default_factory=Credentials)
    anonymous_read: bool = False
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    stream_limit: int = STREAMS_PER_CLIENT
    home: Path | None = None
    temporal_stop: TemporalStop | None = None

    def __post_init__(self) -> None:
        if self.anonymous_read and not self.loopback:
            raise ValueError("anonymous reading is for a loopback dashboard only")

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS
