"""Validator adapters, found by kind.

Modules are imported only when their kind is asked for: a command that validates nothing never
imports detect-secrets' plugins or an HTTP client. A run scans every candidate for secrets, so
it loads that check in a thread while its coder works (:func:`load_secret_scan`).
"""

from __future__ import annotations

import contextlib
import importlib
import threading

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


_LOCK = threading.Lock()
_SECRET_SCAN_LOAD: list[threading.Thread] = []


def load_secret_scan() -> None:
    """Import the secrets check and detect-secrets in a thread, once per process: every
    candidate is scanned, and these imports (detect-secrets, requests) would cost a cold run
    tens of milliseconds that can pass while the coder's and the collector's processes run.
    Not a daemon: an exit waits for an import under way instead of stopping it half-done."""
    with _LOCK:
        if _SECRET_SCAN_LOAD:
            return
        thread = threading.Thread(target=_load_secret_scan, name="assay-secret-scan-load")
        _SECRET_SCAN_LOAD.append(thread)
    thread.start()


def _load_secret_scan() -> None:
    # A failed import is the scan's to report: it imports again, and raises there.
    with contextlib.suppress(Exception):
        importlib.import_module(f"{__name__}.secrets")
        from assay.adapters.validators import secret_scan

        secret_scan.load()
