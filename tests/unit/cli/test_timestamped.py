"""A service's stderr: each line stamped once, at its start, however it is written."""

from __future__ import annotations

import io
import re

from assay.cli.timestamped import Timestamped, utc_stamp


def test_each_line_is_stamped_once_at_its_start_however_it_is_written() -> None:
    out = io.StringIO()
    stamps = iter(f"T{n}" for n in range(10))
    stream = Timestamped(out, lambda: next(stamps))
    stream.write("one\ntw")
    stream.write("o\nthree\n")
    stream.write("")
    stream.write("Traceback (most recent call last):\n  File x\n")
    assert out.getvalue() == (
        "T0 one\nT1 two\nT2 three\nT3 Traceback (most recent call last):\nT4   File x\n"
    )


def test_the_stamp_is_utc_to_the_millisecond() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", utc_stamp())
