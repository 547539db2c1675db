"""Record RunWorkflow's histories for the replay test (tests/unit/engine/temporal/test_replay.py).

Each scenario runs the production workflow in Temporal's test server against a worker holding
scripted runs (tests/support/scripted_effects.py); its history is written as JSON to
tests/unit/engine/temporal/histories/<scenario>.json. Record them again only on purpose: the
committed files are the workflow as released, and a change that cannot replay them would
stall every workflow in flight when the workers are upgraded (use ``workflow.patched``).

Usage: ``.venv/bin/python tools/record_histories.py [SCENARIO ...]`` (default: every one;
name one to add it without recording the others again).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from support.scripted_effects import (  # noqa: E402
    Script,
    ScriptedWorker,
    queue_name,
    run_input,
    temporal_workers,
    wait_for,
)
from support.temporal import require_binary  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

from assay.engine.temporal.calls import StopRequest  # noqa: E402
from assay.engine.temporal.config import STOP_SIGNAL  # noqa: E402
from assay.engine.temporal.search import KEYS, at_start  # noqa: E402
from assay.engine.temporal.workflow import RunWorkflow  # noqa: E402

OUT = ROOT / "tests" / "unit" / "engine" / "temporal" / "histories"


async def record(
    client: Client,
    name: str,
    script: Callable[[int], Script],
    home: Path,
    stop: bool = False,
    search: bool = False,
) -> None:
    shared = queue_name("shared")
    worker = ScriptedWorker(queue_name("own"), home / name, script)
    (home / name).mkdir()
    workflow = f"assay-history-{name}-{uuid.uuid4().hex[:6]}"
    async with temporal_workers(client, worker, shared):
        handle = await client.start_workflow(
            RunWorkflow.run,
            run_input("t1", shared, heartbeat=1.0),
            id=workflow,
            task_queue=shared,
            search_attributes=at_start("t1", "/srv/repo") if search else None,
        )
        if stop:
            await wait_for(lambda: bool(worker.effects) and len(worker.effects[0].calls) > 2)
            await handle.signal(STOP_SIGNAL, StopRequest("not now"))
        await asyncio.wait_for(handle.result(), 60)
    history = await handle.fetch_history()
    (OUT / f"{name}.json").write_text(history.to_json())
    print(f"{name}: {len(history.events)} events")


async def main(only: list[str]) -> None:
    env = await WorkflowEnvironment.start_local(
        search_attributes=KEYS,
        dev_server_existing_path=str(require_binary()),
        data_converter=pydantic_data_converter,
        ui=False,
        dev_server_log_level="error",
    )
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            home = Path(scratch)
            scenarios = {
                "merged": lambda: record(env.client, "merged", lambda n: Script(), home),
                "lost_then_merged": lambda: record(
                    env.client,
                    "lost_then_merged",
                    lambda n: Script(forgotten=True) if n == 1 else Script(),
                    home,
                ),
                "stopped": lambda: record(
                    env.client, "stopped", lambda n: Script(dispatch_hangs=True), home, stop=True
                ),
                # Started with the search attributes: the workflow upserts its status.
                "merged_searchable": lambda: record(
                    env.client, "merged_searchable", lambda n: Script(), home, search=True
                ),
            }
            unknown = set(only) - set(scenarios)
            if unknown:
                raise SystemExit(
                    f"no scenario {', '.join(sorted(unknown))}: {', '.join(scenarios)}"
                )
            for name, scenario in scenarios.items():
                if not only or name in only:
                    await scenario()
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
