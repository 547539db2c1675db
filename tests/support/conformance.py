"""Comparing what two executors made of the same task: payloads field by field.

Ids and times differ by nature and are set aside: the task, run and dispatch ids (also where
they appear inside strings, e.g. a branch name), timestamps, commit ids (a merge commit's id
carries its time), wall times and a tool's own timing in its output (pytest's `1 failed in
0.85s`). Blind labels are drawn from a shuffle seeded by the run id, so
a label is replaced by the seat it stands for. Everything else must be equal.
"""

from __future__ import annotations

import re
from typing import Any

IGNORED = frozenset({"task_id", "run_id", "dispatch_id", "started_at", "finished_at"})
IGNORED_PATHS = frozenset({"usage.wall_time_ms"})
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")
COMMIT = re.compile(r"\b[0-9a-f]{12,40}\b")
DURATION = re.compile(r"\b(in|took) \d+(?:\.\d+)?\s?(?:s|ms|seconds)\b")  # a tool's own timing


def normalise(payload: dict[str, Any]) -> dict[str, Any]:
    ids: dict[str, str] = {}
    for key in ("run_id", "task_id", "dispatch_id"):  # the dispatch id is often the run's
        if payload.get(key):
            ids.setdefault(str(payload[key]), f"<{key}>")
    labels = {
        c["label"]: f"<seat {c['seat']}>"
        for c in payload.get("candidates") or []
        if c.get("label") is not None
    }

    def clean(value: Any, path: str, in_labels: bool) -> Any:
        if isinstance(value, dict):
            return {
                (labels.get(key, key) if in_labels else key): clean(
                    item, f"{path}.{key}" if path else key, in_labels or key == "tally"
                )
                for key, item in value.items()
                if (path or key not in IGNORED) and f"{path}.{key}".lstrip(".") not in IGNORED_PATHS
            }
        if isinstance(value, list):
            return [clean(item, f"{path}[]", in_labels) for item in value]
        if isinstance(value, str):
            if (in_labels or path.endswith(".label")) and value in labels:
                return labels[value]
            for raw, placeholder in sorted(ids.items(), key=lambda kv: -len(kv[0])):
                value = value.replace(raw, placeholder)
            value = TIMESTAMP.sub("<time>", value)
            value = DURATION.sub(r"\1 <duration>", value)
            return COMMIT.sub("<commit>", value)
        return value

    cleaned = clean(payload, "", False)
    assert isinstance(cleaned, dict)
    return cleaned


def differences(left: Any, right: Any, path: str = "") -> list[str]:
    """Every path where ``left`` and ``right`` differ, with both values."""
    if isinstance(left, dict) and isinstance(right, dict):
        found = []
        for key in sorted(set(left) | set(right)):
            where = f"{path}.{key}" if path else key
            if key not in left or key not in right:
                found.append(f"{where}: only in {'right' if key not in left else 'left'}")
            else:
                found.extend(differences(left[key], right[key], where))
        return found
    if isinstance(left, list) and isinstance(right, list):
        if len(left) != len(right):
            return [f"{path}: {len(left)} item(s) != {len(right)}: {left!r} != {right!r}"]
        return [
            d
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if left == right else [f"{path}: {left!r} != {right!r}"]
