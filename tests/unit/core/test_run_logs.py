"""What the ledger keeps of a run's logs: which files, whose, and how much of each."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from assay.core.run_logs import (
    LOG_LIMIT,
    RUN_LIMIT,
    KeptLog,
    ends,
    kept,
    log_names,
    marker,
    place_of,
    within_run_limit,
)
from assay.core.vocab import LogRole

_MARKER = re.compile(r"\n… ([0-9,]+) bytes cut …\n")


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(st.characters(codec="utf-8"), max_size=400),
    limit=st.integers(min_value=70, max_value=300),
    head=st.integers(min_value=0, max_value=120),
)
def test_a_kept_log_is_never_over_its_bound_and_keeps_its_head_and_its_end(
    text: str, limit: int, head: int
) -> None:
    out, cut = kept(text, limit=limit, head=head)
    assert _utf8(out) <= limit
    out.encode("utf-8")  # whole characters only: never half of one, never a lone surrogate
    if _utf8(text) <= limit:
        assert (out, cut) == (text, False)
        return
    assert cut
    # Some split of it is the text's head, the marker saying how much was cut, the text's end.
    splits = [
        (out[: m.start()], int(m.group(1).replace(",", "")), out[m.end() :])
        for m in _MARKER.finditer(out)
    ]
    assert any(
        text.startswith(first)
        and text.endswith(end)
        and said == _utf8(text) - _utf8(first) - _utf8(end)
        and _utf8(first) > min(head, limit - 64) - 4  # at most one character short
        for first, said, end in splits
    ), splits


def test_a_long_log_keeps_32_kib_of_head_a_marker_and_its_end_within_256_kib() -> None:
    text = "h" * 40_000 + "é" * 200_000 + "THE END\n"
    out, cut = kept(text)
    assert cut and _utf8(out) <= LOG_LIMIT and out.startswith("h" * 32 * 1024 + "\n… ")
    assert out.endswith("éTHE END\n") and "bytes cut …\n" in out


def test_two_ends_read_apart_keep_the_size_the_file_had() -> None:
    out = ends("start of it\n", "the end\n", 10_000_000, limit=100, head=12)
    assert out.startswith("start of it\n") and out.endswith("the end\n")
    assert marker(10_000_000 - 12 - 8).strip() in out


def test_whose_log_a_file_is_comes_from_where_it_lies() -> None:
    assert place_of("attempt-2/seat-3/claude.log") == _place(LogRole.CODER, 2, 3)
    assert place_of("attempt-1/seat-1/validators/validator-t.log") == _place(
        LogRole.VALIDATOR, 1, 1
    )
    assert place_of("attempt-4/judges/judge-1/round-1/codex.log") == _place(LogRole.JUDGE, 4)
    assert place_of("internal-error.txt") == _place(LogRole.OTHER)
    assert place_of("attempt-1/seat-x/a.log") == _place(LogRole.OTHER, 1)


def _place(role: LogRole, attempt: int | None = None, seat: int | None = None) -> object:
    from assay.core.run_logs import LogPlace

    return LogPlace(role, attempt, seat)


def test_the_logs_of_a_run_folder_and_the_streams_only_of_a_program_that_never_finished() -> None:
    names = [
        "payload.json",
        "contract.json",
        "internal-error.txt",
        "attempt-1/seat-1/coder-attempt1.log",
        "attempt-1/seat-1/prompt-attempt1.md",
        "attempt-1/seat-1/claude.log",
        "attempt-1/seat-1/claude.log.out",  # claude.log holds it
        "attempt-1/seat-1/validators/validator-t.log.out",  # no validator-t.log: it died
        "attempt-1/seat-1/validators/validator-t.log.err",
        "attempt-1/seat-1/llm-transcript.jsonl",
        "attempt-1/judges/judge-1/round-1/judge.jsonl",
        "attempt-1/seat-1/mini.traj.json",
        "attempt-1/seat-1/report.json",
        "seat.log",
    ]
    assert log_names(names) == [
        "attempt-1/judges/judge-1/round-1/judge.jsonl",
        "attempt-1/seat-1/claude.log",
        "attempt-1/seat-1/coder-attempt1.log",
        "attempt-1/seat-1/llm-transcript.jsonl",
        "attempt-1/seat-1/mini.traj.json",
        "attempt-1/seat-1/validators/validator-t.log.err",
        "attempt-1/seat-1/validators/validator-t.log.out",
        "internal-error.txt",
    ]


def _log(name: str, size: int, text: str | None = None) -> KeptLog:
    place = place_of(name)
    body = "x" * size if text is None else text
    return KeptLog(name, place.role, place.attempt, place.seat, size, body, False)


def test_over_the_run_budget_the_oldest_attempts_coder_logs_are_cut_first() -> None:
    big = LOG_LIMIT
    logs = [_log(f"attempt-{a}/seat-1/coder-{n}.log", big) for a in (1, 2) for n in range(12)]
    logs += [
        _log(f"attempt-{a}/seat-1/validators/v-{n}.log", big) for a in (1, 2) for n in range(8)
    ]
    logs.append(_log("internal-error.txt", 100))
    assert sum(_utf8(log.text) for log in logs) > RUN_LIMIT
    out = within_run_limit(logs)
    assert sum(_utf8(log.text) for log in out) <= RUN_LIMIT
    assert [log.name for log in out] == [log.name for log in logs]  # the order kept
    cut = {log.name for log in out if log.truncated}
    assert cut and all(name.startswith("attempt-1/seat-1/coder-") for name in cut)
    assert all(log.text == before.text for log, before in zip(out, logs, strict=True)
               if not log.truncated)  # fmt: skip


def test_when_squeezing_is_not_enough_logs_keep_only_their_marker() -> None:
    logs = [_log(f"attempt-1/seat-1/c{n}.log", 200) for n in range(10)]
    out = within_run_limit(logs, limit=500)
    assert sum(_utf8(log.text) for log in out) <= 500
    assert out[0].text == "… 200 bytes cut …\n" and out[0].truncated
    assert out[-1].text == "x" * 200  # the last ones stayed whole
