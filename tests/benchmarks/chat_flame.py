"""Where the chat's CPU goes while an answer streams: a py-spy flame summary per thread, before and after.

    python tests/benchmarks/chat_flame.py [--tokens-per-s 4000] [--seconds 4] [--versus DIR] [--raw DIR]

Needs py-spy (``pip install py-spy``; it reads another process's stacks, so it may need root or
``ptrace`` rights). The fake server of ``ui_fidelity.py`` streams one 10-second answer at
``--tokens-per-s``; the real chat (``ui_fidelity.py --one-run``: the app headless at 160x48, its backend in
its own process, as ``ttft chat`` runs it) reads it, and py-spy samples the chat's process tree at
200 Hz for ``--seconds`` from 2 s into the stream, so neither the start nor the full render at the end is
in the window. ``--versus DIR`` does the same for the checkout in DIR (main before a change) in the same
run. It prints, per thread, what its busy samples were spent on, in milliseconds per second of the
stream; a thread waiting in its event loop's ``select`` or a pool's queue is not busy.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(Path(__file__).resolve().parent))

RATE_HZ = 200
STREAM_S = 10.0

# Per thread, the first of these frames found in a sample's stack names what the sample was spent on.
CATEGORIES: dict[str, list[tuple[str, str]]] = {
    "UI main thread": [
        ("layout pass", "Screen._refresh_layout"),
        ("compositor: repaint of what changed", "Screen._compositor_refresh"),
        ("answer paint: feed, wrap", "AssistantMessage._paint"),
        ("pane at 10 fps", "TurnPainter.frame"),
    ],
    "UI stream thread": [
        ("events from the pipe (unpickle)", "ProcessBackend.stream.<locals>.readable"),
        ("recorder", "TurnRecorder"),
    ],
    "backend process": [
        ("HTTP: h11 under httpx2", "AsyncHTTP11Connection"),
        ("socket reads (asyncio; httptools' parser on the Protocol transport)", "data_received"),
        ("SSE split, JSON, translation", "LeanChunks._events"),
        ("events to the pipe (pickle, write)", "_child_main.<locals>.flush"),
    ],
}
IDLE_LEAVES = ("EpollSelector.select", "_PollLikeSelector.select", "Connection._poll", "wait (multiprocessing")


def summarise(raw: Path) -> dict[str, collections.Counter[str]]:
    """Busy samples per thread and category from py-spy's raw (collapsed) output of the chat's tree."""
    out: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        # py-spy names each process on the stack; a child's frames follow its own name
        procs = [i for i, f in enumerate(frames) if f.startswith("process ")]
        body = ";".join(frames[(procs[-1] if procs else 0) + 1 :])
        if len(procs) > 1 or "spawn_main" in frames[0]:
            thread = "backend process"
        else:
            thread = "UI stream thread" if "LoopThread._run" in body else "UI main thread"
        if frames[-1].startswith(IDLE_LEAVES) or "concurrent/futures/thread.py" in frames[-1]:
            continue  # waiting, not working
        n = int(count)
        out[thread]["busy"] += n
        name = next((name for name, key in CATEGORIES[thread] if key in body), "other")
        out[thread][name] += n
    return out


def profile(code: str, base_url: str, server: Any, seconds: float, tokens_per_s: float, raw: Path) -> None:
    """One chat of the checkout ``code`` streaming one answer; py-spy on its tree for the window."""
    server.send("requests")
    before = len(server.recv())
    env = {**os.environ, "TTFT_DATA_DIR": tempfile.mkdtemp(prefix="ttft-flame-"), "PYTHONPATH": code}
    cmd = [sys.executable, str(Path(__file__).with_name("ui_fidelity.py")), "--one-run", "--code", code]
    cmd += ["--base-url", base_url, "--turns", "1", "--size", "160x48"]
    child = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the turn's answer, 2 s into its stream
            server.send("requests")
            reqs = server.recv()[before:]
            if reqs and len(reqs[-1][1]) >= 2 * tokens_per_s:
                break
            if child.poll() is not None:
                raise SystemExit(
                    f"the chat in {code} ended before its turn streamed:\n{child.communicate()[1][-2000:]}"
                )
            time.sleep(0.05)
        else:
            raise SystemExit("the chat's turn did not start streaming")
        spy = [shutil.which("py-spy") or "py-spy", "record", "--pid", str(child.pid), "--subprocesses"]
        spy += ["--rate", str(RATE_HZ), "--duration", str(int(seconds)), "--format", "raw", "-o", str(raw)]
        subprocess.run(spy, check=True, capture_output=True, timeout=seconds + 60)
        _, err = child.communicate(timeout=120)
        if child.returncode:
            raise SystemExit(f"the chat in {code} failed:\n{err[-2000:]}")
    finally:
        if child.poll() is None:
            child.kill()


def main() -> int:
    import ui_fidelity

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens-per-s", type=float, default=4000.0)
    ap.add_argument("--seconds", type=float, default=4.0, help="the sampled window, within the 10 s stream")
    ap.add_argument("--versus", metavar="DIR", help="also the checkout in DIR, in the same run")
    ap.add_argument("--raw", metavar="DIR", help="keep py-spy's raw stacks here (flamegraph.pl reads them)")
    args = ap.parse_args()
    if shutil.which("py-spy") is None:
        print("py-spy is not installed: pip install py-spy", file=sys.stderr)
        return 2
    raw_dir = Path(args.raw or tempfile.mkdtemp(prefix="ttft-flame-raw-"))
    raw_dir.mkdir(parents=True, exist_ok=True)
    schedule = {
        "first_token_ms": 200.0,
        "token_ms": 1000.0 / args.tokens_per_s,
        "visible_tokens": int(args.tokens_per_s * STREAM_S),
        "reasoning_tokens": 0,
    }
    parent, child = mp.Pipe()
    server = mp.get_context("spawn").Process(target=ui_fidelity._serve, args=(child, schedule), daemon=True)
    server.start()
    base_url = parent.recv()
    codes = {"this checkout": str(HERE)}
    if args.versus:
        codes[f"--versus {args.versus}"] = str(Path(args.versus).resolve())
    results = {}
    for i, (name, code) in enumerate(codes.items()):
        raw = raw_dir / f"{i}.txt"
        profile(code, base_url, parent, args.seconds, args.tokens_per_s, raw)
        results[name] = summarise(raw)
    parent.send("stop")
    parent.recv()
    print(
        f"chat_flame: {args.tokens_per_s:.0f} tokens/s, py-spy at {RATE_HZ} Hz for {args.seconds:.0f} s mid-stream;"
        f" {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; raw stacks in {raw_dir}"
    )
    names = list(results)
    print("| thread: what | " + " | ".join(f"{n}, ms per s" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for thread, cats in CATEGORIES.items():

        def cell(name: str, what: str, thread: str = thread) -> str:
            return f"{1000 * results[name][thread][what] / RATE_HZ / args.seconds:.0f}"

        print(f"| **{thread}** | " + " | ".join(f"**{cell(n, 'busy')}**" for n in names) + " |")
        for what in [*(c for c, _ in cats), "other"]:
            print(f"| {what} | " + " | ".join(cell(n, what) for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
