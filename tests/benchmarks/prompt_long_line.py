"""Keystroke echo in the prompt box with a huge paste in it: one long line against the same bytes over many.

    python tests/benchmarks/prompt_long_line.py [--mb 5] [--keys 5] [--lines 50000]

Issue 28's D6: a 5 MB single-line paste, expanded with ctrl+e, made every key take 2.2-2.3 s to echo
in a real terminal (and memory grow ~5 MB per key); the same bytes over 50k lines echoed in ~70 ms.
The box (tui.widgets.prompt_box) re-wraps and re-paints a line whole on each key, so the cost grows
with the edited line's length. Now a paste with a line past ``tui.widgets.pastes.MAX_LINE``
characters stays folded on ctrl+e. Each row here is the real ``PromptBox`` in Textual's headless
pilot, 120x40:

- ``one line, in the box``: the line put in the box as ctrl+e did before (what D6 measured);
- ``one line, ctrl+e``: pasted, ctrl+e pressed: what happens now (it stays folded);
- ``N lines, ctrl+e``: the same bytes over N lines, unfolded;
- ``MAX_LINE line, in the box``: the longest line ctrl+e still unfolds.

Per key: the time from the key to the box's text changed and the screen painted (``pilot.press`` then
``pilot.pause``: the key handled, the refresh done), median and max over ``--keys`` keys, and the
process's resident memory growth per key. Figures depend on the machine and what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.widgets import Static  # noqa: E402
from ttft.tui.widgets.pastes import MAX_LINE  # noqa: E402
from ttft.tui.widgets.prompt_box import PromptBox  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


class BoxApp(App[None]):
    CSS = "Static { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield Static("transcript")
        yield PromptBox(time.monotonic_ns, id="p")


async def measure(name: str, text: str, setup: str, keys: int) -> None:
    app = BoxApp()
    async with app.run_test(size=(120, 40)) as pilot:
        box = app.query_one(PromptBox)
        box.focus()
        if setup == "load":
            box.load_text(text)  # as ctrl+e put it in the box before
        else:
            box.post_message(events.Paste(text))
            await pilot.pause()
            await pilot.press("ctrl+e")
        box.move_cursor(box.document.end)
        await pilot.pause()
        shown = box.value
        times, rss0 = [], rss_mb()
        for _ in range(keys):
            before = box.value
            t = time.perf_counter()
            await pilot.press("z")
            await pilot.pause()
            times.append(time.perf_counter() - t)
            assert box.value != before
        grow = (rss_mb() - rss0) / keys
        folded = "folded" if shown.startswith("[pasted") else "unfolded"
        print(
            f"{name:<28} {folded:<9} echo median {statistics.median(times) * 1000:7.0f} ms"
            f"  max {max(times) * 1000:7.0f} ms   memory {grow:+6.1f} MB/key"
        )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=5.0, help="the paste's size in MB (default 5)")
    ap.add_argument("--keys", type=int, default=5, help="keys typed per case (default 5)")
    ap.add_argument("--lines", type=int, default=50_000, help="the many-line case's line count (default 50000)")
    args = ap.parse_args()
    n = int(args.mb * 1_000_000)
    one_line = ("0123456789" * (n // 10 + 1))[:n]
    width = max(1, n // args.lines)
    many = "\n".join(one_line[i : i + width - 1] for i in range(0, n, width))
    print(f"paste: {n:,} characters; MAX_LINE {MAX_LINE:,}; {args.keys} keys per case")
    await measure("one line, in the box", one_line, "load", args.keys)
    await measure("one line, ctrl+e", one_line, "paste", args.keys)
    await measure(f"{args.lines:,} lines, ctrl+e", many, "paste", args.keys)
    await measure("MAX_LINE line, in the box", one_line[:MAX_LINE], "paste", args.keys)


if __name__ == "__main__":
    asyncio.run(main())
