"""The worker's build id: a change to a source the workflow replays (the workflow, its graph,
the effect boundary, the core it decides with) makes a new id; any other change does not; and
Temporal records it with the workflow tasks a worker completes."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path

import pytest
from support.scripted_effects import Script, ScriptedWorker, TemporalEnv, queue_name, run_input
from temporalio.client import Client

from assay.engine.temporal.build import PACKAGE, build_id, workflow_sources
from assay.engine.temporal.worker import run_worker
from assay.engine.temporal.workflow import RunWorkflow


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the package's sources, to change."""
    copy = tmp_path / "assay"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return copy


@pytest.mark.parametrize(
    "source",
    [
        "engine/temporal/workflow.py",
        "engine/temporal/effects.py",
        "engine/temporal/calls.py",
        "engine/temporal/search.py",
        "engine/graph/run.py",
        "engine/graph/wave.py",
        "engine/effects.py",
        "core/settle.py",
    ],
)
def test_a_change_to_a_source_the_workflow_replays_makes_a_new_build_id(
    package: Path, source: str
) -> None:
    before = build_id(package)
    with (package / source).open("a") as file:
        file.write("\n# changed\n")
    assert build_id(package) != before


@pytest.mark.parametrize(
    "source",
    [
        "engine/temporal/activities.py",
        "engine/temporal/worker.py",
        "engine/temporal/client.py",
        "engine/local/executor.py",
        "adapters/git.py",
        "cli/worker.py",
        "web/app.py",
    ],
)
def test_a_change_elsewhere_keeps_the_build_id(package: Path, source: str) -> None:
    before = build_id(package)
    with (package / source).open("a") as file:
        file.write("\n# changed\n")
    assert build_id(package) == before


def test_the_build_id_is_of_the_installed_sources_and_stable() -> None:
    built = build_id()
    assert built == build_id() and built.startswith("assay-") and len(built) == 22
    names = {p.relative_to(PACKAGE).as_posix() for p in workflow_sources()}
    assert {"engine/temporal/workflow.py", "engine/graph/run.py", "core/vocab.py"} <= names
    assert not any(n.startswith(("adapters/", "cli/", "engine/local/")) for n in names)


def test_temporal_records_the_build_id_of_the_worker_that_ran_the_workflow(
    temporal_env: TemporalEnv, tmp_path: Path
) -> None:
    built, shared = build_id(), queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), tmp_path, lambda n: Script())

    async def scenario(client: Client) -> str:
        stop = asyncio.Event()
        serving = asyncio.create_task(
            run_worker(
                client,
                task_queue=shared,
                activities=worker,  # type: ignore[arg-type]
                max_runs=1,
                stop=stop,
                build_id=built,
            )
        )
        handle = await client.start_workflow(
            RunWorkflow.run,
            run_input("t1", shared),
            id=f"assay-build-{uuid.uuid4().hex[:8]}",
            task_queue=shared,
        )
        await asyncio.wait_for(handle.result(), 60)
        described = await handle.describe()
        stop.set()
        await asyncio.wait_for(serving, 60)
        stamp = described.raw_description.workflow_execution_info.most_recent_worker_version_stamp
        return stamp.build_id

    assert temporal_env.run(scenario) == built
