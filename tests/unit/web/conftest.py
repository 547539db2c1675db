"""The web tests' fixtures (shared by both tiers), and the logged-in client of a module's own
``ledger`` fixture."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.dashboard import BASE, credentials, log_in
from support.web_fixtures import *  # noqa: F403

from assay.adapters.store.sql import Ledger
from assay.web.app import create_app
from assay.web.config import WebConfig


@pytest.fixture
def client(ledger: Ledger, tmp_path: Path) -> Iterator[TestClient]:
    """The dashboard over the requesting module's ``ledger``, logged in."""
    config = WebConfig(ledger=ledger, credentials=credentials(tmp_path / "config"))
    with TestClient(create_app(config), base_url=BASE, raise_server_exceptions=False) as c:
        log_in(c)
        yield c
