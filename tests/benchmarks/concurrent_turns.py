"""50 turns at once from the Python API against ``ttft bench`` against a raw aiohttp client, in one run.

    python tests/benchmarks/concurrent_turns.py [--users 50] [--rounds 3] [--first-token-ms 30]
        [--no-log] [--sdk] [--in-process]

One loopback fake server (tests/fakes/server.py, in a process of its own on 127.0.0.1; ``--in-process``:
on a thread of this one, sharing its GIL, as a notebook that starts the fake itself) sends its first
token ``--first-token-ms`` after each request arrives, then 16 tokens 5 ms apart. ``--sdk``: gather's
turns read with the SDK (``sdk=True``). Each round measures,
in this order (rotated each round, so a drifting machine favours no client):

- ``gather``: ``asyncio.gather`` over ``--users`` ``api.arun_turn`` calls on a fresh ``asyncio.run`` loop
  (its shared client made by the first turn: every connection new), then ``gather warm``: the same again
  on that loop, its pool warm (a notebook's second cell);
- ``bench``: ``api.run_bench`` at ``Users(--users)``, ``--users`` requests after its 2 warm-up requests;
- ``raw aiohttp``: one ``aiohttp.ClientSession``, ``--users`` streamed POSTs at once, TTFT from just
  before the POST to the first chunk with content (no records, no ttft).

Prints TTFT p50/p90 per client (the median over the rounds, min-max beside it), the gather turns'
``metrics.loop_lag_ms`` p50 and how many of them put lag into ``wait_ms.client_lag``. Goal (issue 42):
gather's p50 within 10 ms of bench's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.backends import api  # noqa: E402
from ttft.backends.local.llama_server import free_port  # noqa: E402
from ttft.telemetry.metrics import percentiles  # noqa: E402

from tests.fakes.batching_server import wait_http  # noqa: E402
from tests.fakes.schedule import Schedule  # noqa: E402
from tests.fakes.server import FakeServer  # noqa: E402

MODEL = "compat:fake-model"
LOG = True  # as a notebook calls it: each turn logged (to a temporary data dir); --no-log: log=False
SDK = False


def _p(values: list[float]) -> tuple[float, float]:
    p = percentiles(values)
    assert p.p50 is not None and p.p90 is not None
    return p.p50, p.p90


async def _gather(target: api.Target, users: int, tag: str) -> list[api.TurnRecord]:
    return list(await asyncio.gather(*(api.arun_turn(target, f"{tag} {i}", log=LOG, sdk=SDK) for i in range(users))))


def gather_rows(target: api.Target, users: int, rnd: int) -> dict[str, tuple[list[float], list[api.TurnRecord]]]:
    async def main() -> tuple[list[api.TurnRecord], list[api.TurnRecord]]:
        cold = await _gather(target, users, f"cold {rnd}")
        warm = await _gather(target, users, f"warm {rnd}")
        return cold, warm

    cold, warm = asyncio.run(main())
    return {
        "gather": ([r.metrics.ttft_ms for r in cold if r.metrics.ttft_ms is not None], cold),
        "gather warm": ([r.metrics.ttft_ms for r in warm if r.metrics.ttft_ms is not None], warm),
    }


def bench_row(target: api.Target, users: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        plan = api.bench_plan(target, levels=[api.Users(users)], requests=users, warmup=2, out=Path(tmp) / "b")
        result = api.run_bench(plan)
        recs = [r for r in result.records() if not r["extra"]["bench"].get("warmup")]
    return [r["metrics"]["ttft_ms"] for r in recs if r["metrics"]["ttft_ms"] is not None]


def raw_row(base_url: str, users: int, rnd: int) -> list[float]:
    import aiohttp

    async def one(session: aiohttp.ClientSession, i: int) -> float | None:
        body = {
            "model": "fake-model",
            "messages": [{"role": "user", "content": f"raw {rnd} {i}"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        t0 = time.perf_counter()
        async with session.post(f"{base_url}/chat/completions", json=body) as resp:
            async for line in resp.content:
                if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                    continue
                chunk = json.loads(line[6:])
                delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content") or delta.get("reasoning_content"):
                    ttft = (time.perf_counter() - t0) * 1000
                    async for _ in resp.content:  # read to the end, as the other clients do
                        pass
                    return ttft
        return None

    async def main() -> list[float]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            got = await asyncio.gather(*(one(session, i) for i in range(users)))
        return [t for t in got if t is not None]

    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--first-token-ms", type=float, default=30.0)
    ap.add_argument("--no-log", action="store_true", help="gather's turns with log=False")
    ap.add_argument("--sdk", action="store_true", help="gather's turns with sdk=True")
    ap.add_argument("--in-process", action="store_true", help="the fake server on a thread of this process")
    args = ap.parse_args()
    global LOG, SDK
    LOG, SDK = not args.no_log, args.sdk
    data = tempfile.TemporaryDirectory()
    os.environ["TTFT_DATA_DIR"] = data.name  # the turns' session logs, never the user's
    os.environ.setdefault("OPENAI_API_KEY", "sk-fake")
    port = free_port()
    srv: subprocess.Popen[bytes] | FakeServer
    if args.in_process:
        srv = FakeServer(Schedule(first_token_ms=args.first_token_ms, token_ms=5, visible_tokens=16), port=port).start()
    else:
        srv = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes", "--port", str(port), "--first-token-ms", str(args.first_token_ms),
             "--token-ms", "5", "--reasoning-tokens", "0", "--visible-tokens", "16"],
            cwd=ROOT, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_http(f"{base_url}/models")
        target = api.resolve(MODEL, base_url)
        p50s: dict[str, list[float]] = {}
        p90s: dict[str, list[float]] = {}
        lags: list[float] = []
        moved = total = 0
        for rnd in range(args.rounds):
            steps: list[Callable[[], dict[str, list[float]]]] = []

            def gather_step(rnd: int = rnd) -> dict[str, list[float]]:
                nonlocal moved, total
                rows = gather_rows(target, args.users, rnd)
                for _, recs in rows.values():
                    for r in recs:
                        total += 1
                        # getattr: the same script measures a tree from before these fields
                        lags.append(getattr(r.metrics, "loop_lag_ms", None) or 0.0)
                        moved += getattr(r.metrics.wait_ms, "client_lag", 0.0) > 0
                return {k: v[0] for k, v in rows.items()}

            steps = [
                gather_step,
                lambda: {"bench": bench_row(target, args.users)},
                lambda rnd=rnd: {"raw aiohttp": raw_row(base_url, args.users, rnd)},  # type: ignore[misc]
            ]
            steps = steps[rnd % 3 :] + steps[: rnd % 3]
            for step in steps:
                for name, ttfts in step().items():
                    p50, p90 = _p(ttfts)
                    p50s.setdefault(name, []).append(p50)
                    p90s.setdefault(name, []).append(p90)
        print(
            f"{args.users} concurrent turns, first token at {args.first_token_ms:.0f} ms, {args.rounds} rounds; "
            f"gather's turns: log={LOG}, sdk={SDK}; server {'in this process' if args.in_process else 'a process'}"
        )
        print(f"{'client':<14}{'TTFT p50 ms':>14}{'(min-max)':>16}{'TTFT p90 ms':>14}{'(min-max)':>16}")
        for name in ("gather", "gather warm", "bench", "raw aiohttp"):
            a, b = p50s[name], p90s[name]
            print(
                f"{name:<14}{statistics.median(a):>14.1f}{f'({min(a):.1f}-{max(a):.1f})':>16}"
                f"{statistics.median(b):>14.1f}{f'({min(b):.1f}-{max(b):.1f})':>16}"
            )
        lag = percentiles(lags)
        print(
            f"gather turns: loop_lag_ms p50 {lag.p50:.1f}, p90 {lag.p90:.1f}; "
            f"{moved} of {total} put lag in wait_ms.client_lag"
        )
        gap = statistics.median(p50s["gather"]) - statistics.median(p50s["bench"])
        print(f"gather p50 - bench p50: {gap:+.1f} ms (goal: within 10 ms)")
    finally:
        if isinstance(srv, FakeServer):
            srv.stop()
        else:
            srv.terminate()
            srv.wait(10)
        data.cleanup()


if __name__ == "__main__":
    main()
