"""What the sandbox costs: a process's start-up under bwrap beside the same process unconfined,
and what a network of its own behind the egress proxy adds.

The bwrap command line is the one :mod:`assay.adapters.sandbox` builds for a typical seat (its
repository, log and halt folders writable, a private home, the operator's home and the user's
repository hidden, the shared object store readable, this machine's PATH). Each figure is the
median wall time of N runs of ``true``; the target is at most 20 ms per process on top.

The network figures (:func:`network_startup`, :func:`streaming`):

* a seat's start on the host's network (``network: host``, what every seat had before)
  against the same with a namespace of its own, the forwarder in front of the program, and
  its :class:`EgressProxy` started and stopped by :func:`seat_network` (what each seat now
  pays; the steps in between are shown too). Target: at most 50 ms more. Most of it is
  Python's own start (the forwarder's), so a busy machine shows more: the load average is
  printed beside it.
* a host server streaming an SSE answer at 1 MB/s for 3 s, read on the host directly and from
  inside the sandbox through the forwarder and the proxy (CONNECT, as an HTTPS client does):
  both rates, the slowdown (target: none measurable, under 2 %), and how late each event
  arrives after it was sent (a proxy that buffered would show it here);
* the most the proxy carries: bulk bytes read through it, and directly, in MB/s.

Usage: ``.venv/bin/python bench/sandbox.py [--runs 50] [--network-only] [--json] [--no-fail]``.
One line per measurement; :func:`seat_setup` adds the seat set-up comparison (seat repository
against worktree). Exits 1 when a figure misses its target (``--no-fail`` to always exit 0).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

sys.path.insert(0, str(ROOT / "bench"))

from _egress import CLIENT, StreamServer  # noqa: E402

from assay.adapters.netwrap import DEFAULT_PORT  # noqa: E402
from assay.adapters.process import run_process  # noqa: E402
from assay.adapters.sandbox import bwrap_command, bwrap_path, prepare, sandbox_env  # noqa: E402
from assay.adapters.sandbox_spec import SandboxSpec  # noqa: E402
from assay.adapters.seat_network import seat_network  # noqa: E402
from assay.core.egress import AllowRule, parse_rule  # noqa: E402
from assay.core.vocab import NetworkMode  # noqa: E402

PROCESS_TARGET_MS = 20.0
NETWORK_TARGET_MS = 50.0
SLOWDOWN_TARGET = 0.02  # "no measurable slowdown": the proxied rate within 2 % of the direct
STREAM_RATE = 1_000_000  # bytes a second, a fast model's streamed answer and then some
STREAM_SECONDS = 3.0
BULK_BYTES = 512 * 1024 * 1024
LOCAL_MODEL = "http://127.0.0.1:8123"  # a loopback base URL: one tunnel more to listen on


@dataclass
class Measurement:
    name: str
    median_ms: float
    runs: int
    note: str = ""
    missed: bool = False  # a figure with a target that it misses

    def line(self) -> str:
        return f"{self.name}: {self.median_ms:.1f} ms (median of {self.runs}){self.note}"


@dataclass
class Rate:
    name: str
    mb_per_s: float
    note: str = ""
    missed: bool = False

    def line(self) -> str:
        return f"{self.name}: {self.mb_per_s:.2f} MB/s{self.note}"


def median_ms(action: Callable[[], object], runs: int) -> float:
    action()  # warm the caches once, untimed
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def typical_seat(root: Path) -> tuple[SandboxSpec, Path]:
    """A seat laid out as the engine lays it out, under ``root``; the spec and the seat."""
    repo = root / "repo"
    seat = repo / ".assay" / "seats" / "r1" / "seat-1"
    logs = repo / ".assay" / "runs" / "r1" / "attempt-1" / "seat-1"
    halt = repo / ".assay" / "halt-state"
    objects = repo / ".git" / "objects"
    home = root / "operator-home"
    for folder in (seat, logs, halt, objects, home):
        folder.mkdir(parents=True, exist_ok=True)
    spec = SandboxSpec(
        writable=(seat, logs, halt),
        readable=(objects,),
        hidden=(home, repo, Path.home()),
        home=seat.parent / "seat-1.home",
    )
    prepare(spec)
    return spec, seat


def process_startup(runs: int) -> list[Measurement]:
    """``true`` unconfined and under bwrap, bare and through :func:`run_process`."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise SystemExit("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(Path.home())}
    with tempfile.TemporaryDirectory(prefix="assay-bench-sandbox-") as tmp:
        spec, seat = typical_seat(Path(tmp))
        inner = sandbox_env(spec, env)
        confined = bwrap_command(spec, ["true"], env=inner, cwd=seat, bwrap=bwrap)
        logs = Path(tmp) / "logs"

        def bare(argv: list[str], environ: dict[str, str]) -> Callable[[], object]:
            return lambda: subprocess.run(argv, cwd=seat, env=environ, check=True)

        def runner(sandbox: SandboxSpec | None) -> Callable[[], object]:
            return lambda: run_process(
                ["true"], cwd=seat, env=env, timeout=30, log_path=logs / "p.log", sandbox=sandbox
            )

        plain = median_ms(bare(["true"], env), runs)
        boxed = median_ms(bare(confined, inner), runs)
        plain_run = median_ms(runner(None), runs)
        boxed_run = median_ms(runner(spec), runs)
    binds = sum(1 for arg in confined if arg in ("--bind", "--ro-bind-try", "--tmpfs"))
    over = boxed - plain > PROCESS_TARGET_MS
    verdict = "OVER" if over else "ok"
    return [
        Measurement("true", plain, runs),
        Measurement(
            "bwrap ... true",
            boxed,
            runs,
            f"; +{boxed - plain:.1f} ms per process, target <= {PROCESS_TARGET_MS:.0f} ms: "
            f"{verdict} ({binds} mounts)",
            missed=over,
        ),
        Measurement("run_process(true)", plain_run, runs),
        Measurement(
            "run_process(true, sandbox=seat)",
            boxed_run,
            runs,
            f"; +{boxed_run - plain_run:.1f} ms",
        ),
    ]


