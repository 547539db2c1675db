"""A service a test needs (Temporal's dev server, PostgreSQL) that this machine lacks.

Locally the test is skipped and the reason is printed in the summary (``-ra``); in CI
(``CI=true``) it fails: there, a missing service is a broken set-up, never a quiet skip.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def service_missing(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"CI=true, but {reason}", pytrace=False)
    pytest.skip(reason)


def require_temporal_executor() -> None:
    """The Temporal executor is built into this assay (``assay worker --temporal``)."""
    try:
        import assay.cli.worker  # noqa: F401
    except ImportError:
        service_missing("the Temporal executor (assay worker) is not part of this build")
