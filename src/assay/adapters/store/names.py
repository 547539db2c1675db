"""The ledger's environment names, in a module that imports nothing.

``assay halt check --fire`` asks whether a ledger exists before it imports SQLAlchemy (which
:mod:`assay.adapters.store.connect` pulls in), so the constants it needs live here.
"""

from __future__ import annotations

DATABASE_URL_ENV = "ASSAY_DATABASE_URL"