def interleaved(actions: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """The median ms of each action, the actions taking turns (a machine that gets busier part
    way weighs on all alike), each run once untimed first."""
    for action in actions.values():
        action()
    samples: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(runs):
        for name, action in actions.items():
            start = time.perf_counter()
            action()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) * 1000 for name, times in samples.items()}


def network_startup(runs: int) -> list[Measurement]:
    """A seat's ``true`` on the host's network (as before), then in a namespace of its own
    (``network: on`` with nothing allowed: no proxy), then behind the forwarder, then all a
    seat now pays: :func:`seat_network` (its proxy started and stopped, the command built)."""
    bwrap = bwrap_path()
    assert bwrap is not None
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(Path.home())}
    with tempfile.TemporaryDirectory(prefix="assay-bench-net-", dir="/tmp") as tmp:
        spec, seat = typical_seat(Path(tmp))
        host = replace(spec, network=NetworkMode.HOST)
        today = bwrap_command(host, ["true"], env=sandbox_env(host, env), cwd=seat, bwrap=bwrap)
        unshared = bwrap_command(spec, ["true"], env=sandbox_env(spec, env), cwd=seat, bwrap=bwrap)
        allowed = replace(spec, allow=(parse_rule("api.anthropic.com"), parse_rule(LOCAL_MODEL)))
        with seat_network(allowed, env) as network:  # the forwarder alone: its proxy idle
            inner = sandbox_env(network.sandbox, network.env)
            wrapped = [*network.wrapper, "true"]
            forwarded = bwrap_command(network.sandbox, wrapped, env=inner, cwd=seat, bwrap=bwrap)

        def run(argv: list[str], environ: dict[str, str]) -> Callable[[], object]:
            return lambda: subprocess.run(argv, cwd=seat, env=environ, check=True)

        def a_seat_now() -> None:
            with seat_network(allowed, env) as network:
                inner = sandbox_env(network.sandbox, network.env)
                argv = [*network.wrapper, "true"]
                command = bwrap_command(network.sandbox, argv, env=inner, cwd=seat, bwrap=bwrap)
                subprocess.run(command, cwd=seat, env=inner, check=True)

        medians = interleaved(
            {
                "today": run(today, sandbox_env(host, env)),
                "unshared": run(unshared, sandbox_env(spec, env)),
                "forwarded": run(forwarded, inner),
                "seat": a_seat_now,
            },
            runs,
        )
    base = medians["today"]
    added = medians["seat"] - base
    verdict = "ok" if added <= NETWORK_TARGET_MS else "MISS"

    def plus(key: str) -> str:
        return f"; +{medians[key] - base:.1f} ms"

    load = ", ".join(f"{figure:.1f}" for figure in os.getloadavg())
    return [
        Measurement(
            "bwrap ... true (network: host, as before)",
            base,
            runs,
            f" (load average {load} on {os.cpu_count()} CPUs)",
        ),
        Measurement(
            "  + --unshare-net (network: on, nothing allowed)",
            medians["unshared"],
            runs,
            plus("unshared"),
        ),
        Measurement("  + the forwarder in front", medians["forwarded"], runs, plus("forwarded")),
        Measurement(
            "  + its EgressProxy started and stopped (a seat now)",
            medians["seat"],
            runs,
            f"; +{added:.1f} ms per seat, target <= {NETWORK_TARGET_MS:.0f} ms: {verdict}",
            missed=added > NETWORK_TARGET_MS,
        ),
    ]


