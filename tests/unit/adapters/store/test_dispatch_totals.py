"""Each dispatch's totals (revision 0012), written with each usage row, are what folding its
rows says: after a random sequence of reports (SQLite, and one sequence on PostgreSQL), on a
ledger upgraded from 0011 with rows journaled before (the backfill), and then reported to
again; the usage sums and the task's queue totals read them."""

from __future__ import annotations

import random
from itertools import count

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_driver import Driver, LedgerTarget, alembic_to
from usage_fold import fold, journal_fold

from assay.adapters.store.schema import tasks, usage
from assay.adapters.store.sql import HEAD_REVISION, Ledger
from assay.adapters.store.usage_log import DispatchKey, DispatchUsage
from assay.adapters.store.usage_sums import usage_cells
from assay.core.settle import Verdict
from assay.core.usage import Spend, UsageFigures
from assay.core.vocab import RunStatus, UsageRole

DISPATCHES = ("a1.s1", "a1.s2", "a1.judges.j1")

# One report: which dispatch, its tokens, its cost (None: none came), priced, reported, model.
REPORT = st.tuples(
    st.sampled_from(DISPATCHES),
    st.integers(0, 10**12),
    st.integers(0, 10**12),
    st.one_of(st.none(), st.floats(0, 100, allow_nan=False).map(lambda c: round(c, 6))),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), st.sampled_from(("sonnet", "mini"))),
)
Report = tuple[str, int, int, float | None, bool, bool, str | None]


def _key(task_id: str, run_id: str, dispatch: str) -> DispatchKey:
    judge = "judges" in dispatch
    return DispatchKey(
        task_id,
        run_id,
        dispatch,
        UsageRole.JUDGE if judge else UsageRole.CODER,
        "j1" if judge else f"coder-{dispatch[-1]}",
        attempt=1,
        seat=None if judge else int(dispatch[-1]),
    )


def _journal(driver: Driver, task_id: str, run_id: str, reports: list[Report]) -> None:
    for dispatch, t_in, t_out, cost, priced, reported, model in reports:
        figures = UsageFigures(t_in, t_out, cost, model, reported=reported)
        at = driver.now()
        driver.ledger.record_usage(_key(task_id, run_id, dispatch), figures, priced=priced, at=at)


def _folded(ledger: Ledger, run_id: str) -> list[DispatchUsage]:
    with ledger.read() as conn:
        return [d for d in journal_fold(conn) if d.key.run_id == run_id]


def _same(kept: list[DispatchUsage], folded: list[DispatchUsage]) -> None:
    assert [d.key for d in kept] == [d.key for d in folded]
    for one, other in zip(kept, folded, strict=True):
        assert one.first_at == other.first_at
        a, b = one.figures, other.figures
        assert (a.tokens_in, a.tokens_out, a.model, a.reported, a.unpriced, a.priced) == (
            b.tokens_in,
            b.tokens_out,
            b.model,
            b.reported,
            b.unpriced,
            b.priced,
        )
        assert (a.cost_usd is None) == (b.cost_usd is None)
        assert a.cost_usd == pytest.approx(b.cost_usd, abs=1e-6)


def _check(ledger: Ledger, task_id: str, run_id: str, *, own_range: bool = True) -> None:
    """The run's dispatches as kept, as the task's queue totals and the usage sums say them,
    against the fold of its rows."""
    folded = _folded(ledger, run_id)
    _same(ledger.usage(run_id=run_id), folded)
    spend = Spend.of(d.figures for d in folded)
    with ledger.read() as conn:
        cost, unknown = conn.execute(
            sa.select(tasks.c.cost_usd, tasks.c.cost_unknown).where(tasks.c.id == task_id)
        ).one()
        cells = usage_cells(conn, [], since=folded[0].first_at) if folded else []
    assert (float(cost), int(unknown)) == (
        pytest.approx(spend.priced_cost_usd, abs=1e-6),
        spend.unpriced + spend.unreported,
    )
    if folded and own_range:  # the run's reports came after every other's: the range is its own
        (cell,) = cells
        got = cell.spend
        assert (got.tokens_in, got.tokens_out, got.dispatches, got.unpriced, got.unreported) == (
            spend.tokens_in,
            spend.tokens_out,
            spend.dispatches,
            spend.unpriced,
            spend.unreported,
        )
        assert got.priced_cost_usd == pytest.approx(spend.priced_cost_usd, abs=1e-6)


@pytest.fixture(scope="module")
def sqlite_driver(tmp_path_factory: pytest.TempPathFactory) -> Driver:
    ledger = Ledger.open(f"sqlite:///{tmp_path_factory.mktemp('totals') / 'assay.db'}")
    return Driver(ledger)


RUNS = count()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reports=st.lists(REPORT, max_size=12))
def test_totals_are_the_fold_of_the_rows_after_any_reports(
    sqlite_driver: Driver, reports: list[Report]
) -> None:
    n = next(RUNS)
    task_id, run_id = f"t{n}", f"r{n}"
    sqlite_driver.add(task_id)
    sqlite_driver.start(task_id, run_id)
    _journal(sqlite_driver, task_id, run_id, reports)
    _check(sqlite_driver.ledger, task_id, run_id)


