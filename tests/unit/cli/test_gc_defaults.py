"""The retention and the collection period are one number each: the planner's constants, the
flags' defaults and the README agree."""

from __future__ import annotations

import inspect
from pathlib import Path

from assay.cli.gc import gc, human_bytes
from assay.cli.serve import serve
from assay.cli.worker import worker
from assay.core.gc import (
    DEFAULT_GC_EVERY_SECONDS,
    DEFAULT_RETENTION_SECONDS,
    format_duration,
    parse_duration,
)


def _default(function: object, name: str) -> str:
    value = inspect.signature(function).parameters[name].default  # type: ignore[arg-type]
    assert isinstance(value, str)
    return value


def test_the_flags_defaults_are_the_planners() -> None:
    assert parse_duration(_default(gc, "older_than")) == DEFAULT_RETENTION_SECONDS
    assert parse_duration(_default(serve, "gc_older_than")) == DEFAULT_RETENTION_SECONDS
    assert parse_duration(_default(serve, "gc_every")) == DEFAULT_GC_EVERY_SECONDS
    assert parse_duration(_default(worker, "gc_older_than")) == DEFAULT_RETENTION_SECONDS
    assert parse_duration(_default(worker, "gc_every")) == DEFAULT_GC_EVERY_SECONDS


def test_the_readme_documents_them() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert "default **7 days**" in readme and format_duration(DEFAULT_RETENTION_SECONDS) == "7d"
    assert f"`--gc-every` (default `{format_duration(DEFAULT_GC_EVERY_SECONDS)}`" in readme
    assert "assay gc [--older-than 7d] [--dry-run] [--json]" in readme


def test_sizes_read_like_du() -> None:
    assert [human_bytes(n) for n in (None, 0, 999, 1000, 2_345_678, 7 * 10**12)] == [
        "0 B",
        "0 B",
        "999 B",
        "1.0 kB",
        "2.3 MB",
        "7000.0 GB",
    ]
