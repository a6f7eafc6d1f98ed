"""Does the compare screen disturb what it measures? 4 panes, each streaming 500 tokens/s, at once.

The same figures as ``ui_fidelity.py`` (the single chat), for the compare screen. A loopback
fake server runs in its own process (no shared GIL) and streams every request on a known
schedule; four OpenAI Chat Completions backends (the real SDK) point at it, one model name
per pane so each server-side request can be matched to its pane. The real CompareApp runs
headless, releases the four requests at the same instant on its stream thread, and paints all
four panes, the race view and the summary. We print, over all turns:

- TTFT error: |measured TTFT - scheduled first token|, per turn;
- gap error: |measured inter-chunk gap - scheduled gap|, every consecutive pair;
- stamp error: |chunk stamp - (server's request arrival + scheduled offset)| (both processes
  read CLOCK_MONOTONIC);
- sent -> server read: from our ``sent`` stamp to the server having read the request (the
  schedule starts there, so this transit is part of the TTFT error);
- start skew: spread of the four first sends after the barrier;
- render lag p50/p95 (arrival -> on screen) per pane, and whether a backlog grew;
- CPU: the process (UI + stream thread) and the stream thread alone.

A headless baseline (the same four streams through CompareRunner, no UI) shows what the UI adds.

    python tests/benchmarks/compare_fidelity.py [--panes 4] [--tokens-per-s 500] [--tokens 1000] [--prompts 3]
        [--in-process]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ttft.backends.compare.runner import ComparePane, CompareRunner
from ttft.telemetry.metrics import percentiles
from ttft.telemetry.record import chunk_times_ms

TARGETS = "targets (as the single chat): TTFT and gap error median <= 1 ms, p99 <= 5 ms; render lag p95 <= 100 ms"


def _serve(conn: Any, schedule_kw: dict[str, Any]) -> None:
    from tests.fakes import FakeServer, Schedule

    srv = FakeServer(Schedule(**schedule_kw)).start()
    conn.send(srv.openai_base_url)
    while True:
        cmd = conn.recv()
        if cmd == "requests":
            conn.send(
                [
                    (r.received_ns, (r.body or {}).get("model") if isinstance(r.body, dict) else None)
                    for r in srv.requests
                    if r.path.endswith("completions")
                ]
            )
        elif cmd == "stop":
            srv.stop()
            conn.send("ok")
            return


def make_backend(base_url: str, model: str) -> Any:
    from ttft.backends.providers.openai_chat import OpenAIChatBackend

    return OpenAIChatBackend(model, provider="fake", base_url=base_url, api_key="sk-bench")


def errors(records: list[dict[str, Any]], arrivals: dict[str, list[int]], sched_ms: list[float]) -> dict[str, list]:
    """``records`` carry ``_sent_ns``; ``arrivals[model]`` are the server's request stamps in order."""
    seen: dict[str, int] = {}
    out: dict[str, list[float]] = {"ttft": [], "gap": [], "stamp": [], "transit": []}
    for rec in records:
        k = seen.get(rec["model"], 0)
        seen[rec["model"]] = k + 1
        arrived = arrivals[rec["model"]][k]
        out["transit"].append((arrived - rec["_sent_ns"]) / 1e6)  # our `sent` stamp -> the server has the request
        chunks = chunk_times_ms(rec)  # ms from sent, any log schema
        if rec["metrics"]["ttft_ms"] is not None:
            out["ttft"].append(abs(rec["metrics"]["ttft_ms"] - sched_ms[0]))
        for (a, b), (sa, sb) in zip(pairwise(chunks), pairwise(sched_ms), strict=False):
            out["gap"].append(abs((b - a) - (sb - sa)))
        for c, s in zip(chunks, sched_ms, strict=False):
            out["stamp"].append(abs((rec["_sent_ns"] + c * 1e6) - (arrived + s * 1e6)) / 1e6)
    return out


def line(name: str, vals: list[float]) -> str:
    if not vals:
        return f"  {name:<22} (none)"
    p = percentiles(vals)
    return f"  {name:<22} median {p.p50:7.3f} ms   p99 {p.p99:7.3f} ms   max {p.max:7.3f} ms   (n={len(vals)})"


def with_sent(record: Any) -> dict[str, Any]:
    d = record.to_dict()
    d["_sent_ns"] = record.timestamps.sent
    return d


async def run_headless(base_url: str, models: list[str], prompts: int) -> tuple[list[dict[str, Any]], list[float]]:
    panes = [ComparePane(make_backend(base_url, m), m) for m in models]
    runner = CompareRunner(panes)
    out: list[dict[str, Any]] = []
    skew: list[float] = []
    for i in range(prompts):
        res = await runner.run_prompt(f"prompt {i}")
        skew += res.start_skew_ms
        out += [with_sent(r) for recs in res.records for r in recs]
    await runner.aclose()
    return out, skew


