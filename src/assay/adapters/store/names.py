"""The ledger's environment names and defaults, in a module that imports nothing.

Commands that must start fast (``assay halt check --fire``, ``--version``, ``task list``) ask
where the ledger is before they import SQLAlchemy (which
:mod:`assay.adapters.store.connect` pulls in), so the constants they need live here.
"""

from __future__ import annotations

DATABASE_URL_ENV = "ASSAY_DATABASE_URL"
HOME_ENV = "ASSAY_HOME"
DEFAULT_HOME = ".assay"
HEAD_REVISION = "0012"
"""The ledger's newest migration: the Ledger migrates to it and the quick reader reads only it
(it runs the Ledger's own SQL text); a test checks it against alembic's own head."""
