"""What ``--server-metrics`` costs the load generator: a read's CPU, and the loop lag beside a level.

    python tests/benchmarks/server_metrics_cost.py [--streams 64,256] [--runs 3] [--histograms 30]

1. One read's parse: an endpoint text shaped like vLLM's (its gauges and counters, and ``--histograms``
   histograms of 30 buckets: 30 make about 80 KB, as a vLLM server with one model), parsed as the
   scraper does (``telemetry.server.gauges.parse``: the mapped lines kept by one regex, then
   prometheus-client's parser) against prometheus-client's parser on the whole text. Medians of this
   thread's CPU time.
2. The level: the gauged fake (tests/fakes/gauged_server.py: the batching fake with /metrics) runs in a
   SEPARATE process with unlimited slots at 20 tokens/s per stream, so the truth is TPOT = 50 ms. This
   process runs ``ttft bench``'s level (backends.load.runner.LoadRunner, the lean reader on its default
   transport and event loop) of ``c`` streams, with the scraper beside it (reading every 250 ms) and
   without, interleaved ``--runs`` times. Printed per run and as medians: event-loop lag p50/p99, client
   CPU, TPOT p50 against the truth, the reads taken.

The machine is shared and noisy: compare the two columns of one run, not figures across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.backends.load import event_loop  # noqa: E402
from ttft.backends.load.driver import LoadConfig  # noqa: E402
from ttft.backends.load.runner import BackendSpec, LoadRunner  # noqa: E402
from ttft.backends.load.scrape import LevelScraper  # noqa: E402
from ttft.backends.providers.lean.transport import default_transport  # noqa: E402
from ttft.backends.transport.prometheus import MetricsEndpoint  # noqa: E402
from ttft.telemetry.bench.aggregate import aggregate_level  # noqa: E402
from ttft.telemetry.bench.requests import read_bench  # noqa: E402
from ttft.telemetry.server import gauges  # noqa: E402

from tests.fakes.batching_server import free_port, wait_http  # noqa: E402
from tests.fakes.gauged_server import GaugedServer  # noqa: E402

TOKEN_MS = 50.0
TOKENS = 32


def parse_cost(histograms: int) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    text = GaugedServer(histograms=histograms).metrics_text()

    def timed(fn: object, n: int) -> float:
        """Median CPU time of this thread (not wall time: other programs' share of the cores is left out)."""
        out = []
        for _ in range(n):
            t = time.thread_time_ns()
            fn()  # type: ignore[operator]
            out.append((time.thread_time_ns() - t) / 1e3)
        return statistics.median(out)

    kept = timed(lambda: gauges.parse(text), 200)
    whole = timed(lambda: [list(f.samples) for f in text_string_to_metric_families(text)], 20)
    print(f"endpoint text: {len(text) / 1024:.0f} KB, {text.count(chr(10))} lines ({histograms} histograms)")
    print(f"  parse as the scraper does (kept lines): median {kept:,.0f} us")
    print(f"  prometheus-client on the whole text:    median {whole:,.0f} us ({whole / kept:.0f}x)")
    print(f"  at 4 reads/s: {kept * 4 / 1e4:.2f}% of one core for the kept lines")


async def one_level(base: str, streams: int, scrape: bool) -> dict[str, object]:
    cfg = LoadConfig(levels=(streams,), requests=streams * 2, warmup=0, input_tokens=32, max_output_tokens=TOKENS)
    scraper = None
    if scrape:
        endpoint = MetricsEndpoint(base.removesuffix("/v1") + "/metrics")
        await asyncio.to_thread(endpoint.probe)
        scraper = LevelScraper(endpoint)
    spec = BackendSpec("compat:gauged-fake", base, options={"lean": True}, aiohttp=True, transport=default_transport())
    async with LoadRunner(cfg, spec=spec, scraper=scraper) as runner:
        res = await runner.level(0)
    a = aggregate_level(read_bench(res.records).turns, level=streams, client=res.client)
    lag = res.client["loop_lag_ms"]
    return {
        "lag_p50": lag["p50"],
        "lag_p99": lag["p99"],
        "cpu": res.client["cpu_percent"],
        "tpot_p50": a["tpot_ms"]["p50"],
        "errors": a["failed"],
        "reads": len(res.gauges.during) if res.gauges else 0,
        "loop": event_loop.running(),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", default="64,256")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--histograms", type=int, default=30)
    a = p.parse_args()
    parse_cost(a.histograms)
    port = free_port()
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.gauged_server", "--port", str(port), "--slots", "100000",
         "--token-ms", str(TOKEN_MS), "--prefill-ms", "20", "--histograms", str(a.histograms)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}/v1"
        wait_http(f"http://127.0.0.1:{port}/health")
        print(f"\nload: the fake in its own process, TPOT truth {TOKEN_MS:.0f} ms, "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
        for streams in (int(x) for x in a.streams.split(",")):
            rows: dict[bool, list[dict[str, object]]] = {False: [], True: []}
            for run in range(a.runs):
                for scrape in (False, True) if run % 2 == 0 else (True, False):  # interleaved, order alternated
                    r = event_loop.run(one_level(base, streams, scrape), event_loop.loop_factory())
                    rows[scrape].append(r)
                    print(
                        f"  c={streams:<4} {'scraped' if scrape else 'plain  '} run {run + 1}: lag p50 "
                        f"{r['lag_p50']:.2f} p99 {r['lag_p99']:.2f} ms, cpu {r['cpu']:.0f}%, TPOT p50 "
                        f"{r['tpot_p50']:.2f} ms, {r['reads']} reads, {r['errors']} errors ({r['loop']})"
                    )

            def med(key: str, scrape: bool, rows: dict[bool, list[dict[str, object]]] = rows) -> float:
                return statistics.median(float(r[key]) for r in rows[scrape])  # type: ignore[arg-type]

            print(f"c={streams}: medians of {a.runs} interleaved runs   plain   scraped")
            for key, label in (("lag_p99", "loop lag p99 ms"), ("cpu", "client CPU %"), ("tpot_p50", "TPOT p50 ms")):
                print(f"  {label:<24} {med(key, False):>8.2f} {med(key, True):>8.2f}")
    finally:
        fake.terminate()
        fake.wait(10)


if __name__ == "__main__":
    main()
