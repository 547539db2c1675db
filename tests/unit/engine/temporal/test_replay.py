"""The workflow as released must replay on the workflow as it is: each recorded history
(tools/record_histories.py: a run merged; a worker lost, the run opened again and merged; a
run stopped mid-dispatch; a run merged by a workflow started with the search attributes, which
upserts its status) replays without a nondeterminism error. A change to the sequence of
activities that fails here would stall every workflow in flight at an upgrade (the worker
retrying its workflow task for ever): such a change goes behind ``workflow.patched``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from assay.engine.temporal.worker import workflow_runner
from assay.engine.temporal.workflow import RunWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_the_recorded_histories_cover_a_merge_a_lost_worker_a_stop_and_the_upserts() -> None:
    recorded = ["lost_then_merged", "merged", "merged_searchable", "stopped"]
    assert [p.stem for p in HISTORIES] == recorded


@pytest.mark.parametrize("recorded", HISTORIES, ids=lambda p: p.stem)
def test_a_recorded_history_replays_on_the_workflow_as_it_is(recorded: Path) -> None:
    replayer = Replayer(
        workflows=[RunWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    history = WorkflowHistory.from_json(f"assay-{recorded.stem}", recorded.read_text())
    replayed = asyncio.run(replayer.replay_workflow(history, raise_on_replay_failure=False))
    assert replayed.replay_failure is None, replayed.replay_failure
