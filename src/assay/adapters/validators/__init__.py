"""Validator adapters, found by kind.

Modules are imported only when their kind is asked for: a run with command validators only
never imports detect-secrets' plugins or an HTTP client.
"""

from __future__ import annotations

import importlib

from assay.adapters.validators.base import Validator

# kind -> (module under assay.adapters.validators, class name)
_VALIDATORS: dict[str, tuple[str, str]] = {
    "command": ("command", "CommandValidator"),
    "scope": ("scope", "ScopeValidator"),
    "secrets": ("secrets", "SecretsValidator"),
    "judge": ("judge", "JudgeValidator"),
}


def validator_kinds() -> list[str]:
    return sorted(_VALIDATORS)


def get_validator(kind: str) -> Validator:
    """The validator for ``kind``; ValueError for an unknown kind."""
    key = str(kind)
    if key not in _VALIDATORS:
        raise ValueError(
            f"unknown validator kind {key!r}; known kinds: {', '.join(validator_kinds())}"
        )
    module_name, class_name = _VALIDATORS[key]
    module = importlib.import_module(f"{__name__}.{module_name}")
    validator: Validator = getattr(module, class_name)()
    return validator
