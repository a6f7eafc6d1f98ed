"""The proxy's live view on a long run: what a tick costs once the calls table is at its cap, what a
burst past it costs, and what changing the filter costs over tens of thousands of calls.

    python tests/benchmarks/proxy_view.py [--calls 20000] [--per-tick 20]

Under Textual's pilot (a headless terminal of 160x40), with no proxy: calls as the proxy hands them over
(the pilot tests' own), fed straight to the app's queue. Each figure is the app's own work on its
loop, timed around the method that does it (the paint that follows is Textual's, not timed here):

- a tick that takes ``--per-tick`` calls with 2,000 rows on the table, so as many rows go from its top
  (median and p95 of 50 ticks);
- a tick that takes a burst of 500 calls at the cap (the table filled again);
- the filter set to a text most calls pass and to one few do, over ``--calls`` calls, and cleared.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ttft.tui.proxy.app import ProxyApp
from ttft.tui.proxy.call_rows import MAX_ROWS

from tests.tui.proxy.test_app import call


def _timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - t) * 1e3


async def main(n_calls: int, per_tick: int) -> None:
    made = [call(i, model=f"model-{i % 7}", client=f"app-{i % 3}/1.0", digests=(f"c{i}",)) for i in range(n_calls)]
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        app._sessions_at = float("inf")  # no session rebuild in the background: the tick's work alone
        for c in made[:MAX_ROWS]:
            app.feed(c)
        await pilot.pause(0.5)
        ticks = []
        at = MAX_ROWS
        for _ in range(50):
            for c in made[at : at + per_tick]:
                app.feed(c)
            at += per_tick
            ticks.append(_timed(app._tick))
            await pilot.pause()
        ticks.sort()
        print(
            f"tick with {per_tick} calls at {MAX_ROWS:,} rows: p50 {statistics.median(ticks):.2f} ms, "
            f"p95 {ticks[int(0.95 * len(ticks))]:.2f} ms"
        )
        for c in made[at : at + 500]:
            app.feed(c)
        at += 500
        print(f"a burst of 500 calls at the cap: {_timed(app._tick):.1f} ms")
        for c in made[at:]:
            app.feed(c)
        app._tick()
        await pilot.pause(0.5)
        n = len(app.calls)
        box = app.query_one("#filter")
        for text in ("app-1", "model-3", "no such thing", ""):
            box.value = text  # type: ignore[attr-defined]
            ms = _timed(app._refilter)
            await pilot.pause(0.3)
            assert app._rows is not None
            print(
                f"filter {text!r} over {n:,} calls: {ms:.1f} ms ({app._rows.passing:,} pass, "
                f"{app._rows.table.row_count:,} rows)"
            )


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20_000)
    p.add_argument("--per-tick", type=int, default=20)
    a = p.parse_args()
    asyncio.run(main(a.calls, a.per_tick))
