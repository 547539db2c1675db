"""What a workspace's ledger says was spent, read with plain SQL (not through assay's own sums),
and the check that it matches what the scripted model server handed out.

The usage journal (``usage`` table) has one row per increase a program reported; its sum is
what the ledger says was spent. ``dispatches`` rows carry each coder dispatch's total and
``usage.reported`` events mirror the journal's rows one for one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.model_server import HandedOut
from support.repo import Repo


@dataclass(frozen=True)
class Journal:
    """The ``usage`` table summed (optionally for some runs only)."""

    rows: int
    events: int  # ``usage.reported`` events of the same runs
    tokens_in: int
    tokens_out: int
    priced_cost: float  # the sum of the rows' costs
    unpriced: int  # dispatches whose newest row is unpriced: their cost is unknown

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def cost(self) -> float | None:
        return None if self.unpriced else round(self.priced_cost, 9)


def _connect(repo: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{repo / '.assay' / 'assay.db'}?mode=ro", uri=True)


def journal(repo: Path, runs: Iterable[str] | None = None) -> Journal:
    """The ledger's usage journal of ``runs`` (every run when None), summed."""
    wanted = None if runs is None else set(runs)
    with _connect(repo) as db:
        rows = db.execute(
            "SELECT run_id, dispatch, tokens_in, tokens_out, cost_usd, priced FROM usage "
            "ORDER BY id"
        ).fetchall()
        events = db.execute("SELECT run_id FROM events WHERE kind = 'usage.reported'").fetchall()
    rows = [r for r in rows if wanted is None or r[0] in wanted]
    newest: dict[tuple[str, str], bool] = {}
    for run_id, dispatch, *_, priced in rows:
        newest[(run_id, dispatch)] = bool(priced)
    return Journal(
        rows=len(rows),
        events=sum(1 for (run_id,) in events if wanted is None or run_id in wanted),
        tokens_in=sum(int(r[2]) for r in rows),
        tokens_out=sum(int(r[3]) for r in rows),
        priced_cost=round(sum(float(r[4] or 0.0) for r in rows), 9),
        unpriced=sum(1 for priced in newest.values() if not priced),
    )


def dispatch_tokens(repo: Path, run_id: str) -> list[int | None]:
    """Each coder dispatch row's ``tokens_used`` of one run, by attempt and seat."""
    with _connect(repo) as db:
        found = db.execute(
            "SELECT tokens_used FROM dispatches WHERE run_id = ? ORDER BY attempt, seat", (run_id,)
        ).fetchall()
    return [row[0] for row in found]


def payloads(repo: Path) -> dict[str, dict[str, Any]]:
    """Every closed run's payload (the file its ledger row names), by run id."""
    with _connect(repo) as db:
        found = db.execute(
            "SELECT id, payload_path FROM runs WHERE payload_path IS NOT NULL ORDER BY started_at"
        ).fetchall()
    return {run_id: json.loads(Path(path).read_text()) for run_id, path in found}


def usage_report(repo: Repo, *args: str) -> dict[str, Any]:
    """What ``assay usage --json`` says (``args``: ``--by coder``, ``--since 1h``)."""
    done = repo.main("usage", "--json", *args)  # read-only: in-process in either tier
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = json.loads(done.stdout)
    return loaded


def mismatches(
    handed: HandedOut,
    ledger: Journal,
    payloads: Iterable[Mapping[str, Any]],
    report: Mapping[str, Any] | None = None,
) -> list[str]:
    """Where the ledger's journal, the payloads' usage (summed) or ``assay usage --json``'s
    total differ from what the server handed out; an empty list when every token (and every
    known cost) is accounted for."""
    usages = [p["usage"] for p in payloads]
    paid = round(sum(float(u["priced_cost_usd"]) for u in usages), 6)
    found = {
        "ledger tokens": (ledger.tokens, handed.tokens),
        "ledger tokens_in": (ledger.tokens_in, handed.tokens_in),
        "ledger tokens_out": (ledger.tokens_out, handed.tokens_out),
        "ledger cost": (ledger.priced_cost, round(handed.priced_cost, 9)),
        "ledger rows vs usage.reported events": (ledger.events, ledger.rows),
        "payload tokens": (sum(int(u["tokens"]) for u in usages), handed.tokens),
        "payload tokens_in": (sum(int(u["tokens_in"]) for u in usages), handed.tokens_in),
        "payload tokens_out": (sum(int(u["tokens_out"]) for u in usages), handed.tokens_out),
        "payload priced cost": (paid, round(handed.priced_cost, 6)),
    }
    if report is not None:
        total = report["total"]
        found["assay usage tokens"] = (total["tokens"], handed.tokens)
        found["assay usage tokens_in"] = (total["tokens_in"], handed.tokens_in)
        found["assay usage tokens_out"] = (total["tokens_out"], handed.tokens_out)
        found["assay usage priced cost"] = (
            round(float(total["priced_cost_usd"]), 6),
            round(handed.priced_cost, 6),
        )
    return [f"{name}: {got} != {want}" for name, (got, want) in found.items() if got != want]
