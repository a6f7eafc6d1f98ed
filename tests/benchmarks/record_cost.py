"""CPU of ttft's own record keeping per request and per chunk, with no network and no event loop.

    python tests/benchmarks/record_cost.py [--tokens 32]

client_capacity.py measures the whole client, but on a shared machine its CPU per chunk swings by
tens of microseconds between runs (how many chunks each loop wake-up finds depends on the load),
which hides changes of a few microseconds. This times the part that is ttft's alone, the same
way each run: a recorder fed one answer of ``--tokens`` chunks (events built as the lean reader
builds them, each passed through scrub_event as run_turn does), the record finished (metrics,
diagnosis) and turned into the ``ttft.turn`` dict. Best of 5 repeats. Then the finish of a bench's
records (``backends.finish``, no log) one by one (``finish_turn``) and in batches of 64
(``finish_turns``, the ITL percentiles of a batch in one numpy call per answer length), the same
records each way: CPU us per record, median of 5; and the ITL percentiles' own share of that.

    python tests/benchmarks/record_cost.py --requests 2000 [--profile]

then also times a bench request's whole non-HTTP work, end to end: ``--requests`` requests of that
answer through ``backends.load.driver.run_level`` (the code ``ttft bench`` runs) against a backend that
yields the lean reader's events with no socket (so: the synthetic prompt and the request, the
recorder's set-up, feeding, finishing with metrics and diagnosis, the driver's bookkeeping and
progress, the ``ttft.turn`` dict), and each record's ``turns.jsonl`` line; CPU (process time) per
request, median of 5 runs. ``--profile`` prints cProfile's top functions over one such run instead.

    python tests/benchmarks/record_cost.py --aggregate 10000

then also times what a bench does with its records at the end (and ``ttft report`` on its
``turns.jsonl``): ``--aggregate`` requests of that answer (timings varied per request, four
concurrency levels) read as typed records (``TurnRecord.from_dict``) and aggregated into the
summary; CPU seconds, median of 3, reading and aggregating shown apart.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import pstats
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.backends.finish import finish_turn, finish_turns  # noqa: E402
from ttft.backends.load.driver import LoadConfig, run_level  # noqa: E402
from ttft.telemetry import events as ev  # noqa: E402
from ttft.telemetry.bench.aggregate import aggregate_level  # noqa: E402
from ttft.telemetry.bench.requests import group_levels, measured, read_bench  # noqa: E402
from ttft.telemetry.bench.summary import summary  # noqa: E402
from ttft.telemetry.log.json_line import encode_line  # noqa: E402
from ttft.telemetry.log.surrogates import scrub_event  # noqa: E402
from ttft.telemetry.metrics import itl_gaps, percentiles, percentiles_many  # noqa: E402
from ttft.telemetry.recorder import TurnRecorder  # noqa: E402
from ttft.telemetry.settings import TurnSettings  # noqa: E402


def fed(tokens: int) -> TurnRecorder:
    r = TurnRecorder(
        session_id="bench", turn_index=1, provider="compat", api="chat.completions", model="m",
        base_url="http://127.0.0.1:8000/v1", settings=TurnSettings(max_output_tokens=tokens),
        prompt="hello there", input_chars=11, extra={"bench": {"run_id": "x", "index": 1}},
    )  # fmt: skip
    t = 1_000_000_000
    for e in (ev.Submitted(t), ev.AttemptSent(t + 1000, 1), ev.HeadersReceived(t + 15_000_000, 1, 200)):
        r.feed(e)
    for i in range(tokens):
        r.feed(scrub_event(ev.TextDelta(t + 20_000_000 + i * 50_000_000, " tok")))
    r.feed(ev.Finished(t + 20_000_000 + tokens * 50_000_000, "stop"))
    return r


def best_us(stage: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(stage, number=number, repeat=5)) / number * 1e6


def finish_us(tokens: int, number: int) -> float:
    """finish() on fresh recorders (a recorder finishes once: the next call returns the same record)."""
    best = float("inf")
    for _ in range(5):
        recorders = [fed(tokens) for _ in range(number)]
        t0 = time.process_time()
        for r in recorders:
            r.finish()
        best = min(best, time.process_time() - t0)
    return best / number * 1e6


BATCH = 64  # records a bench's finisher takes in one pass, at 64 users


def _two_ways_us(
    n: int, make: Callable[[], tuple[Any, Any]], one: Callable[[Any], object], batch: Callable[[Any], object]
) -> tuple[float, float]:
    """CPU us per record of ``one`` over each of ``n`` items, then of ``batch`` over slices of ``BATCH``;
    ``make`` gives the two sets of items fresh for each of 5 runs; medians."""
    alone_runs, batch_runs = [], []
    for _ in range(5):
        first, second = make()
        t0 = time.process_time()
        for item in first:
            one(item)
        t1 = time.process_time()
        for i in range(0, n, BATCH):
            batch(second[i : i + BATCH])
        t2 = time.process_time()
        alone_runs.append((t1 - t0) / n * 1e6)
        batch_runs.append((t2 - t1) / n * 1e6)
    return statistics.median(alone_runs), statistics.median(batch_runs)


def batch_finish_us(tokens: int, n: int) -> tuple[float, float]:
    """CPU us per record to finish ``n`` fresh records one by one, then copies of them in batches."""

    def make() -> tuple[Any, Any]:
        alone = [fed(tokens) for _ in range(n)]
        return alone, copy.deepcopy(alone)  # the same records, stamps and all

    return _two_ways_us(n, make, finish_turn, finish_turns)


def itl_us(tokens: int, n: int) -> tuple[float, float]:
    """CPU us per record for the ITL percentiles alone: one call each, and one per batch of 64."""
    gaps = [itl_gaps(fed(tokens).chunks) for _ in range(n)]
    return _two_ways_us(n, lambda: (gaps, gaps), percentiles, percentiles_many)


def bench_dicts(n: int, tokens: int) -> list[dict[str, Any]]:
    """``n`` bench requests as logged: the fed answer, its stamps shifted per request, four levels."""
    one = fed(tokens).finish().to_dict()
    out = []
    for i in range(n):
        d = copy.deepcopy(one)
        level = (1, 2, 4, 8)[i * 4 // n]
        d["turn_index"] = i
        d["extra"] = {"bench": {"run_id": "x", "mode": "concurrency", "level": level, "index": i, "warmup": False,
                                "worker": 0, "sent_at_ms": (i % (n // 4 or 1)) * 3.5}}  # fmt: skip
        d["chunks"] = [{**c, "t_ms": c["t_ms"] + (i % 7) * 0.125 * k} for k, c in enumerate(d["chunks"])]
        d["metrics"]["ttft_ms"] += i % 13
        out.append(d)
    return out


def aggregate_s(dicts: list[dict[str, Any]]) -> tuple[float, float]:
    """CPU seconds to read the records as typed ones, and to aggregate them into the summary."""
    t0 = time.process_time()
    turns = read_bench(dicts).turns
    t1 = time.process_time()
    levels = [aggregate_level(recs, level=lv, mode=m) for m, lv, recs in group_levels(measured(turns))]
    summary(levels)
    return t1 - t0, time.process_time() - t1


class SocketlessBackend:
    """A backend whose stream is the lean reader's events for one answer, stamped now, with no socket."""

    provider, api, model, base_url = "compat", "chat.completions", "m", "http://127.0.0.1:8000/v1"

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    async def stream(self, request: object) -> Any:
        t = ev.now_ns()
        yield ev.Submitted(t)
        yield ev.AttemptSent(t + 1000, 1)
        yield ev.HeadersReceived(t + 15_000_000, 1, 200)
        for i in range(self.tokens):
            yield ev.TextDelta(t + 20_000_000 + i * 50_000_000, " tok")
        end = t + 20_000_000 + self.tokens * 50_000_000
        yield ev.Usage(end, 128, self.tokens)
        yield ev.Finished(end, "stop")

    async def aclose(self) -> None:
        pass


