"""How close to a trace's schedule ``ttft bench --trace`` sends, against the fake server in its own process.

    python tests/benchmarks/trace_arrivals.py [--requests 300] [--rate 40] [--burst 0.2] [--prompt 2000]

Writes a Mooncake trace of ``--requests`` requests at ``--rate``/s (exponential gaps; a share
``--burst`` of them in the same millisecond as the one before, as production traces have), prompts of
``--prompt`` tokens sharing their first block, then replays it (``--speedup 1``) against the batching
fake (tests/fakes/batching_server.py, unlimited slots, on the other half of the cores) and prints how
late each request left against its offset (its record's send against its schedule), with
the machine's load average. The issue's target: within 5 ms on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fakes.batching_server import free_port, wait_http  # noqa: E402


def write_trace(path: Path, a: argparse.Namespace) -> None:
    rng = random.Random(1)
    at = 0.0
    rows = []
    for i in range(a.requests):
        if i and rng.random() >= a.burst:
            at += rng.expovariate(a.rate) * 1000
        blocks = -(-a.prompt // 512)
        rows.append({"timestamp": round(at, 3), "input_length": a.prompt, "output_length": a.tokens,
                     "hash_ids": [0] + [1000 + i * blocks + b for b in range(1, blocks)]})  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--rate", type=float, default=40.0, help="requests/s")
    p.add_argument("--burst", type=float, default=0.2, help="share of requests sent with the one before")
    p.add_argument("--prompt", type=int, default=2000, help="prompt tokens")
    p.add_argument("--tokens", type=int, default=16, help="output tokens")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ttft-arrivals-"))
    trace = tmp / "trace.jsonl"
    write_trace(trace, a)
    port = free_port()
    srv = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.batching_server", "--port", str(port), "--slots", "100000",
         "--token-ms", "10", "--alpha", "0", "--prefill-ms", "20"],
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        os.sched_setaffinity(srv.pid, cpus[: len(cpus) // 2])
        os.sched_setaffinity(0, cpus[len(cpus) // 2 :])
    try:
        wait_http(f"http://127.0.0.1:{port}/health")
        out = tmp / "run"
        env = {**os.environ, "TTFT_DATA_DIR": str(tmp / "data")}
        cmd = [sys.executable, "-m", "ttft.tui.cli", "bench", "-m", "compat:fake", "--base-url",
               f"http://127.0.0.1:{port}/v1", "--trace", str(trace), "--out", str(out), "--quiet"]  # fmt: skip
        subprocess.run(cmd, cwd=ROOT, env=env, check=False, stdout=subprocess.DEVNULL)
        d = json.loads((out / "summary.json").read_text())["details"][0]
        late = d["arrivals"]["late_ms"]
        print(
            f"{a.requests} requests at {a.rate:g}/s ({a.burst:.0%} in bursts), {a.prompt}-token prompts: sent late "
            f"p50 {late['p50']:.2f} ms, p90 {late['p90']:.2f}, p99 {late['p99']:.2f}, max {late['max']:.2f}; "
            f"{d['arrivals']['on_time_fraction']:.0%} within {d['arrivals']['on_time_ms']:g} ms; loop lag p99 "
            f"{d['client']['loop_lag_ms']['p99']:.2f} ms; errors {d['failed']}; load average {os.getloadavg()[0]:.2f}"
        )
    finally:
        srv.terminate()
        srv.wait(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
