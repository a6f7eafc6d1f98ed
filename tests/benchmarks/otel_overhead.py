"""What the live OpenTelemetry push costs, and where; prints the figures.

    python tests/benchmarks/otel_overhead.py [--runs 7]

1. The hot path: what a finished turn costs its own thread when the push is on (a queue put),
   per call, median over 2,000 turns.
2. The export thread's work per turn (record -> span tree and histogram points through the SDK),
   for a 500-chunk answer, median over 200 turns.
3. Importing the SDK and the OTLP/HTTP exporters in a fresh process (why nothing imports them
   when no endpoint is set).
4. ``ttft ask`` against the loopback fake server, interleaved runs: no endpoint, a loopback
   collector, a dead collector (nothing listening). Reports the wall time of the process and
   the turn's own TTFT: the TTFT must not move, the wall time moves by the bounded exit flush.
5. ``ttft bench`` on the simulated batching server (8 users, 64 requests of 64 tokens), without and
   with a loopback collector, interleaved: TTFT and TPOT p50 and the client's own health (event-loop
   lag p99, CPU), since the export thread shares the interpreter with the streams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.backends.otel import push as otel  # noqa: E402
from ttft.backends.turn import new_recorder, run_turn  # noqa: E402

from tests.fakes import FakeServer, Schedule  # noqa: E402
from tests.fakes.otlp_receiver import OtlpReceiver  # noqa: E402
from tests.support.backend_util import make_request  # noqa: E402
from tests.support.compare_fakes import ScheduledBackend  # noqa: E402


def _record(chunks: int):  # type: ignore[no-untyped-def]
    backend = ScheduledBackend(ttft_s=0.0, gap_s=0.0, tokens=chunks, virtual_t0_ns=1_000_000_000)
    request = make_request()
    recorder = new_recorder(backend, request, session_id="b", turn_index=0)
    return asyncio.run(run_turn(backend, request, recorder))


def hot_path_and_export(rx: OtlpReceiver) -> None:
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = rx.url
    push = otel.install(eager=True)
    assert push is not None
    rec = _record(500)
    push.flush()
    costs = []
    for _ in range(2000):
        t0 = time.perf_counter_ns()
        push(rec)
        costs.append(time.perf_counter_ns() - t0)
        if push.unexported() > 500:
            push.flush()
    push.flush(30)
    print(f"1. sink call on the turn's thread: median {statistics.median(costs) / 1000:.1f} us, "
          f"p99 {sorted(costs)[int(len(costs) * 0.99)] / 1000:.1f} us (2,000 turns)")  # fmt: skip
    sdk = push._sdk
    assert sdk is not None
    d = rec.to_dict()
    work = []
    for _ in range(200):
        t0 = time.perf_counter_ns()
        sdk.emit(d, False)
        work.append(time.perf_counter_ns() - t0)
    print(f"2. export thread per turn (500 chunks: 1 span tree, 500 histogram points): "
          f"median {statistics.median(work) / 1e6:.2f} ms")  # fmt: skip
    otel.uninstall(10)
    del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]


def import_cost() -> None:
    code = (
        "import time; t=time.perf_counter(); "
        "import opentelemetry.sdk.trace, opentelemetry.sdk.metrics, "
        "opentelemetry.exporter.otlp.proto.http.trace_exporter, "
        "opentelemetry.exporter.otlp.proto.http.metric_exporter; "
        "print(time.perf_counter()-t)"
    )
    times = [float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(3)]
    ms = statistics.median(times) * 1000
    print(f"3. importing the SDK and the OTLP/HTTP exporters: median {ms:.0f} ms (3 processes)")


def ask_runs(runs: int) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    rx = OtlpReceiver().start()
    results: dict[str, list[tuple[float, float]]] = {"none": [], "collector": [], "dead collector": []}
    endpoints = {"none": None, "collector": rx.url, "dead collector": f"http://127.0.0.1:{dead}"}
    with (
        FakeServer(Schedule(first_token_ms=50, token_ms=5, visible_tokens=20)) as srv,
        tempfile.TemporaryDirectory() as d,
    ):
        for _ in range(runs):
            for name, url in endpoints.items():  # interleaved: load drifts hit every case alike
                env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
                env |= {"PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": d, "TTFT_CONFIG_DIR": d}
                if url:
                    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = url
                t0 = time.perf_counter()
                p = subprocess.run(
                    [sys.executable, "-m", "ttft.tui.cli", "ask", "--json", "-m", "compat:fake",
                     "--base-url", srv.openai_base_url, "hi"],
                    env=env, capture_output=True, text=True, cwd=ROOT, timeout=120,
                )  # fmt: skip
                wall = time.perf_counter() - t0
                rec = json.loads(p.stdout)
                results[name].append((wall, rec["metrics"]["ttft_ms"]))
    rx.stop()
    print(f"4. ttft ask, {runs} interleaved runs each (median wall of the process / median TTFT):")
    for name, vals in results.items():
        wall, ttft = statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals)
        print(f"   {name:15s} {wall:.2f} s / {ttft:.1f} ms")


def bench_runs(runs: int) -> None:
    from tests.fakes.batching_server import BatchingServer

    rx = OtlpReceiver().start()
    rows: dict[str, list[tuple[float, float, float, float]]] = {"no endpoint": [], "collector": []}
    with BatchingServer(slots=8, token_ms=5, alpha=0.3, prefill_ms=10) as server, tempfile.TemporaryDirectory() as d:
        for k in range(runs):
            for name in rows:
                env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
                env |= {"PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": d, "TTFT_CONFIG_DIR": d}
                if name == "collector":
                    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rx.url
                out = Path(d, f"{name}-{k}")
                subprocess.run(
                    [sys.executable, "-m", "ttft.tui.cli", "bench", "-m", "compat:batching-fake", "--base-url",
                     server.base_url, "--concurrency", "8", "--requests", "64", "--warmup", "2",
                     "--max-output-tokens", "64", "--out", str(out), "--quiet"],
                    env=env, capture_output=True, text=True, cwd=ROOT, timeout=300, check=True,
                )  # fmt: skip
                summary = json.loads((out / "summary.json").read_text())
                level, client = summary["levels"][0], summary["details"][0]["client"]
                rows[name].append(
                    (
                        level["median_ttft_ms"],
                        level["median_tpot_ms"],
                        client["loop_lag_ms"]["p99"],
                        client["cpu_percent"],
                    )
                )
    rx.stop()
    print(f"5. ttft bench, c=8, 64 x 64 tokens, {runs} interleaved runs each (medians):")
    print("   case            TTFT p50   TPOT p50   loop lag p99   client CPU")
    for name, vals in rows.items():
        ttft, tpot, lag, cpu = (statistics.median(v[i] for v in vals) for i in range(4))
        print(f"   {name:15s} {ttft:7.1f} ms {tpot:7.2f} ms {lag:9.1f} ms {cpu:9.0f} %")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    rx = OtlpReceiver().start()
    hot_path_and_export(rx)
    rx.stop()
    import_cost()
    ask_runs(args.runs)
    bench_runs(max(3, args.runs // 2))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
