"""The coder report: a coder's own account of a run, kept as evidence and never as a verdict.

A coder may leave a JSON report at ``ASSAY_REPORT_PATH``. It is parsed best-effort: anything
malformed is discarded with one warning and treated exactly like a report that was never left,
because the least reliable signal in the system must not veto the most reliable one (the
worktree and the validators).
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from assay.core.vocab import FileChangeKind, StopReason

logger = logging.getLogger("assay.report")

_MAX_SHOWN = 80
_MAX_REASONS = 3


class FileChange(BaseModel):
    """A file the coder says it changed, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    path: str = Field(min_length=1)
    kind: FileChangeKind = Field(strict=False)


class CoderReport(BaseModel):
    """What a coder says it did, how far it got, and why it stopped; every field optional.

    Two invariants hold whatever a report says, and this type carries no field that could
    break them (no pass, severity, status, verdict or halt):

    1. The worktree is the only authority on what was written. A file the coder claims but
       that is not in the diff was not written; a file it omits but that is in the diff was.
       ``files`` never adds to or removes from the change read back from disk.
    2. Nothing a coder reports can cause a pass. ``stop_reason=completed`` is the coder's
       account of stopping, not a conclusion that the task is done; validators that do not
       depend on the coder decide that.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    files: list[FileChange] | None = None
    summary: str | None = None
    turns_used: int | None = Field(default=None, ge=0)
    turns_available: int | None = Field(default=None, ge=0)
    tokens_used: int | None = Field(default=None, ge=0)
    context_window: int | None = Field(default=None, ge=0)
    wall_time_ms: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    stop_reason: StopReason | None = Field(default=None, strict=False)


_FILES = TypeAdapter(Annotated[list[FileChange], Field(fail_fast=True)])


class DiffComparison(BaseModel):
    """Where the coder's claimed files and the diff read from disk disagree."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    claimed_but_missing: list[str] = Field(default_factory=list)
    unclaimed_but_present: list[str] = Field(default_factory=list)


def parse_coder_report(raw: str | bytes | Mapping[str, Any] | None) -> CoderReport | None:
    """Parse a coder report best-effort. Never raises.

    ``None`` and empty (or blank) text mean no report: ``None``, silently. Anything malformed
    returns ``None`` after exactly one warning on the ``assay.report`` logger naming why.
    """
    try:
        report, reason = _parse(raw)
    except Exception as exc:  # the contract is "never raises", whatever the input does
        report, reason = None, f"it could not be read ({type(exc).__name__})"
    if reason is not None:
        _warn(reason)
    return report


def read_coder_report(
    raw: str | bytes | Mapping[str, Any] | None,
) -> tuple[CoderReport | None, str | None]:
    """Like :func:`parse_coder_report`, but the reason a report was discarded is returned
    instead of logged, for a caller that surfaces it itself (as a run warning). Never raises.
    """
    try:
        return _parse(raw)
    except Exception as exc:
        return None, f"it could not be read ({type(exc).__name__})"


def compare_with_diff(report: CoderReport | None, changed_paths: Iterable[str]) -> DiffComparison:
    """Compare the files a report claims with the paths the diff actually changed.

    No report (or no file list) claims nothing, so every changed path is unclaimed. A claimed
    deletion is present when its path is in the diff, like any other change. Paths are
    compared after POSIX normalisation (``./a//b`` is ``a/b``); results are sorted.
    """
    claimed = {_normalise(change.path) for change in (report.files or [])} if report else set()
    present = {_normalise(path) for path in changed_paths}
    claimed.discard("")
    present.discard("")
    return DiffComparison(
        claimed_but_missing=sorted(claimed - present),
        unclaimed_but_present=sorted(present - claimed),
    )


def _parse(raw: object) -> tuple[CoderReport | None, str | None]:
    """The parse proper: a report, or ``None`` with the reason it was discarded (if any)."""
    if raw is None:
        return None, None
    if isinstance(raw, bytes | bytearray):
        try:
            raw = bytes(raw).decode("utf-8-sig")
        except UnicodeDecodeError:
            return None, "it is not UTF-8 text"
    if isinstance(raw, str):
        if not raw.strip():
            return None, None
        try:
            data: object = json.loads(raw)
        except ValueError as exc:
            return None, f"it is not valid JSON ({_shorten(str(exc))})"
    elif isinstance(raw, Mapping):
        data = dict(raw)
    else:
        return None, f"expected JSON text, bytes or a mapping, got {type(raw).__name__}"
    if not isinstance(data, dict):
        return None, f"expected a JSON object, got {_json_type(data)}"
    # Thousands of unknown keys would cost a validation error each; name a few and stop.
    unknown = [key for key in data if key not in CoderReport.model_fields]
    if len(unknown) > _MAX_REASONS:
        shown = ", ".join(_shorten(repr(key)) for key in unknown[:_MAX_REASONS])
        return None, f"unknown keys {shown}; and {len(unknown) - _MAX_REASONS} more"
    files = data.get("files")
    if isinstance(files, list):
        # Stop at the first bad entry: a long list of bad entries would otherwise cost a
        # validation error each.
        try:
            data = {**data, "files": _FILES.validate_python(files)}
        except ValidationError as exc:
            return None, _describe(exc, prefix=("files",))
    try:
        return CoderReport.model_validate(data), None
    except ValidationError as exc:
        return None, _describe(exc)


def _describe(exc: ValidationError, prefix: tuple[int | str, ...] = ()) -> str:
    """Name why validation failed: unknown keys and stop reasons by name, then wrong types."""
    reasons: list[str] = []
    for error in exc.errors():
        where = _location((*prefix, *error["loc"]))
        kind = error["type"]
        shown = _shorten(repr(error.get("input")))
        if kind == "extra_forbidden":
            reasons.append(f"unknown key {where!r}")
        elif kind == "invalid_key":
            reasons.append(f"key {_shorten(repr(error['loc'][-1]))} is not a string")
        elif kind == "enum" and where == "stop_reason":
            reasons.append(f"unknown stop reason {shown}")
        elif kind == "enum":
            reasons.append(f"unknown file change kind {shown} at {where!r}")
        else:
            reasons.append(f"wrong type or value for {where!r} ({error['msg']}, got {shown})")
    extra = len(reasons) - _MAX_REASONS
    text = "; ".join(reasons[:_MAX_REASONS])
    return f"{text}; and {extra} more" if extra > 0 else text


def _location(loc: tuple[int | str, ...]) -> str:
    """``('files', 0, 'kind')`` as ``files[0].kind``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    return "number" if isinstance(value, int | float) else type(value).__name__


def _shorten(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _normalise(path: str) -> str:
    return posixpath.normpath(path) if path else ""


def _warn(reason: str) -> None:
    try:
        logger.warning("coder report discarded and treated as absent: %s", reason)
    except Exception:  # a broken log handler must not make the parser raise
        return
