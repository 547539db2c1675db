"""What the dashboard is given: the ledger it reads, where this machine's halt states are, and
how it is bound and guarded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from assay.adapters.store.sql import Ledger

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_ENV = "ASSAY_WEB_TOKEN"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


@dataclass(frozen=True)
class WebConfig:
    """``state_dir``: the halt state files of runs on this machine (None: there are none here);
    ``token``: required on every request when set, and always when ``host`` is not loopback."""

    ledger: Ledger
    state_dir: Path | None = None
    token: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS
