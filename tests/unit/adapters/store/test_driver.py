"""The close's statements on SQLite's own driver fail as SQLAlchemy's would: a broken unique
key is an ``IntegrityError`` (which the ledger reports as a conflict), and the transaction
SQLAlchemy began rolls the statement's earlier rows back."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from assay.adapters.store import driver

ROWS = sa.Table(
    "rows", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True), sa.Column("note", sa.Text)
)


def test_a_duplicate_key_is_sqlalchemys_integrity_error_and_nothing_stays(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'd.db'}")
    ROWS.metadata.create_all(engine)
    insert = driver.DriverStatement.build(
        "INSERT INTO rows (id, note) VALUES (?, ?)", engine.dialect, list(ROWS.columns)
    )
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        driver.execute_many(conn, insert, [{"id": 1, "note": "a"}, {"id": 1, "note": "b"}])
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(ROWS)).scalar() == 0


def test_values_go_through_the_columns_own_processors(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'd.db'}")
    ROWS.metadata.create_all(engine)
    insert = driver.DriverStatement.build(
        "INSERT INTO rows (id, note) VALUES (?, ?)", engine.dialect, list(ROWS.columns)
    )
    select = driver.DriverStatement.build("SELECT id, note FROM rows", engine.dialect, [])
    with engine.begin() as conn:
        driver.execute(conn, insert, {"id": 7, "note": "é"})
        rows = driver.execute(conn, select, {})
    read = driver.reader(engine.dialect, list(ROWS.columns))
    assert [read(r) for r in rows] == [{"id": 7, "note": "é"}]