def streaming(seconds: float, rate: float, bulk: int) -> list[Rate]:
    """A paced SSE answer and bulk bytes, read on the host and through the seat's proxy."""
    bwrap = bwrap_path()
    assert bwrap is not None
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(Path.home())}
    with (
        tempfile.TemporaryDirectory(prefix="assay-bench-net-", dir="/tmp") as tmp,
        StreamServer() as server,
    ):
        spec, seat = typical_seat(Path(tmp))
        spec = replace(spec, allow=(AllowRule("127.0.0.1", server.port),))

        def read(mode: str, query: str, via: str) -> dict[str, float]:
            client = [sys.executable, "-c", CLIENT, mode, via, str(server.port), query]
            client.append(str(DEFAULT_PORT))
            if via == "direct":
                return run_client(client, env)
            with seat_network(spec, env) as network:
                inner = sandbox_env(network.sandbox, network.env)
                argv = [*network.wrapper, *client]
                command = bwrap_command(network.sandbox, argv, env=inner, cwd=seat, bwrap=bwrap)
                figures = run_client(command, inner)
                assert network.proxy is not None and network.proxy.served == 1
            return figures

        def run_client(argv: list[str], environ: dict[str, str]) -> dict[str, float]:
            done = subprocess.run(argv, cwd=seat, env=environ, capture_output=True, check=True)
            figures: dict[str, float] = json.loads(done.stdout)
            return figures

        sse = f"rate={rate}&seconds={seconds}"
        direct, proxied = read("sse", sse, "direct"), read("sse", sse, "proxy")
        bulk_direct = read("bulk", f"bytes={bulk}", "direct")
        bulk_proxied = read("bulk", f"bytes={bulk}", "proxy")
    slowdown = 1 - proxied["mb_per_s"] / direct["mb_per_s"]
    verdict = "ok" if slowdown <= SLOWDOWN_TARGET else "MISS"

    def late(figures: dict[str, float]) -> str:
        return (
            f" ({figures['events']:.0f} events; each {figures['delay_median_ms']:.2f} ms late "
            f"(median), p99 {figures['delay_p99_ms']:.2f} ms, max {figures['delay_max_ms']:.2f} ms)"
        )

    return [
        Rate(
            f"SSE at {rate / 1e6:g} MB/s for {seconds:g} s, host direct",
            direct["mb_per_s"],
            late(direct),
        ),
        Rate(
            "  the same inside the sandbox, through forwarder + proxy",
            proxied["mb_per_s"],
            late(proxied)
            + f"; slowdown {slowdown * 100:.2f} %, target <= {SLOWDOWN_TARGET * 100:g} %: "
            + verdict,
            missed=slowdown > SLOWDOWN_TARGET,
        ),
        Rate(f"bulk {bulk >> 20} MiB, host direct", bulk_direct["mb_per_s"]),
        Rate(
            "  the same inside the sandbox, through forwarder + proxy (its maximum)",
            bulk_proxied["mb_per_s"],
        ),
    ]


def seat_setup(runs: int) -> list[Measurement]:
    """A seat's set-up (its own repository) against a worktree on 5,000 files
    (``bench/seat_setup.py``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from seat_setup import seat_setup as measure

    return [Measurement(**figure) for figure in measure(runs)]  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even on a MISS")
    parser.add_argument(
        "--network-only", action="store_true", help="only the network and proxy figures"
    )
    parser.add_argument("--stream-seconds", type=float, default=STREAM_SECONDS)
    parser.add_argument("--bulk-mib", type=int, default=BULK_BYTES >> 20)
    args = parser.parse_args()
    figures: list[Measurement | Rate] = []
    if not args.network_only:
        figures += process_startup(args.runs)
    figures += network_startup(args.runs)
    figures += streaming(args.stream_seconds, STREAM_RATE, args.bulk_mib << 20)
    if not args.network_only:
        figures += seat_setup(max(args.runs // 10, 3))
    if args.json:
        print(json.dumps([asdict(m) for m in figures], indent=2))
    else:
        for measurement in figures:
            print(measurement.line())
    missed = any(figure.missed for figure in figures)
    sys.exit(1 if missed and not args.no_fail else 0)


if __name__ == "__main__":
    main()
