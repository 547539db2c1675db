"""A close's documents (payload, chosen diff, halt states) are written in its transaction and
read back as written, on both backends; a huge diff is cut at a line's end and flagged."""

from __future__ import annotations

import sqlalchemy as sa
from ledger_driver import Driver

from assay.adapters.store.records import DIFF_LIMIT, RunDocument
from assay.core.settle import Verdict
from assay.core.vocab import RunStatus

PAYLOAD = {"schema": "assay.payload/1", "status": "merged", "note": "naïve <b>"}
STATES = {"dispatch_id": "r1", "halts": [{"name": "halt-scope-breach", "lifecycle": "ATTESTED"}]}


def test_the_documents_are_read_back_as_written(driver: Driver) -> None:
    driver.add("t1")
    task = driver.start("t1", "r1")
    close = driver.close_for(task, "r1", Verdict(status=RunStatus.MERGED))
    document = RunDocument.build(PAYLOAD, diff="diff --git a/x b/x\n+1\n", halt_states=STATES)
    assert driver.ledger.run_document("r1") is None  # open: nothing kept yet
    driver.ledger.close_run(close.model_copy(update={"document": document}))
    assert driver.ledger.run_document("r1") == document


def test_a_close_without_documents_keeps_none(driver: Driver) -> None:
    driver.add("t1")
    driver.cycle("t1", "r1")
    assert driver.ledger.run_document("r1") is None


def test_a_kept_row_that_cannot_be_read_is_no_document(driver: Driver) -> None:
    """A row edited by hand (a payload that is no document) reads as none kept: the payload
    file, where it is, is read instead; never an internal error."""
    driver.add("t1")
    task = driver.start("t1", "r1")
    close = driver.close_for(task, "r1", Verdict(status=RunStatus.MERGED))
    driver.ledger.close_run(close.model_copy(update={"document": RunDocument.build(PAYLOAD)}))
    with driver.ledger._engine.begin() as conn:
        conn.execute(sa.text("UPDATE run_documents SET payload = '[1, 2]'"))
    assert driver.ledger.run_document("r1") is None


def test_a_huge_diff_is_cut_at_a_line_end_and_flagged() -> None:
    line = "+" + "x" * 99 + "\n"
    diff = "diff --git a/big b/big\n" + line * (DIFF_LIMIT // len(line) + 10)
    document = RunDocument.build(PAYLOAD, diff=diff)
    assert document.diff_truncated is True and document.diff is not None
    assert len(document.diff) <= DIFF_LIMIT and document.diff.endswith("\n")
    assert diff.startswith(document.diff)
    small = RunDocument.build(PAYLOAD, diff=line)
    assert (small.diff, small.diff_truncated) == (line, False)