def request_cpu_us(n: int, tokens: int, profile: cProfile.Profile | None = None) -> tuple[float, float]:
    """CPU us per request: the level (64 users, n requests) and the records' turns.jsonl lines."""
    cfg = LoadConfig(levels=(64,), requests=n, max_output_tokens=tokens, input_tokens=128)
    backend = SocketlessBackend(tokens)

    async def level() -> tuple[float, float]:
        if profile is not None:
            profile.enable()
        t0 = time.process_time()
        res = await run_level(backend, cfg, 64, run_id="bench-cost", on_progress=lambda p: None)  # type: ignore[arg-type]
        t1 = time.process_time()
        b"".join(encode_line(r) for r in res.records)
        t2 = time.process_time()
        if profile is not None:
            profile.disable()
        return (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6

    return asyncio.run(level())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=32, help="chunks per answer")
    p.add_argument("--aggregate", type=int, default=0, metavar="N", help="also time a bench run of N requests")
    p.add_argument("--requests", type=int, default=0, metavar="N", help="also time N whole bench requests, no HTTP")
    p.add_argument("--profile", action="store_true", help="with --requests: cProfile's top functions instead")
    a = p.parse_args()
    if a.requests and a.profile:
        prof = cProfile.Profile()
        request_cpu_us(a.requests, a.tokens, prof)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        return 0
    n = a.tokens
    feed = best_us(lambda: fed(n), 300)
    finish = finish_us(n, 300)
    record = fed(n).finish()
    to_dict = best_us(record.to_dict, 300)
    total = feed + finish + to_dict
    print(f"{n} chunks per answer: feeding {feed:.0f} us ({feed / n:.2f} us/chunk), finish {finish:.0f} us, "
          f"to_dict {to_dict:.0f} us; {total:.0f} us per request = {total / n:.1f} us per chunk")  # fmt: skip
    one, many = batch_finish_us(n, BATCH * 10)
    itl_one, itl_many = itl_us(n, BATCH * 10)
    print(f"finishing {BATCH * 10} records of {n} chunks (finish_turn, no log): {one:.0f} us per record one by one, "
          f"{many:.0f} us in batches of {BATCH}; of which ITL percentiles {itl_one:.1f} vs {itl_many:.1f} us "
          f"(CPU, median of 5)")  # fmt: skip
    if a.requests:
        runs = [request_cpu_us(a.requests, a.tokens) for _ in range(5)]
        lv, line = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"a bench request, all but HTTP ({a.requests} requests of {n} chunks, 64 users): {lv:.0f} us in "
              f"the load driver, {line:.0f} us for its turns.jsonl line; {lv + line:.0f} us per request = "
              f"{(lv + line) / n:.1f} us per chunk (CPU, median of 5)")  # fmt: skip
    if a.aggregate:
        dicts = bench_dicts(a.aggregate, n)
        runs = [aggregate_s(dicts) for _ in range(3)]
        read, agg = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"a bench run of {a.aggregate} requests ({n} chunks each): reading {read:.2f} s "
              f"({read / a.aggregate * 1e6:.0f} us per record), aggregating {agg:.2f} s, "
              f"{read + agg:.2f} s CPU in all (median of 3)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
