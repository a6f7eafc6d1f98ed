"""``ttft bench --cluster`` against one process, on the same loopback server with a known schedule.

    python tests/benchmarks/cluster_fidelity.py [--runs 3] [--concurrency 8] [--requests 40] [--tokens 32]

Everything runs inside a network namespace made here that holds only loopback (root: ``unshare -n``,
``ip link set lo up``; tests/support/netns.py): the batching fake (tests/fakes/batching_server.py, whose
TPOT at ``c`` streams is ``token_ms * (1 + alpha * (c - 1))``), a two-node Ray cluster held for the
runs (backends.load.cluster.local), and a watch sampling every socket in the namespace. The script
alternates ``ttft bench`` in one process with ``ttft bench --cluster ADDRESS`` (``--runs`` pairs), then
runs the issue's command once, ``--cluster local:2`` with its own cluster started and stopped.

Per run it prints TTFT p50, TPOT p50 and its distance from the schedule, output tokens/s, completed
requests, and the command's wall time (for the cluster: connecting, placing the drivers and starting
them included). Then the medians, the cluster/one-process ratios from the interleaved runs, what the
socket watch saw, and the machine's load average: other programs' CPU moves every wall-clock figure.
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fakes.batching_server import BatchingServer
from tests.support.netns import LoopbackNamespace, SocketWatch, why_not
from tests.support.paths import ROOT

TOKEN_MS, ALPHA, PREFILL_MS, PORT = 10.0, 0.05, 20.0, 8123


def run_bench(ns: LoopbackNamespace, out: Path, args: argparse.Namespace, *extra: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "ttft.tui.cli", "bench", "-m", "compat:batching-fake"]
    argv += ["--base-url", f"http://127.0.0.1:{PORT}/v1", "--concurrency", str(args.concurrency)]
    argv += ["--requests", str(args.requests), "--max-output-tokens", str(args.tokens), "--input-tokens", "16"]
    argv += ["--out", str(out), "--quiet", *extra]
    env = {**os.environ, "TTFT_DATA_DIR": str(out.parent / "data"), "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    done = ns.run(argv, env=env, timeout=600)
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"ttft bench {' '.join(extra)} exited {done.returncode}: {done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    level = summary["details"][0]
    return {
        "ttft": level["ttft_ms"]["p50"],
        "tpot": level["tpot_ms"]["p50"],
        "tok_s": level["output_throughput"],
        "completed": level["completed"],
        "requests": level["requests"],
        "wall": wall,
        "nodes": len((summary.get("cluster") or {}).get("nodes") or []),
    }


def line(name: str, r: dict[str, Any], schedule: float) -> str:
    return (
        f"{name:<22} TTFT p50 {r['ttft']:6.1f} ms  TPOT p50 {r['tpot']:6.2f} ms "
        f"({r['tpot'] - schedule:+.2f} vs schedule)  {r['tok_s']:6.1f} tok/s  "
        f"{r['completed']}/{r['requests']} done  {r['wall']:5.1f} s" + (f"  {r['nodes']} nodes" if r["nodes"] else "")
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="interleaved pairs (one process, cluster)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--requests", type=int, default=40)
    p.add_argument("--tokens", type=int, default=32)
    args = p.parse_args()
    if (why := why_not()) is not None:
        raise SystemExit(f"no loopback-only network namespace here ({why}): nothing is run off loopback instead")
    schedule = BatchingServer(slots=64, token_ms=TOKEN_MS, alpha=ALPHA, prefill_ms=PREFILL_MS)
    truth = schedule.expected(args.concurrency, args.tokens).tpot_ms
    print(f"schedule: TPOT {truth:.2f} ms at {args.concurrency} streams, prefill {PREFILL_MS:g} ms")
    with LoopbackNamespace() as ns, tempfile.TemporaryDirectory(prefix="ttft-cluster-bench-") as tmp:
        assert ns.interfaces() == ["lo"]
        flags = ["--token-ms", str(TOKEN_MS), "--alpha", str(ALPHA), "--prefill-ms", str(PREFILL_MS)]
        fake = ns.popen(
            [sys.executable, "-m", "tests.fakes.batching_server", "--port", str(PORT), "--slots", "64", *flags],
            stdout=subprocess.PIPE,
        )
        assert fake.stdout is not None and "batching fake on" in fake.stdout.readline()
        t0 = time.monotonic()
        holder = ns.popen(
            [sys.executable, "-m", "ttft.backends.load.cluster.local", "2"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert holder.stdout is not None
        address = json.loads(holder.stdout.readline())["address"]
        print(f"two-node cluster started in {time.monotonic() - t0:.1f} s at {address}")
        watch = SocketWatch(ns)
        single: list[dict[str, Any]] = []
        cluster: list[dict[str, Any]] = []
        for k in range(args.runs):
            single.append(run_bench(ns, Path(tmp) / f"single-{k}", args))
            print(line(f"one process #{k + 1}", single[-1], truth), flush=True)
            cluster.append(run_bench(ns, Path(tmp) / f"cluster-{k}", args, "--cluster", address))
            print(line(f"--cluster #{k + 1}", cluster[-1], truth), flush=True)
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
        local = run_bench(ns, Path(tmp) / "local", args, "--cluster", "local:2")
        print(line("--cluster local:2", local, truth))
        seen = watch.stop()

    def med(rs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    print()
    for name, rs in (("one process", single), ("--cluster", cluster)):
        print(
            f"median {name:<12} TTFT p50 {med(rs, 'ttft'):.1f} ms, TPOT p50 {med(rs, 'tpot'):.2f} ms "
            f"({med(rs, 'tpot') - truth:+.2f} vs schedule), {med(rs, 'tok_s'):.1f} tok/s, wall {med(rs, 'wall'):.1f} s"
        )
    ratios = {
        key: statistics.median(c[key] / s[key] for s, c in zip(single, cluster, strict=True))
        for key in ("ttft", "tpot", "tok_s")
    }
    print(
        "cluster / one process (median of the interleaved pairs): "
        + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items())
    )
    print(
        f"socket watch: {seen.samples} samples, {seen.sockets} sockets ({seen.remotes} connected) of "
        f"{', '.join(seen.processes)}; off loopback: {seen.off_loopback or 'none'}"
    )
    print(
        "load average (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
