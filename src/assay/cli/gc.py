"""``assay gc``: remove what closed runs left behind (seats, candidate branches, relay folders)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from assay.cli.workspace import EXIT_FAILED, Workspace, fail, print_json

GcEvery = Annotated[
    str,
    typer.Option(
        "--gc-every",
        metavar="DURATION",
        help="Run `assay gc` at start and then this often (30m, 1h, 1d); 0: never.",
    ),
]
GcOlderThan = Annotated[
    str,
    typer.Option(
        "--gc-older-than",
        metavar="DURATION",
        help="What that gc removes: leftovers of runs closed longer ago than this.",
    ),
]

if TYPE_CHECKING:
    from collections.abc import Callable

    from assay.adapters.store.sql import Ledger
    from assay.engine.operations.gc import GcReport


def gc(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="DURATION",
            help="Remove what runs closed longer ago than this left: 30m, 12h, 7d, 2w; 0 for "
            "every closed run.",
        ),
    ] = "7d",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
) -> None:
    """Remove what closed runs left behind once they are older than --older-than (7 days).

    Removed: seat repositories (.assay/seats/<run>, e.g. of --keep-worktrees runs or crashes),
    the branches assay/<run>/* of candidates a run did not land (kept for a look), and halt
    relay folders (/tmp/assay-halt-*) of runs that are closed. Never removed: anything of an
    open or running run, a branch a run left for you (land: branch, a pull request's), a
    branch checked out somewhere, the ledger, payloads and run folders. Exit 0, or 1 when
    something could not be removed (listed), 2 for a bad DURATION.
    """
    from assay.core.gc import DurationError, parse_duration
    from assay.engine.operations.gc import collect_garbage

    try:
        seconds = parse_duration(older_than)
    except DurationError as exc:
        fail(f"--older-than: {exc}")
    workspace = Workspace.find()
    ledger = workspace.existing_ledger()
    if ledger is None:  # nothing ever ran here: nothing was left, and nothing is created
        from assay.core.gc import GcPlan
        from assay.engine.operations.gc import GcReport

        report = GcReport(GcPlan(remove=[], skip=[]), older_than=seconds, dry_run=dry_run)
    else:
        report = collect_garbage(
            repo=workspace.repo,
            home=workspace.home,
            ledger=ledger,
            older_than=seconds,
            dry_run=dry_run,
        )
    if json_output:
        print_json(report.to_json())
    else:
        for line in describe(report, verbose=True):
            typer.echo(line)
    for warning in report.warnings:
        typer.echo(f"assay: warning: {warning}", err=True)
    if report.failed:
        raise typer.Exit(EXIT_FAILED)


def describe(report: GcReport, *, verbose: bool) -> list[str]:
    """The report as lines: each removal and notable skip (``verbose``), then one summary."""
    from assay.core.gc import format_duration

    lines = []
    verb = "would remove" if report.dry_run else "removed"
    if verbose:
        for item in report.removed:
            size = f" ({human_bytes(item.bytes)})" if item.bytes else ""
            lines.append(f"{verb} {item.kind.value} {item.target}{size}")
        for skipped in report.plan.skip:
            if not skipped.recent:
                item = skipped.leftover
                lines.append(f"kept {item.kind.value} {item.target}: {skipped.reason}")
    for item, why in report.failed:
        lines.append(f"could not remove {item.kind.value} {item.target}: {why}")
    recent = sum(1 for s in report.plan.skip if s.recent)
    retention = format_duration(report.older_than)
    summary = f"gc: {verb} {len(report.removed)} item(s), {human_bytes(report.bytes_removed)}"
    if recent:
        summary += f"; kept {recent} of runs closed less than {retention} ago"
    if report.failed:
        summary += f"; {len(report.failed)} could not be removed"
    lines.append(summary)
    return lines


def human_bytes(count: int | None) -> str:
    value = float(count or 0)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def collect_between(
    workspace: Workspace,
    ledger: Ledger,
    retention: int,
    say: Callable[[str], None],
    said: set[str],
) -> None:
    """One `assay gc` between a service's other work (`serve`'s queue checks, a worker's
    sweeps): said in one line when it removed or failed something (a leftover it cannot
    remove, once: ``said`` holds what was told); its own error is a warning, never the end of
    the service."""
    from assay.engine.operations.gc import collect_garbage

    try:
        report = collect_garbage(
            repo=workspace.repo, home=workspace.home, ledger=ledger, older_than=retention
        )
    except Exception as exc:  # a git or disk error in gc must not stop the service
        say(f"gc: failed: {' '.join(str(exc).split())}")
        return
    report.failed = [(item, why) for item, why in report.failed if item.target not in said]
    said.update(item.target for item, _ in report.failed)
    if report.removed or report.failed:
        for line in describe(report, verbose=False):
            say(line)
    for warning in report.warnings:
        say(f"gc: warning: {warning}")


def gc_durations(gc_every: str, gc_older_than: str) -> tuple[int, int]:
    """A service's ``--gc-every`` and ``--gc-older-than``, in seconds; exit 2 naming the flag
    whose value is no duration."""
    from assay.core.gc import DurationError, parse_duration

    durations = []
    for flag, text in (("--gc-every", gc_every), ("--gc-older-than", gc_older_than)):
        try:
            durations.append(parse_duration(text))
        except DurationError as exc:
            fail(f"{flag}: {exc}")
    return durations[0], durations[1]