def _random_reports(seed: int, size: int) -> list[Report]:
    pick = random.Random(seed)
    return [
        (
            pick.choice(DISPATCHES),
            pick.randrange(10**9),
            pick.randrange(10**9),
            pick.choice([None, round(pick.uniform(0, 5), 6)]),
            pick.random() < 0.7,
            pick.random() < 0.9,
            pick.choice([None, "sonnet", "mini"]),
        )
        for _ in range(size)
    ]


def test_totals_are_the_fold_of_the_rows_on_each_backend(driver: Driver) -> None:
    driver.add("t1")
    driver.start("t1", "r1")
    _journal(driver, "t1", "r1", _random_reports(7, 40))
    _check(driver.ledger, "t1", "r1")


def test_a_dispatch_past_64_bits_stops_at_the_bound_rather_than_fail(driver: Driver) -> None:
    driver.add("t1")
    driver.start("t1", "r1")
    big = 2**62 - 1
    _journal(driver, "t1", "r1", [("a1.s1", big, 1, None, False, True, None)] * 3)
    (kept,) = driver.ledger.usage(run_id="r1")
    assert (kept.figures.tokens_in, kept.figures.tokens_out) == (2**63 - 1, 3)


def test_a_0011_ledger_is_backfilled_from_its_journal(target: LedgerTarget) -> None:
    """Rows journaled before revision 0012 (written as 0011 wrote them: the row alone) are
    summed into each dispatch's totals by the upgrade; a report after it adds to them."""
    ledger = target.open(migrate=False)
    alembic_to(ledger, "0011")
    driver = Driver(ledger)
    for n in (1, 2):
        driver.add(f"t{n}")
        driver.start(f"t{n}", f"r{n}")
    rows = []
    for n, report in enumerate(_random_reports(11, 30)):
        dispatch, t_in, t_out, cost, priced, reported, model = report
        key = _key(f"t{n % 2 + 1}", f"r{n % 2 + 1}", dispatch)
        rows.append(
            {
                "at": driver.now(),
                "task_id": key.task_id,
                "run_id": key.run_id,
                "dispatch": dispatch,
                "attempt": key.attempt,
                "seat": key.seat,
                "role": key.role.value,
                "source": key.source,
                "model": model,
                "tokens_in": t_in,
                "tokens_out": t_out,
                "cost_usd": cost,
                "priced": priced,
                "reported": reported,
            }
        )
    with ledger._engine.begin() as conn:
        conn.execute(sa.insert(usage), rows)
    assert ledger.migrate() == HEAD_REVISION
    for n in (1, 2):
        _same(ledger.usage(run_id=f"r{n}"), _folded(ledger, f"r{n}"))
    before = {d.key.dispatch: d for d in ledger.usage(run_id="r1")}
    _journal(driver, "t1", "r1", [("a1.s1", 5, 6, 0.5, True, True, "opus")])
    _check(ledger, "t1", "r1", own_range=False)
    (after,) = (d for d in ledger.usage(run_id="r1") if d.key.dispatch == "a1.s1")
    assert after.figures.tokens_in == before["a1.s1"].figures.tokens_in + 5
    assert after.figures.model == "opus" and after.figures.priced
    alembic_to(ledger, "0011", down=True)
    with ledger._engine.connect() as conn:
        assert not sa.inspect(conn).has_table("dispatch_totals")
        assert conn.execute(sa.select(sa.func.count()).select_from(usage)).scalar() == 31


def test_the_fold_oracle_sums_a_known_journal() -> None:
    """The oracle itself: two rows of one dispatch, the newest unpriced."""
    base = {"task_id": "t", "run_id": "r", "dispatch": "a1.s1", "attempt": 1, "seat": 1}
    base |= {"role": "coder", "source": "claude", "reported": True}
    rows = [
        {**base, "at": None, "model": "m", "tokens_in": 1, "tokens_out": 2, "cost_usd": 0.5,
         "priced": True},
        {**base, "at": None, "model": None, "tokens_in": 3, "tokens_out": 4, "cost_usd": None,
         "priced": False},
    ]  # fmt: skip
    (only,) = fold(rows)
    assert (only.figures.tokens_in, only.figures.cost_usd, only.figures.model) == (4, 0.5, "m")
    assert only.figures.unpriced and not only.figures.priced


def test_deleting_a_task_deletes_its_totals(driver: Driver) -> None:
    driver.add("t1")
    started = driver.start("t1", "r1")
    _journal(driver, "t1", "r1", _random_reports(3, 4))
    driver.ledger.close_run(driver.close_for(started, "r1", Verdict(status=RunStatus.FAILED)))
    assert driver.ledger.usage(task_id="t1")
    assert [d.usage for d in driver.ledger.delete_tasks(["t1"]).deleted] == [4]
    assert driver.ledger.usage(task_id="t1") == []
    with driver.ledger.read() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM dispatch_totals")).scalar() == 0
