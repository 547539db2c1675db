"""Attesting a run's halts at close, where a failure is a warning and never ends the close.

Attestation is closure bookkeeping: by the time a run closes, its verdict is decided. If the
state file was removed, made unwritable or corrupted during the run, the run still closes
(its payload and ledger rows are what matter), and the failure is reported: one warning per
violation, kept in the payload's ``halts.warnings`` and said on stderr.
"""

from __future__ import annotations

from pathlib import Path

from assay.adapters.store import halt_ops
from assay.core.payload import HaltNotice
from assay.core.vocab import HaltSeverity


def attest_at_close(dispatch_id: str, state_dir: Path) -> list[HaltNotice]:
    """Attest every halt of the dispatch; the failures, as warnings (none when it worked)."""
    at = halt_ops.utc_now()
    try:
        document, _code = halt_ops.attest(dispatch_id, state_dir, now=at)
    except Exception as exc:  # attest reports its failures; anything else is still a warning
        return [_notice("halt-attestation-failed", f"{type(exc).__name__}: {exc}", at)]
    if document.get("attested") is True:
        return []
    violations = document.get("violations") or [{}]
    return [
        _notice(
            str(v.get("halt_class") or "halt-attestation-failed"),
            str(v.get("detail") or "the halts could not be attested"),
            at,
        )
        for v in violations
    ]


def _notice(name: str, detail: str, at: str) -> HaltNotice:
    return HaltNotice(
        name=name,
        severity=HaltSeverity.WARN,
        detail=f"attestation at close failed: {detail}",
        fired_at=at,
    )
