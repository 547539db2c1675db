"""Who makes an operator's move: the person at this terminal, or the dashboard token's name.

Its own small module (standard library and the vocabulary only) because ``assay halt rearm``
names the person who re-armed a halt and must not import the ledger or the task models to do
it; :mod:`assay.engine.operations.moves` re-exports both names.
"""

from __future__ import annotations

import getpass
import os
import socket

from assay.core.frozen import Frozen
from assay.core.vocab import ActorVia


class Actor(Frozen):
    """Who made a move (``user@host`` from the CLI, the name of the token a dashboard request
    carried) and where from."""

    __slots__ = ("by", "via")
    by: str
    via: ActorVia

    def __init__(self, by: str, via: ActorVia) -> None:
        super().__init__(by=by, via=via)


def cli_actor() -> Actor:
    """The person at this terminal: ``<user>@<host>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a uid without a passwd entry (containers)
        user = os.environ.get("USER") or f"uid {os.getuid()}"
    return Actor(by=f"{user}@{socket.gethostname()}", via=ActorVia.CLI)
