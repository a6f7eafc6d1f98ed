"""How many concurrent streams one ttft load process holds without distorting what it measures.

    python tests/benchmarks/client_capacity.py [--rates 20] [--levels 8,16,32,64,128,256] [--tokens 32]
        [--sdk | --raw | --httpx] [--transport aiohttp|proto] [--ramp S] [--loop auto|asyncio]
        [--spread on|off] [--turns T] [--versus transport=aiohttp,proto | ramp=0,2 | spread=off,on | turns=1,3
        [--runs 3]]

The default path is ``ttft bench``'s: the lean reader (orjson) on the asyncio Protocol + httptools
transport (backends.transport.protocol; on aiohttp without httptools, or with ``--transport aiohttp``, as
``ttft bench --aiohttp``). ``--ramp S`` starts each level's streams spread over S seconds.
``--spread off`` turns off what ``ttft bench`` does at every level (backends.load.spread): at most 8
requests start per loop pass and records are ended in batches between passes. ``--stalls MS``
prints, per level, where the loop thread was while the loop ran more than MS late
(tests/benchmarks/loop_stalls.py). ``--turns T`` makes every stream a user holding conversations of T
turns (``ttft bench --turns``): each turn resends the history with the answers so far, so the client
builds and encodes bigger requests; each user holds at least one whole conversation per level.
``--httpx`` is the lean
reader on httpx2 (as ``ttft ask``), ``--raw`` the SDK's call read as JSON, ``--sdk`` the SDK's typed
chunks. ``--loop asyncio`` runs asyncio's own event loop rather than uvloop (``ttft bench``'s
default when uvloop is installed, backends.load.event_loop). Besides lag and CPU per chunk it prints how
far TPOT p50 is from the server's schedule and the machine's load average (other programs' CPU skews
every wall-clock figure here). The last lines check the client's targets: 256 streams at 20 tok/s with
loop lag p99 <= 5 ms and TPOT within 1 % of the schedule, and <= 50 us of client CPU per chunk.

For each per-stream rate (tokens/s) the simulated batching server (tests/fakes/batching_server.py)
runs in a SEPARATE process with unlimited slots and no batching slowdown, so the truth is
TPOT = 1000/rate ms and its CPU does not count as the client's. This process is the client: it
runs closed-loop levels of ``c`` streams through ``backends.load.driver.run_level`` (the same code as
``ttft bench``) and prints per level the event-loop lag p99, the client's CPU and CPU per streamed
chunk (process CPU time / content chunks received), and the measured TPOT p50 against the truth.
The answer is the largest ``c`` with loop lag p99 < 5 ms and no errors (the ramp stops after
two misses). Figures depend on the machine and on what else runs on it: compare before/after
on the same machine at the same time.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.backends.load import event_loop  # noqa: E402
from ttft.backends.load.driver import LoadConfig, run_level  # noqa: E402
from ttft.backends.load.runner import BackendSpec, build_backend  # noqa: E402
from ttft.backends.providers.lean.transport import default_transport  # noqa: E402
from ttft.telemetry import events as ev  # noqa: E402
from ttft.telemetry.bench.workload.lengths import Lengths  # noqa: E402
from ttft.telemetry.bench.workload.plan import Workload  # noqa: E402
from ttft.telemetry.metrics import percentiles  # noqa: E402

from tests.benchmarks.loop_stalls import StallSampler  # noqa: E402
from tests.fakes.batching_server import free_port, wait_http  # noqa: E402


class LagTrace:
    """The lag monitor's samples with the time each was taken (ns, the records' clock), so the lag can
    be split by phase: a 10 ms ticker as backends.load.driver's, run alongside it."""

    def __init__(self) -> None:
        self.samples: list[tuple[int, float]] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lag_ms = max(0.0, (time.perf_counter() - t - 0.01) * 1000)
            self.samples.append((ev.now_ns(), lag_ms))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def steady_lags(samples: list[tuple[int, float]], records: list[dict], origin_ns: int, margin_ms: float = 20) -> list:
    """The lag samples taken while no stream was opening (sent, no token yet) or ending (its last
    bytes, within ``margin_ms``): the steady phase, every open stream only streaming."""
    busy = []
    m = margin_ms * 1e6
    for r in records:
        sent = origin_ns + r["extra"]["bench"]["sent_at_ms"] * 1e6
        ttft, total = r["metrics"].get("ttft_ms"), r["metrics"].get("total_ms") or r["metrics"].get("e2e_ms")
        if ttft is None or total is None:
            continue
        busy.append((sent - m, sent + ttft * 1e6 + m))
        busy.append((sent + total * 1e6 - m, sent + total * 1e6 + m))
    busy.sort()
    merged: list[list[float]] = []
    for a, b in busy:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    starts = [a for a, _ in merged]
    out = []
    for t, lag in samples:
        t0 = t - (10 + lag) * 1e6  # the tick's whole wait
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and merged[i][1] >= t0:
            continue  # overlaps an opening or an ending
        out.append(lag)
    return out


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def ramp(base_url: str, rate: float, a: argparse.Namespace, figures: dict[tuple[float, int], dict]) -> int:
    lean = not (a.sdk or a.raw)
    spec = BackendSpec(
        "compat:fake",
        base_url,
        raw_stream=a.raw,
        options={"lean": True} if lean else {},
        aiohttp=lean and not a.httpx,
        transport=a.transport,
    )
    backend = build_backend(spec, pool=max(a.levels) + 16)
    best = 0
    misses = 0
    try:
        warm = LoadConfig(levels=(4,), requests=4, input_tokens=16, max_output_tokens=4, warmup=0)
        await run_level(backend, warm, 4, run_id="warm", warmup=True)
        for c in a.levels:
            turns = int(a.turns)
            cfg = LoadConfig(
                levels=(c,),
                requests=c * turns * -(-a.rounds // turns),  # whole conversations, at least one per user
                input_tokens=16,
                max_output_tokens=a.tokens,
                warmup=0,
                ramp_s=a.ramp,
                spread=a.spread == "on",
                workload=Workload(input=Lengths.fixed(16), turns=turns) if turns > 1 else None,
            )
            c0 = cpu_s()
            trace = LagTrace()
            trace.start()
            sampler = StallSampler(a.stalls) if a.stalls else None
            if sampler is not None:
                sampler.start(asyncio.get_running_loop())
            origin = ev.now_ns() + 20_000_000  # the level starts on this stamp: the records' origin
            res = await run_level(backend, cfg, c, run_id=f"cap-{rate}-{c}", start_at_ns=origin)
            await trace.stop()
            if sampler is not None:
                sampler.stop()
            used = cpu_s() - c0
            steady_samples = steady_lags(trace.samples, res.records, origin)
            steady = percentiles(steady_samples)
            whole = percentiles([lag for _, lag in trace.samples])
            chunks = sum(len(r.get("chunks") or ()) for r in res.records)
            failed = sum(r.get("status") != "ok" for r in res.records)
            tpot = percentiles([r["metrics"]["tpot_ms"] for r in res.records if r["metrics"].get("tpot_ms")])
            lags = res.client["loop_lag_ms"]
            lag = lags["p99"]
            per_chunk_us = used / chunks * 1e6 if chunks else float("nan")
            off = ((tpot.get("p50") or 0) * rate / 1000 - 1) * 100
            figures[(rate, c)] = {"lag": lag, "us": per_chunk_us, "tpot_off": off, "failed": failed,
                                  "steady": steady.get("p99"), "whole": whole.get("p99")}  # fmt: skip
            print(
                f"  c={c:>4}: loop lag p99 {lag:7.2f} ms (p90 {lags['p90']:5.2f}, max {lags['max']:6.1f}) | "
                f"client CPU {res.client['cpu_percent']:5.1f}% "
                f"({per_chunk_us:5.0f} us/chunk over {chunks} chunks) | TPOT p50 {tpot.get('p50') or 0:7.2f} ms "
                f"(truth {1000 / rate:.0f}, {off:+.2f}%) | errors {failed} | load avg {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            n_steady = len(steady_samples)
            print(
                f"         lag p99 by phase: steady (no stream opening or ending) {steady.get('p99') or 0:7.2f} ms "
                f"over {n_steady} of {len(trace.samples)} ticks; whole run {whole.get('p99') or 0:7.2f} ms",
                flush=True,
            )
            if sampler is not None:
                print("         " + sampler.report().replace("\n", "\n         "), flush=True)
            if lag < 5.0 and failed == 0:
                best = c
                misses = 0
            else:
                misses += 1
                if misses == 2 and not a.all_levels:
                    break
    finally:
        await backend.aclose()
    return best


def versus(base_url: str, rate: float, a: argparse.Namespace, factory: object) -> None:
    """Each value of one option (``--versus transport=aiohttp,proto``, or ``ramp=0,2``), run ``--runs``
    times in alternation (the order flipped each round, so a drift in the machine's load falls on both),
    then the medians per level. Every run's own line is printed as it ends."""
    name, _, values = a.versus.partition("=")
    cast = float if name == "ramp" else int if name == "turns" else str  # transport and spread take words
    options = [cast(v) for v in values.split(",")]
    runs: dict[tuple[object, int], list[dict]] = {}
    loads: list[float] = []
    for r in range(a.runs):
        for value in options if r % 2 == 0 else options[::-1]:
            setattr(a, name, value)
            print(f"-- run {r + 1}/{a.runs}, {name}={value} --", flush=True)
            figs: dict[tuple[float, int], dict] = {}
            event_loop.run(ramp(base_url, rate, a, figs), factory)  # type: ignore[arg-type]
            loads.append(os.getloadavg()[0])
            for (_, c), f in figs.items():
                runs.setdefault((value, c), []).append(f)
    print(f"medians of {a.runs} alternated runs at {rate:g} tok/s, load average {min(loads):.2f}-{max(loads):.2f}:")
    for (value, c), fs in sorted(runs.items(), key=lambda kv: (kv[0][1], str(kv[0][0]))):

        def med(key: str, fs: list[dict] = fs) -> float:
            return statistics.median(f[key] if f[key] is not None else float("nan") for f in fs)

        print(
            f"  {name}={value!s:<8} c={c:>4}: CPU {med('us'):5.1f} us/chunk | loop lag p99 whole run "
            f"{med('whole'):6.2f} ms, steady phase {med('steady'):6.2f} ms | TPOT {med('tpot_off'):+.2f}% "
            f"| errors {sum(f['failed'] for f in fs)} | per run: "
            + ", ".join(f"{f['us']:.0f} us/{f['whole']:.0f}/{f['steady'] or 0:.1f} ms" for f in fs)
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rates", default="20", help="tokens/s per stream, comma separated")
    p.add_argument("--levels", default="8,16,32,64,128,256,512")
    p.add_argument("--tokens", type=int, default=32, help="output tokens per request")
    p.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the server and this client on separate halves of the cores",
    )
    p.add_argument("--all-levels", action="store_true", help="run every level, even after two misses")
    p.add_argument("--rounds", type=int, default=2, help="requests per stream at each level")
    path = p.add_mutually_exclusive_group()
    path.add_argument("--sdk", action="store_true", help="the OpenAI SDK's typed chunks (ttft bench --sdk)")
    path.add_argument("--raw", action="store_true", help="the SDK's call, read as JSON (ttft bench --raw-stream)")
    path.add_argument("--httpx", action="store_true", help="the lean reader on httpx2 (as ttft ask)")
    p.add_argument(
        "--transport",
        choices=("aiohttp", "proto"),
        default=default_transport(),
        help="the lean reader's load client: aiohttp, or an asyncio Protocol + httptools (backends.transport.protocol)",
    )
    p.add_argument(
        "--versus", help="compare one option's values: transport=aiohttp,proto, ramp=0,2, spread=off,on or turns=1,3"
    )
    p.add_argument(
        "--spread",
        choices=("on", "off"),
        default="on",
        help="spread each level's openings and endings over loop passes (backends.load.spread), as ttft bench does",
    )
    p.add_argument("--runs", type=int, default=3, help="with --versus: runs of each value, alternated")
    p.add_argument("--ramp", type=float, default=0.0, help="seconds over which each level's streams start")
    p.add_argument("--turns", type=int, default=1, help="turns per conversation (ttft bench --turns)")
    p.add_argument(
        "--stalls",
        type=float,
        metavar="MS",
        help="sample the loop thread's stack whenever the loop is MS late (tests/benchmarks/loop_stalls.py)",
    )
    p.add_argument("--loop", choices=("auto", "asyncio"), default="auto", help="auto: uvloop when installed")
    a = p.parse_args()
    a.levels = [int(x) for x in a.levels.split(",")]
    os.environ.setdefault("TTFT_DATA_DIR", tempfile.mkdtemp(prefix="ttft-capacity-"))
    if a.loop == "asyncio":
        os.environ[event_loop.ENV] = "asyncio"
    factory = event_loop.loop_factory()
    summary = []
    figures: dict[tuple[float, int], dict] = {}
    for rate in (float(x) for x in a.rates.split(",")):
        port = free_port()
        srv = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.batching_server", "--port", str(port), "--slots", "100000",
             "--token-ms", str(1000 / rate), "--alpha", "0", "--prefill-ms", "20"],
            cwd=ROOT, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        cpus = sorted(os.sched_getaffinity(0))
        if a.pin and len(cpus) >= 2:  # the server on the first half of the cores, this client on the rest
            os.sched_setaffinity(srv.pid, cpus[: len(cpus) // 2])
            os.sched_setaffinity(0, cpus[len(cpus) // 2 :])
        try:
            wait_http(f"http://127.0.0.1:{port}/health")
            path = "SDK" if a.sdk else "raw" if a.raw else "lean on httpx2" if a.httpx else f"lean on {a.transport}"
            print(f"== {rate:g} tok/s per stream, {a.tokens} tokens per request, {path} path, "
                  f"{event_loop.loop_name(factory)} loop ==")  # fmt: skip
            if a.versus:
                versus(f"http://127.0.0.1:{port}/v1", rate, a, factory)
                continue
            best = event_loop.run(ramp(f"http://127.0.0.1:{port}/v1", rate, a, figures), factory)
            summary.append((rate, best))
        finally:
            srv.terminate()
            srv.wait(5)
    for rate, best in summary:
        print(f"most concurrent streams with loop lag p99 < 5 ms at {rate:g} tok/s per stream: {best}")
    f = figures.get((20.0, 256))
    if f is not None:
        print(
            f"target 256 streams at 20 tok/s: loop lag p99 {f['lag']:.2f} ms "
            f"(<= 5: {'yes' if f['lag'] <= 5 else 'no'}), "
            f"TPOT {f['tpot_off']:+.2f}% off schedule (within 1%: {'yes' if abs(f['tpot_off']) <= 1 else 'no'}), "
            f"errors {f['failed']}"
        )
    if figures:
        best_us = min(v["us"] for v in figures.values())
        top = max(figures)
        print(
            f"client CPU per chunk: {figures[top]['us']:.0f} us at {top[1]} streams, least {best_us:.0f} us "
            f"(target <= 50: {'yes' if figures[top]['us'] <= 50 else 'no'}); load average {os.getloadavg()[0]:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
