"""Each ``ttft bench`` workload against the real llama-server, one figure each (docs/bench/workloads.md).

    python tests/benchmarks/workloads_llama.py [--slots 2] [--only lengths,prefix,turns,trace,session]

Every run is ``ttft bench -m local-server --ignore-eos`` (the server started by the bench itself,
``--metrics`` and its prompt cache on, as a user runs it), and the figure is read from its
summary.json:

- lengths: ``--input-tokens 128:32 --output-tokens 8-24``: the spread drawn, and TTFT against it;
- prefix: ``--prefix-tokens 256 --prefixes 2``: cached tokens and TTFT of hits against misses;
- turns: ``--turns 4``: TTFT, the server's prefill and the input tokens by turn;
- trace: a Mooncake trace of 16 requests written here (shared 512-token blocks, bursts): how late each
  request left against its offset, and the cache the shared blocks found;
- session: a ttft session log made here with ``ttft ask`` and replayed with ``--speedup 4``.

Prints the machine's load average beside each figure: this project's machines are shared, and every
TTFT here moves with what else runs.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def ttft(*args: str, env: dict[str, str]) -> int:
    run = subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", *args], cwd=ROOT, env=env, check=False, stdout=subprocess.DEVNULL
    )
    return run.returncode


def bench(out: Path, a: argparse.Namespace, env: dict[str, str], *flags: str) -> dict[str, Any]:
    ttft(
        "bench", "-m", "local-server", "--slots", str(a.slots), "--threads", str(a.threads), "--ignore-eos",
        "--out", str(out), "--quiet", *flags, env=env,
    )  # fmt: skip
    return json.loads((out / "summary.json").read_text())


def load() -> str:
    return f"load average {os.getloadavg()[0]:.2f}"


def f(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def lengths(tmp: Path, a: argparse.Namespace, env: dict[str, str]) -> None:
    s = bench(tmp / "lengths", a, env, "--concurrency", "2", "--requests", "16", "--input-tokens", "128:32",
              "--output-tokens", "8-24")  # fmt: skip
    d = s["details"][0]
    ln = d["lengths"]
    print(
        f"lengths 128:32 / 8-24, c=2, 16 requests: input drawn {f(ln['input_tokens']['mean'])} +- "
        f"{f(ln['input_tokens']['std'])} (server counted {f(ln['input_tokens_sent']['mean'])} +- "
        f"{f(ln['input_tokens_sent']['std'])}), max_tokens {f(ln['output_tokens']['mean'])} +- "
        f"{f(ln['output_tokens']['std'])}, received {f(ln['output_tokens_received']['mean'])}; TTFT p50 "
        f"{f(d['ttft_ms']['p50'])} ms (min {f(d['ttft_ms']['min'])}, p90 {f(d['ttft_ms']['p90'])}), "
        f"TPOT p50 {f(d['tpot_ms']['p50'], 1)} ms; {load()}",
        flush=True,
    )


def prefix(tmp: Path, a: argparse.Namespace, env: dict[str, str]) -> None:
    s = bench(tmp / "prefix", a, env, "--concurrency", "2", "--requests", "12", "--prefix-tokens", "256",
              "--prefixes", "2", "--input-tokens", "32", "--max-output-tokens", "8")  # fmt: skip
    c = s["details"][0]["prefix_cache"]
    print(
        f"prefix 256 tokens x 2, 32 own, c=2, 12 requests: {c['hits']}/{c['requests']} hits, "
        f"{f(c['cached_input_tokens_mean'])} cached tokens per request; TTFT p50 hit {f(c['ttft_hit_ms']['p50'])} ms "
        f"vs miss {f(c['ttft_miss_ms']['p50'])} ms; {load()}",
        flush=True,
    )


def turns(tmp: Path, a: argparse.Namespace, env: dict[str, str]) -> None:
    s = bench(tmp / "turns", a, env, "--concurrency", "2", "--requests", "16", "--turns", "4", "--input-tokens",
              "64", "--max-output-tokens", "24")  # fmt: skip
    rows = s["details"][0]["by_turn"]
    print(f"turns 4, c=2, 16 requests (4 conversations), 64 new tokens and 24 answered per turn; {load()}")
    for t in rows:
        print(
            f"  turn {t['turn']}: TTFT p50 {f(t['ttft_ms']['p50'])} ms, server prefill p50 "
            f"{f(t['server_prefill_ms']['p50'])} ms, input {f(t['input_tokens']['p50'])} tokens of which "
            f"{f(t['cached_input_tokens']['p50'])} cached",
            flush=True,
        )


def write_trace(path: Path, n: int = 16) -> None:
    rng = random.Random(7)
    rows = []
    at = 0.0
    for i in range(n):
        at += rng.choice((0.0, 0.0, 50.0, 150.0, 400.0))  # bursts: several requests in the same ms
        shared = [0] if rng.random() < 0.7 else []  # most share a first block (a system prompt)
        own = [1000 + i]
        rows.append({"timestamp": at, "input_length": 512 * len(shared) + 100, "output_length": rng.randint(8, 24),
                     "hash_ids": shared + own})  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def trace(tmp: Path, a: argparse.Namespace, env: dict[str, str]) -> None:
    path = tmp / "mooncake.jsonl"
    write_trace(path)
    s = bench(tmp / "trace", a, env, "--trace", str(path), "--speedup", "1")
    d = s["details"][0]
    arr, c = d["arrivals"], d.get("prefix_cache") or {}
    print(
        f"Mooncake trace of {s['workload']['trace']['requests']} requests: sent late p50 "
        f"{f(arr['late_ms']['p50'], 2)} ms, p99 {f(arr['late_ms']['p99'], 2)} ms, max {f(arr['late_ms']['max'], 2)} ms "
        f"({arr['on_time_fraction']:.0%} within {arr['on_time_ms']:g} ms); cache hits {c.get('hits')}/"
        f"{c.get('requests')}, TTFT p50 {f(d['ttft_ms']['p50'])} ms; {load()}",
        flush=True,
    )


def session(tmp: Path, a: argparse.Namespace, env: dict[str, str]) -> None:
    from ttft.backends.local.llama_server import LlamaServer, default_model

    with LlamaServer(default_model(), slots=a.slots, threads=a.threads) as srv:
        for prompt in ("Name three rivers.", "Which is the longest?", "Say why, in one sentence."):
            ttft("ask", "-m", f"compat:{srv.model_name}", "--base-url", srv.base_url, "--session", "me",
                 "--max-output-tokens", "24", prompt, env=env)  # fmt: skip
    log = Path(env["TTFT_DATA_DIR"]) / "sessions" / "me.jsonl"
    s = bench(tmp / "session", a, env, "--trace", str(log), "--speedup", "4")
    d = s["details"][0]
    arr = d["arrivals"]
    print(
        f"session log of 3 turns replayed at 4x: sent late max {f(arr['late_ms']['max'], 2)} ms, TTFT p50 "
        f"{f(d['ttft_ms']['p50'])} ms, input tokens sent {f(d['lengths']['input_tokens_sent']['mean'])} mean; "
        f"{load()}",
        flush=True,
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--slots", type=int, default=2)
    p.add_argument(
        "--threads", type=int, default=1, help="llama-server's -t (1: steadier than 2 on a shared 2-core machine)"
    )
    p.add_argument("--only", default="lengths,prefix,turns,trace,session")
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ttft-workloads-"))
    env = {**os.environ, "TTFT_DATA_DIR": str(tmp / "data")}
    print(f"results under {tmp}; {load()}", flush=True)
    for name in a.only.split(","):
        {"lengths": lengths, "prefix": prefix, "turns": turns, "trace": trace, "session": session}[name](tmp, a, env)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
