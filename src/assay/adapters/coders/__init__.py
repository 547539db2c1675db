"""Coder adapters, found by kind.

Adapter modules are imported only when their kind is asked for, so a run that uses the
``replay`` coder never imports an HTTP client, and a broken optional adapter breaks only the
runs that use it.
"""

from __future__ import annotations

import importlib

from assay.adapters.coders.base import Coder, CoderEnvironmentError
from assay.core.contract import CoderSpec

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
    other than the default: a spec that crossed a serializer (Temporal's data converter dumps
    every field, and so did the task files of older versions) has every field "set", though
    the user wrote none of them, and a default changes nothing the coder could ignore.
    """
    honoured = coder.honoured_settings | _ALWAYS_HONOURED
    fields = type(spec).model_fields
    return sorted(
        name
        for name in spec.model_fields_set
        if name not in honoured
        and getattr(spec, name) != fields[name].get_default(call_default_factory=True)
    )
