"""A running coder's log shipped live: only whole lines of its end, every secret the scan's
detectors would find redacted before it reaches the ledger, replaced by the final ship."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from assay.adapters.live_logs import LIVE_LIMIT, PROVISIONAL, live_copy, whole_keys_only
from assay.adapters.log_shipping import LogShipper
from assay.adapters.store.sql import Ledger
from assay.core.run_logs import KeptLog
from assay.core.tasks import Task

NOW = datetime(2026, 12, 6, tzinfo=UTC)
GITHUB = "ghp_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2cD4"  # found by a provider's detector
AWS = "AKIAZ3QW7RT5YU2OP4LK"
OPERATOR = "operator-db-password-0123"  # the ledger's password: never a child's to print
STREAM = "attempt-1/seat-1/claude.log.out"


def _ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'assay.db'}")
    task = Task.new(id="t1", title="t", instruction="i", now=NOW)
    ledger.add_task(task)
    task.start(NOW, run_id="r1")
    ledger.start_run(task, "r1", started_at=NOW)
    return ledger


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(text)


def _running(log: KeptLog) -> bool:
    return (log.attempt, log.seat) == (1, 1)


def test_a_secret_a_running_coder_prints_never_reaches_the_ledger_unredacted(
    tmp_path: Path,
) -> None:
    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    stream = run / STREAM
    env = {"ASSAY_DATABASE_URL": f"postgresql+psycopg://u:{OPERATOR}@db/assay"}
    shipper = LogShipper(ledger, env, lambda: NOW)
    _append(stream, f'{{"text": "found {GITHUB} in the config"}}\nkey {AWS}\n')
    _append(stream, f"the ledger said {OPERATOR}\n")
    half = len(GITHUB) // 2
    _append(stream, f"and half a token: {GITHUB[:half]}")  # still being written
    assert shipper.ship_live("r1", run, set(), _running) == 1
    kept = ledger.run_log("r1", STREAM)
    assert kept is not None
    assert kept.text.startswith(PROVISIONAL)
    for secret in (GITHUB, AWS, OPERATOR, GITHUB[:half]):
        assert secret not in kept.text
    assert "[REDACTED:GitHub Token]" in kept.text and "[REDACTED:AWS Access Key]" in kept.text
    assert "in the config" in kept.text and "half a token" not in kept.text
    # The line ends: the whole token is seen, and redacted.
    _append(stream, f"{GITHUB[half:]} printed\n")
    assert shipper.ship_live("r1", run, set(), _running) == 1
    kept = ledger.run_log("r1", STREAM)
    assert kept is not None and "ghp_" not in kept.text
    assert kept.text.endswith("and half a token: [REDACTED:GitHub Token] printed\n")
    assert shipper.ship_live("r1", run, set(), _running) == 0  # unchanged: no write


def test_a_seat_no_longer_running_gets_no_live_copy_and_its_final_ship_replaces_it(
    tmp_path: Path,
) -> None:
    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    _append(run / STREAM, "working\n")
    _append(run / "attempt-1/seat-2/codex.log.out", "other seat\n")
    shipper = LogShipper(ledger, {}, lambda: NOW)
    assert shipper.ship_live("r1", run, set(), _running) == 1  # seat 2 is not running
    assert [e.name for e in ledger.run_logs("r1")] == [STREAM]
    assert shipper.ship_live("r1", run, set(), lambda log: False) == 0
    # The program ended: its .log holds both streams and replaces them in the ledger.
    _append(run / "attempt-1/seat-1/claude.log", "$ claude\n--- stdout ---\nworking\n")
    assert shipper.ship("r1", run, ready=_running) == 1
    names = [e.name for e in ledger.run_logs("r1")]
    assert names == ["attempt-1/seat-1/claude.log"]
    kept = ledger.run_log("r1", "attempt-1/seat-1/claude.log")
    assert kept is not None and PROVISIONAL not in kept.text


def test_a_long_running_log_ships_whole_lines_of_its_end_only(tmp_path: Path) -> None:
    path = tmp_path / STREAM
    line = "x" * 99 + "\n"
    _append(path, f"secret-ish start {GITHUB[:20]}" + line * (2 * LIVE_LIMIT // 100))
    _append(path, "the newest line\n")
    log = live_copy(path, STREAM, set(), {})
    assert log is not None and log.truncated and log.size == path.stat().st_size
    body = log.text.removeprefix(PROVISIONAL)
    assert body.endswith("the newest line\n") and body.startswith("x" * 99 + "\n")
    assert len(body.encode()) <= LIVE_LIMIT and "secret-ish" not in body


def test_a_private_key_cut_by_the_window_or_not_yet_ended_is_left_out() -> None:
    head = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1\n"
    assert whole_keys_only(head + "MIIEpA2\n") == "before\n"
    cut = "MIIEpAIBAAKCAQEA1\n-----END RSA PRIVATE KEY-----\nafter\n"
    assert whole_keys_only(cut) == "after\n"
    whole = head + "-----END RSA PRIVATE KEY-----\nafter\n"
    assert whole_keys_only(whole) == whole  # the detectors see it whole (and redact it)


def test_a_live_copy_of_a_key_in_a_running_log_holds_none_of_it(tmp_path: Path) -> None:
    path = tmp_path / STREAM
    _append(path, "start\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5v\n")
    log = live_copy(path, STREAM, set(), {})
    assert log is not None and "b3BlbnNz" not in log.text and "PRIVATE KEY" not in log.text


def test_a_seat_that_ended_while_its_copy_was_read_gets_no_write(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    _append(run / STREAM, "working\n")
    asked: list[str] = []

    def ended_meanwhile(log: KeptLog) -> bool:  # running when read, ended when about to write
        asked.append(log.name)
        return len(asked) == 1

    assert LogShipper(ledger, {}, lambda: NOW).ship_live("r1", run, set(), ended_meanwhile) == 0
    assert asked == [STREAM, STREAM] and ledger.run_logs("r1") == []


def test_a_dispatch_ships_its_coder_s_log_while_it_runs_and_never_after(tmp_path: Path) -> None:
    import asyncio

    from assay.engine.local.live_logs import LiveLogs

    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    live = LiveLogs(LogShipper(ledger, {}, lambda: NOW), set, every=0.02)
    seen: list[str | None] = []

    async def coder() -> str:
        _append(run / STREAM, f"step one {GITHUB}\n")
        for _ in range(200):  # until the ledger holds it: the seat still runs
            await asyncio.sleep(0.02)
            kept = ledger.run_log("r1", STREAM)
            if kept is not None:
                seen.append(kept.text)
                break
        return "done"

    async def seat_then_more() -> str:
        said = await live.during("r1", run, (1, 1), coder)
        _append(run / STREAM, "after the end\n")  # in the same loop: a live loop would see it
        await asyncio.sleep(0.1)
        return said

    assert asyncio.run(seat_then_more()) == "done"
    assert seen and seen[0] is not None and "step one [REDACTED:GitHub Token]" in seen[0]
    assert live.running == set()
    kept = ledger.run_log("r1", STREAM)
    assert kept is not None and "after the end" not in kept.text


def test_a_log_no_scan_read_is_shipped_with_what_the_detectors_find_redacted(
    tmp_path: Path,
) -> None:
    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    coder, check = "attempt-1/seat-1/claude.log", "attempt-1/seat-1/validators/validator-t.log"
    _append(run / coder, f"$ claude\n--- stdout ---\nused {GITHUB}\n")
    _append(run / check, f"{AWS}\n")

    def coders(log: KeptLog) -> bool:
        return log.role.value == "coder"

    assert LogShipper(ledger, {}, lambda: NOW).ship("r1", run, unscanned=coders) == 2
    kept = ledger.run_log("r1", coder)
    assert kept is not None and GITHUB not in kept.text and "[REDACTED:GitHub Token]" in kept.text
    other = ledger.run_log("r1", check)  # not asked for: as it was (its own scan's business)
    assert other is not None and other.text == f"{AWS}\n"


def test_a_seat_s_checks_ship_their_logs_while_they_run_and_not_its_coder_s(
    tmp_path: Path,
) -> None:
    import asyncio

    from assay.core.vocab import LogRole
    from assay.engine.local.live_logs import LiveLogs

    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    check = "attempt-1/seat-1/validators/validator-tests.log"
    live = LiveLogs(LogShipper(ledger, {}, lambda: NOW), set, every=0.02)
    _append(run / STREAM, "the coder's last words\n")
    seen: list[str] = []

    async def checks() -> str:
        _append(run / check, f"collected 3 items {GITHUB}\n")
        for _ in range(200):  # until the ledger holds it: the checks still run
            await asyncio.sleep(0.02)
            kept = ledger.run_log("r1", check)
            if kept is not None:
                seen.append(kept.text)
                break
        return "checked"

    said = asyncio.run(live.during("r1", run, (1, 1), checks, LogRole.VALIDATOR))
    assert said == "checked"
    assert seen and "collected 3 items [REDACTED:GitHub Token]" in seen[0]
    assert GITHUB not in seen[0]
    assert ledger.run_log("r1", STREAM) is None  # the coder's copy is not the checks' to ship


_BODY = [f"MIIEow{n:02d}Kx9Qz3Lp7Vb2Nc8Rt4Yh6Uj1Mk5Wd0Sf3Ga7Hb2Jc9" for n in range(12)]
_KEYS = {
    # A key printed without its end (``head -20 id_rsa``): the scan takes the lines that follow.
    "pem without its end": "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(_BODY) + "\ndone\n",
    "ssh2": '---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "k"\n'
    + "\n".join(_BODY)
    + "\n---- END SSH2 ENCRYPTED PRIVATE KEY ----\n",
    "putty": "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nPrivate-Lines: 12\n"
    + "\n".join(_BODY)
    + "\nPrivate-MAC: 0a1b2c3d\n",
    # Its lines broken by carriage returns, or escaped as a string literal holds them.
    "pem with cr": "-----BEGIN EC PRIVATE KEY-----\r" + "\r".join(_BODY) + "\rdone\n",
    "pem escaped": "-----BEGIN PRIVATE KEY-----\n"
    + "\n".join(f"{b}\\n" for b in _BODY)
    + "\nlater\n",
}


@pytest.mark.parametrize("kind", sorted(_KEYS))
def test_a_key_whose_header_the_window_cut_off_leaves_none_of_its_body(
    tmp_path: Path, kind: str
) -> None:
    """The window's start falls inside a key's body, its header before it: the final copy
    redacts every line of that body (the scan reads the header), so the live copy may hold
    none of them, whatever the key's kind and whether its end was printed."""
    from assay.adapters.live_logs import detected

    key = _KEYS[kind]
    assert {b for b in _BODY if any(b in v for _, v in detected(key, {}))} == set(_BODY)
    for n in range(1, len(_BODY)):  # the window starts 3 characters before line n of the body
        at = key.index(_BODY[n]) - 3
        line = "the coder's work goes on\n"
        filler = line * (LIVE_LIMIT // len(line) + 1)
        filler = filler[: LIVE_LIMIT + at - len(key) - 1] + "\n"
        path = tmp_path / f"at-{n}" / STREAM
        _append(path, key + filler)
        assert path.stat().st_size - LIVE_LIMIT == at
        log = live_copy(path, STREAM, set(), {})
        assert log is not None and log.truncated
        left = [b for b in _BODY if b[8:] in log.text]
        assert left == [], f"{kind}: a window from line {n} shows {left}"
        assert "the coder's work goes on" in log.text


def test_a_value_the_change_s_scan_would_find_is_redacted_from_the_live_copy(
    tmp_path: Path,
) -> None:
    """A coder that writes ``password = "…"`` to a file and prints that line: the change's scan
    (its generic detectors) finds the value, and the final copy of the log is redacted of it;
    the live copy, shipped before that scan, must not show it either."""
    from assay.adapters.validators.secret_scan import ScanSource, scan_streams

    value = "Zx9kQ2mW8vB4nR7tY3uI"
    line = f'password = "{value}"'
    in_change = scan_streams([ScanSource("app/config.py", [(1, line)]).stream()])
    assert {v for hit in in_change.hits for v in hit.values} == {value}
    path = tmp_path / STREAM
    _append(path, f"wrote app/config.py:\n{line}\n")
    log = live_copy(path, STREAM, set(), {})
    assert log is not None and value not in log.text
    assert "[REDACTED:Secret Keyword]" in log.text


def test_a_log_no_scan_read_keeps_no_key_body_whose_header_its_cut_left_out(
    tmp_path: Path,
) -> None:
    """A run that died before its checks: its coder's huge log is kept by its two ends, its
    detectors run over what is kept. A key whose header lies in the cut middle would show its
    body's last lines in clear at the tail's start: they are left out, as from a live copy."""
    from assay.core.run_logs import HEAD_BYTES, LOG_LIMIT

    key = _KEYS["pem without its end"]
    head = "h" * 60 + "\n"
    for shift in range(0, 700, 100):  # the tail's start moved through the key's body
        run = tmp_path / f"runs-{shift}" / "r1"
        after = "the coder's work goes on\n" * ((LOG_LIMIT - HEAD_BYTES) // 25 - 40)
        text = head * (2 * HEAD_BYTES // len(head)) + key + "x" * shift + "\n" + after
        _append(run / "attempt-1/seat-1/claude.log", text)
        ledger = _ledger(tmp_path / f"l-{shift}")
        LogShipper(ledger, {}, lambda: NOW).ship("r1", run, unscanned=lambda log: True)
        kept = ledger.run_log("r1", "attempt-1/seat-1/claude.log")
        assert kept is not None and kept.truncated and "bytes cut" in kept.text
        left = [b for b in _BODY if b[8:] in kept.text]
        assert left == [], f"a tail moved by {shift} shows {left}"
        assert kept.text.endswith("the coder's work goes on\n")


def test_a_ledger_that_refuses_a_live_copy_leaves_the_seat_running_and_the_next_copy_lands(
    tmp_path: Path,
) -> None:
    import asyncio

    import sqlalchemy.exc

    from assay.engine.local.live_logs import LiveLogs

    ledger = _ledger(tmp_path)
    run = tmp_path / "runs" / "r1"
    refusals: list[int] = []

    class Locked(LogShipper):
        def ship_live(self, *args: object, **kwargs: object) -> int:
            if not refusals:  # the first write meets a locked ledger
                refusals.append(1)
                raise sqlalchemy.exc.OperationalError("UPDATE", {}, Exception("database locked"))
            return super().ship_live(*args, **kwargs)  # type: ignore[arg-type]

    live = LiveLogs(Locked(ledger, {}, lambda: NOW), set, every=0.02)

    async def coder() -> str:
        _append(run / STREAM, "step one\n")
        for _ in range(200):  # until a later interval's copy lands
            await asyncio.sleep(0.02)
            if ledger.run_log("r1", STREAM) is not None:
                return "done"
        return "never shipped"

    assert asyncio.run(live.during("r1", run, (1, 1), coder)) == "done"
    assert refusals == [1]
