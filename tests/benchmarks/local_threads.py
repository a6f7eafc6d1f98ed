"""How many CPU threads should the local engine use by default, with the chat's UI running beside it?

Runs the real chat headless (Textual's ``run_test``) on ``-m local``, the engine in its own process as
``ttft chat`` runs it, once per thread count (1..N, interleaved over rounds so that a busy machine's
drift falls on every count alike). Each chat answers a few prompts; per thread count it prints

- TPOT (the record's, median of the turns) and the decode speed it means;
- the render lag (a token's arrival stamp -> the screen showing it; the chat's own p50/p95 per turn);
- the UI loop's lateness: a 20 ms timer in the app, how late each tick ran while the answer streamed
  (p95, max): what a keypress would wait for;
- the load average at the start of each run, since the machine may be shared.

More threads decode faster only while they have cores to themselves: the UI process paints every
frame on one of them, and a decode thread that loses its core stalls the whole step (llama.cpp's
threads wait for each other). The default in ``backends.local.engine.default_threads`` comes from
this table.

    python tests/benchmarks/local_threads.py [--max-threads N | --counts 1,2,4,8] [--rounds 2] [--turns 3] [--tokens 96]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))

from ttft.telemetry.settings import TurnSettings

PROMPTS = (
    "Explain in a paragraph why the sky is blue.",
    "Write a short story about a lighthouse keeper.",
    "List the planets of the solar system with one fact each.",
    "Describe how a bicycle works.",
)
TICK_S = 0.02


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


async def one_chat(threads: int, turns: int, tokens: int) -> dict[str, Any]:
    from ttft.tui.chat.app import ChatApp

    from tests.support.tui_support import wait_until

    settings = TurnSettings(max_output_tokens=tokens, temperature=0.0, extra={"n_threads": threads})
    app = ChatApp("local", settings=settings, warm_up=True)
    ticks: list[float] = []
    streaming = {"on": False}
    last = {"t": 0.0}

    def tick() -> None:
        now = time.perf_counter()
        if streaming["on"] and last["t"]:
            ticks.append(max(0.0, (now - last["t"] - TICK_S) * 1000))
        last["t"] = now

    tpot: list[float] = []
    lag50: list[float] = []
    lag95: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        app.set_interval(TICK_S, tick)
        for i in range(turns + 1):  # the first loads the model (or waits for the warm-up's load): not counted
            app.query_one("#prompt").value = PROMPTS[i % len(PROMPTS)]
            streaming["on"] = i > 0
            last["t"] = 0.0
            await pilot.press("enter")
            await wait_until(
                pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy, timeout=300
            )
            streaming["on"] = False
            if i == 0:
                continue
            rec = app.chat.session.records[-1]
            lag = app.chat.drawn.lag_by_turn.get(rec.turn_index, {})
            if rec.metrics.tpot_ms is not None:
                tpot.append(rec.metrics.tpot_ms)
            if lag.get("paints"):
                lag50.append(lag["p50_ms"])
                lag95.append(lag["p95_ms"])
            used = (rec.server or {}).get("llama.cpp", {}).get("n_threads")
            assert used == threads, f"the engine ran {used} threads, not {threads}"
    return {"tpot": tpot, "lag50": lag50, "lag95": lag95, "ticks": ticks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--counts", help="the thread counts to run, e.g. 1,2,4,8 (default 1..--max-threads)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=96)
    args = ap.parse_args()
    os.environ.setdefault("TTFT_DATA_DIR", tempfile.mkdtemp(prefix="ttft-threads-"))
    os.environ.setdefault("TTFT_CONFIG_DIR", tempfile.mkdtemp(prefix="ttft-threads-cfg-"))
    counts = [int(c) for c in args.counts.split(",")] if args.counts else list(range(1, args.max_threads + 1))
    got: dict[int, dict[str, list[float]]] = {n: {"tpot": [], "lag50": [], "lag95": [], "ticks": []} for n in counts}
    loads: list[float] = []
    for r in range(args.rounds):
        order = counts if r % 2 == 0 else counts[::-1]
        for n in order:
            loads.append(os.getloadavg()[0])
            res = asyncio.run(one_chat(n, args.turns, args.tokens))
            for k, v in res.items():
                got[n][k] += v
            print(f"round {r + 1} threads {n}: TPOT {statistics.median(res['tpot']):.1f} ms", file=sys.stderr)
    print(f"{os.cpu_count()} logical CPUs; load average at each run's start {min(loads):.1f}-{max(loads):.1f}")
    print(f"{args.rounds} rounds x {args.turns} turns x {args.tokens} tokens per thread count; chat UI beside it")
    print(
        f"{'threads':>7} | {'TPOT p50':>9} | {'tok/s':>6} | {'render lag p50/p95':>19} | {'UI tick late p95/max':>21}"
    )
    for n in counts:
        g = got[n]
        tp = statistics.median(g["tpot"])
        lag = f"{statistics.median(g['lag50']):.0f} / {statistics.median(g['lag95']):.0f} ms"
        late = f"{pct(g['ticks'], 0.95):.0f} / {max(g['ticks'], default=float('nan')):.0f} ms"
        print(f"{n:>7} | {tp:>6.1f} ms | {1000 / tp:>6.1f} | {lag:>19} | {late:>21}")


if __name__ == "__main__":
    main()
