"""What a seat's sandbox lets its processes see: the interface between the engine and the
process runner. The engine decides the paths; :mod:`assay.adapters.sandbox` enforces them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from assay.core.vocab import NetworkMode, SandboxMode


@dataclass(frozen=True)
class SandboxSpec:
    """One seat's confinement. Paths are absolute.

    <<<<<<< HEAD
        ``writable``: the seat's work tree, its output folder (report file), the halt state folder;
        never a folder the host writes in afterwards.
        ``readable``: paths bound back read-only although they lie under a hidden one (the shared
        object store a seat's repository borrows, the assay installation, the program's own).
    =======
        ``writable``: the seat's work tree and its log folder (report file).
        ``readable``: paths bound read-only although they lie under a hidden one or in the private
        ``/tmp`` (the shared object store a seat's repository borrows, the assay installation, the
        program's own, a coder's halt relay folder: its socket takes connections, nothing else).
    >>>>>>> i22-halts
        ``hidden``: not visible at all (the operator's home, the user's repository).
        ``home``: the private ``$HOME`` of the seat (writable, kept across the seat's attempts).
    """

    mode: SandboxMode = SandboxMode.BWRAP
    network: NetworkMode = NetworkMode.ON
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    home: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
