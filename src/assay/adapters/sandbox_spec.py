"""What a seat's sandbox lets its processes see: the interface between the engine and the
process runner. The engine decides the paths; :mod:`assay.adapters.sandbox` enforces them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from assay.core.egress import AllowRule
from assay.core.vocab import NetworkMode, SandboxMode


@dataclass(frozen=True)
class SandboxSpec:
    """One seat's confinement. Paths are absolute.

    ``writable``: the seat's work tree and its output folder (report file); never a folder the
    host writes in afterwards.
    ``readable``: paths bound read-only although they lie under a hidden one or in the private
    ``/tmp`` (the object stores a seat's repository borrows, the assay installation, the
    program's own, a coder's halt relay folder: its socket takes connections, nothing else).
        ``hidden``: not visible at all (the operator's home, the user's repository).
        ``home``: the private ``$HOME`` of the seat (writable, made afresh for each dispatch).
    ``network``: ``on``, a namespace of its own whose only way out is a proxy letting through
    ``allow`` (see :mod:`assay.adapters.seat_network`); ``none``, no way out; ``host``, the
    machine's network.
    """

    mode: SandboxMode = SandboxMode.BWRAP
    network: NetworkMode = NetworkMode.ON
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    home: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    allow: tuple[AllowRule, ...] = ()
