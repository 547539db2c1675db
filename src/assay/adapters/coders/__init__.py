"""Coder adapters, found by kind.

Adapter modules are imported only when their kind is asked for, so a run that uses the
``replay`` coder never imports an HTTP client, and a broken optional adapter breaks only the
runs that use it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from assay.adapters.coders.base import Coder, CoderEnvironmentError
from assay.core.contract import CoderSpec
from assay.core.contract_template import TEMPLATE_CODER
from assay.core.usage import UsageFigures

# kind -> (module under assay.adapters.coders, class name)
_ADAPTERS: dict[str, tuple[str, str]] = {
    "command": ("command", "CommandCoder"),
    "replay": ("replay", "ReplayCoder"),
    "claude": ("claude", "ClaudeCoder"),
    "codex": ("codex", "CodexCoder"),
    "aider": ("aider", "AiderCoder"),
    "mini": ("mini", "MiniCoder"),
    "llm": ("llm", "LlmCoder"),
}

# The kinds whose program's output files report its usage (each module's ``usage_sources``).
USAGE_KINDS = ("aider", "claude", "codex", "mini")

# Settings that say which adapter runs rather than how it runs: never "ignored".
_ALWAYS_HONOURED: frozenset[str] = frozenset({"kind"})


def coder_kinds() -> list[str]:
    return sorted(_ADAPTERS)


def get_coder(kind: str) -> Coder:
    """The adapter for ``kind``; ValueError for an unknown kind, CoderEnvironmentError when
    the adapter's module cannot be imported here."""
    key = str(kind)
    if key not in _ADAPTERS:
        raise ValueError(f"unknown coder kind {key!r}; known kinds: {', '.join(coder_kinds())}")
    module_name, class_name = _ADAPTERS[key]
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ImportError as exc:
        raise CoderEnvironmentError(
            f"the {key} coder adapter cannot be loaded ({exc}); reinstall assay"
        ) from exc
    coder: Coder = getattr(module, class_name)()
    return coder


def ignored_settings(spec: CoderSpec, coder: Coder) -> list[str]:
    """Settings the contract sets explicitly that ``coder`` does not act on, sorted.

    Only explicitly set fields count (``model_fields_set``), and only when they hold something
    other than the default and other than what ``assay contract init`` writes: a spec that
    crossed a serializer (Temporal's data converter dumps every field, and so did the task
    files of older versions) has every field "set", though the user wrote none of them; a
    default changes nothing the coder could ignore; and a value left as the template wrote it
    (``max_turns: 40`` under a kind changed to ``command``) is not one the user chose.
    """
    honoured = coder.honoured_settings | _ALWAYS_HONOURED
    fields = type(spec).model_fields
    unchosen = object()
    return sorted(
        name
        for name in spec.model_fields_set
        if name not in honoured
        and getattr(spec, name) != fields[name].get_default(call_default_factory=True)
        and getattr(spec, name) != TEMPLATE_CODER.get(name, unchosen)
    )


def usage_of_logs(
    kind: str, log_dir: Path, *, out_dir: Path | None = None, home: Path | None = None
) -> UsageFigures | None:
    """The usage a seat's program reported in the files it left, read whole, as its dispatch
    would have read it live: for a dispatch whose host died while the program ran on (and
    printed more). None when it reported nothing, or ``kind`` runs no such program.

    Where each program's reports are (``log_dir``: the dispatch's log folder; ``out_dir`` and
    ``home``: its output folder and the seat's private home, as the request gave them):

    - claude: its stdout, ``<log_dir>/claude.log.out`` (``stream-json``).
    - codex: its stdout, ``<log_dir>/codex.log.out``, and its session file under its
      ``CODEX_HOME`` (``<home>/.codex``, else ``<out_dir>/codex-home``), found by the thread id
      its stdout names; without ``out_dir`` and ``home``, the stdout only.
    - aider: its stdout, ``<log_dir>/aider.log.out``.
    - mini: its trajectory, ``<out_dir>/mini.traj.json``; without ``out_dir``, the copy the
      adapter keeps at ``<log_dir>/mini.traj.json`` once mini has exited.
    """
    if kind not in USAGE_KINDS:
        return None
    from assay.adapters.coders.usage_watch import read_logs

    module = importlib.import_module(f"{__name__}.{kind}")
    sources = module.usage_sources(
        output_dir=out_dir if out_dir is not None else log_dir, home=home
    )
    figures: UsageFigures | None = read_logs(sources, log_dir / f"{kind}.log")
    return figures
