"""A task's convergence ledger, rebuilt from its stage records and attempt rows."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from assay.adapters.store import statements as st
from assay.adapters.store.errors import TaskNotFound
from assay.adapters.store.schema import attempts, runs, stage_records, tasks
from assay.core.ledger import (
    MAX_LAP_HISTORY,
    ConvergenceLedger,
    ForeignStageRecord,
    StageRecord,
)
from assay.core.vocab import Stage, StageVerdict

KNOWN_STAGES = frozenset(s.value for s in Stage)
KNOWN_VERDICTS = frozenset(v.value for v in StageVerdict)


def convergence_ledger(conn: sa.Connection, task_id: str) -> ConvergenceLedger:
    """Each judged attempt is one lap; its finding signatures are the lap's set."""
    # Signatures are read as stored and parsed here, so a row that does not hold JSON is
    # shown as unreadable instead of stopping the reader.
    laps_of_task = (
        sa.select(sa.type_coerce(attempts.c.finding_signatures, sa.Text))
        .select_from(attempts.join(runs, runs.c.id == attempts.c.run_id))
        .where(runs.c.task_id == task_id)
    )
    if conn.execute(sa.select(tasks.c.id).where(tasks.c.id == task_id)).first() is None:
        raise TaskNotFound(f"no task {task_id!r}")
    stages = conn.execute(
        sa.select(
            stage_records.c.stage,
            stage_records.c.attempts,
            stage_records.c.last_verdict,
            sa.type_coerce(stage_records.c.last_finding_signatures, sa.Text).label(
                "last_finding_signatures"
            ),
        ).where(stage_records.c.task_id == task_id)
    ).all()
    laps = conn.execute(
        sa.select(sa.func.count()).select_from(laps_of_task.subquery())
    ).scalar_one()
    newest = conn.execute(
        laps_of_task.order_by(*(c.desc() for c in st.RUN_ORDER), attempts.c.attempt.desc()).limit(
            MAX_LAP_HISTORY
        )
    ).scalars()
    lap_signatures = [st.signature_list(s) or [] for s in reversed(list(newest))]

    # A row a newer version wrote (a stage or verdict we do not know), or one whose
    # signatures are unreadable, is shown, not counted.
    def known(row: sa.Row[Any]) -> bool:
        return (
            row.stage in KNOWN_STAGES
            and row.last_verdict in KNOWN_VERDICTS
            and st.signature_list(row.last_finding_signatures) is not None
        )

    def shown(value: Any) -> list[str]:
        signatures = st.signature_list(value)
        if signatures is None:
            return [f"(unreadable: {str(value)[:60]!r} is not a list of signatures)"]
        return signatures

    return ConvergenceLedger(
        task_id=task_id,
        stage_state={
            r.stage: StageRecord(
                attempts=r.attempts,
                last_verdict=r.last_verdict,
                last_finding_signatures=st.signature_list(r.last_finding_signatures) or [],
            )
            for r in stages
            if known(r)
        },
        laps=laps,
        lap_signatures=lap_signatures,
        foreign_stages={
            str(r.stage): ForeignStageRecord(
                attempts=r.attempts,
                last_verdict=str(r.last_verdict),
                last_finding_signatures=shown(r.last_finding_signatures),
            )
            for r in stages
            if not known(r)
        },
    )