async def run_ui(
    base_url: str, models: list[str], prompts: int, size: tuple[int, int], isolated: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[float], dict[str, float]]:
    from ttft.tui.compare.app import CompareApp

    if isolated:  # what `ttft compare` does: each backend in its own process
        from ttft.backends.ask.isolated import ProcessBackend

        backends = [ProcessBackend(f"compat:{m}", base_url) for m in models]
    else:
        backends = [make_backend(base_url, m) for m in models]
    app = CompareApp(backends, comparison_id="cmp-bench", session_id="bench")
    proc = psutil.Process()
    records: list[dict[str, Any]] = []
    skew: list[float] = []
    async with app.run_test(size=size) as pilot:
        tid = app.stream._thread.native_id

        def cpu() -> tuple[float, float]:
            t = proc.cpu_times()
            th = next((x.user_time + x.system_time for x in proc.threads() if x.id == tid), 0.0)
            return t.user + t.system, th

        wall0, (p0, s0) = time.perf_counter(), cpu()
        for i in range(prompts):
            app.query_one("#prompt").value = f"prompt {i}: write a long answer"  # type: ignore[attr-defined]
            await pilot.press("enter")
            for _ in range(6000):
                await pilot.pause(0.01)
                if len(app.results) == i + 1 and not app.in_flight:
                    break
            res, _ = app.results[-1]
            skew += res.start_skew_ms
            records += [with_sent(r) for recs in res.records for r in recs]
        (p1, s1), wall = cpu(), time.perf_counter() - wall0
        lags = [lag for v in app.views for lag in v.lag_history]
    return records, lags, skew, {"process": (p1 - p0) / wall, "stream": (s1 - s0) / wall, "wall": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--panes", type=int, default=4)
    ap.add_argument("--tokens-per-s", type=float, default=500.0, help="per pane")
    ap.add_argument("--tokens", type=int, default=1000, help="visible tokens per turn")
    ap.add_argument("--first-token-ms", type=float, default=200.0)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--in-process", action="store_true", help="backends in the UI process (TTFT_IN_PROCESS=1)")
    args = ap.parse_args()
    os.environ["TTFT_DATA_DIR"] = tempfile.mkdtemp(prefix="ttft-bench-")
    from tests.fakes import Schedule

    schedule_kw = {
        "first_token_ms": args.first_token_ms,
        "token_ms": 1000.0 / args.tokens_per_s,
        "visible_tokens": args.tokens,
        "reasoning_tokens": 0,
    }
    sched_ms = [a for a, _, _ in Schedule(**schedule_kw).chunks()]
    models = [f"pane-{i}" for i in range(args.panes)]
    parent, child = mp.Pipe()
    server = mp.get_context("spawn").Process(target=_serve, args=(child, schedule_kw), daemon=True)
    server.start()
    base_url = parent.recv()
    w, h = (int(x) for x in args.size.split("x"))

    def arrivals() -> dict[str, list[int]]:
        parent.send("requests")
        by: dict[str, list[int]] = {}
        for received, model in parent.recv():
            by.setdefault(model, []).append(received)
        return by

    print(
        f"compare_fidelity: {args.panes} panes x {args.prompts} prompts x {args.tokens} tokens at "
        f"{args.tokens_per_s:.0f} tokens/s each ({args.panes * args.tokens_per_s:.0f} tokens/s in all), first token at "
        f"{args.first_token_ms:.0f} ms, app at {w}x{h}; {os.cpu_count()} CPUs; load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    headless, skew0 = asyncio.run(run_headless(base_url, models, args.prompts))
    e0 = errors(headless, arrivals(), sched_ms)
    a0 = arrivals()
    offsets = {m: len(v) for m, v in a0.items()}
    ui, lags, skew1, cpu = asyncio.run(run_ui(base_url, models, args.prompts, (w, h), not args.in_process))
    a1 = {m: v[offsets.get(m, 0) :] for m, v in arrivals().items()}
    e1 = errors(ui, a1, sched_ms)
    parent.send("stop")
    parent.recv()

    print(f"\nheadless baseline (CompareRunner, {args.panes} parallel streams, no UI):")
    for k in ("ttft", "gap", "stamp"):
        print(line(f"{k} error", e0[k]))
    print(line("sent -> server read", e0["transit"]))
    print(line("start skew", skew0))
    where = "backends in the UI process" if args.in_process else "each backend in its own process (the default)"
    print(f"\nwith the compare screen painting every pane, {where}:")
    for k in ("ttft", "gap", "stamp"):
        print(line(f"{k} error", e1[k]))
    print(line("sent -> server read", e1["transit"]))
    print(line("start skew", skew1))
    p50s = [x["p50_ms"] for x in lags if x.get("p50_ms") is not None]
    p95s = [x["p95_ms"] for x in lags if x.get("p95_ms") is not None]
    paints = percentiles([x["paints"] for x in lags]).p50 or 0
    print(
        f"  render lag             p50 {percentiles(p50s).p50 or 0:.1f} ms   p95 {max(p95s, default=0):.1f} ms "
        f"(worst pane-turn)   paints/turn {paints:.0f}"
    )
    print(f"  render lag p95 by pane-turn {', '.join(f'{x:.0f}' for x in p95s)} ms")
    growth = [x.get("lag_growth") for x in lags]
    backlog = max((x.get("backlog_max") or 0 for x in lags), default=0)
    print(
        f"  backlog                max chunks unpainted at a paint {backlog}"
        f"; lag 2nd half / 1st half per pane-turn {', '.join(f'{g:.2f}' if g else '-' for g in growth)}"
    )
    print(
        f"  CPU                    process {100 * cpu['process']:.0f}% of a core (UI + stream), stream thread "
        f"{100 * cpu['stream']:.0f}%, over {cpu['wall']:.1f} s; turns {len(ui)}, "
        f"ok {sum(r['status'] == 'ok' for r in ui)}"
    )
    print(TARGETS)
    p_t, p_g = percentiles(e1["ttft"]), percentiles(e1["gap"])
    checks = [
        ("TTFT error median <= 1 ms", p_t.p50 or 0, 1),
        ("TTFT error p99 <= 5 ms", p_t.p99 or 0, 5),
        ("gap error median <= 1 ms", p_g.p50 or 0, 1),
        ("gap error p99 <= 5 ms", p_g.p99 or 0, 5),
        ("render lag p95 <= 100 ms", max(p95s, default=0), 100),
    ]
    for name, value, limit in checks:
        print(f"  {'met   ' if value <= limit else 'MISSED'} {name}: {value:.1f} ms")
    print("verdict:", "within targets" if all(v <= lim for _, v, lim in checks) else "OUTSIDE targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
