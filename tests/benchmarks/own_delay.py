"""ttft's own delay: from the user's submit to the moment the request reaches the server.

What a user waits for starts when they press Enter (or start ``ttft ask``), not at ``sent``.
This runs the real front ends against a loopback OpenAI-compatible fake server (in its own
process, logging each request's arrival on the shared CLOCK_MONOTONIC) and prints:

- chat: the real ChatApp headless (Textual's pilot), backend in its own process as ``ttft chat``
  runs it. Per turn: Enter (stamped just before the pilot presses it) -> the request's arrival at
  the server, and the record's ``own_delay_ms`` (Enter -> first send). Once with the start-up
  warm-up (waited for before the first Enter) and once without it (``warm_up=False``: the first
  turn starts the backend process itself, as before the warm-up existed).
- ask: ``python -m tui.cli ask -m compat:x --base-url URL "hi"`` in a fresh process, several times:
  process start (stamped by this script just before spawning it) -> arrival at the server, and the
  record's ``own_delay_ms`` (from ``tui.cli``'s first line to the send). ``--apis`` picks the hosted
  APIs asked (``chat`` = compat Chat Completions, ``responses`` = openai-responses, ``messages`` =
  anthropic; default all three), each against the same fake server; the processes of all APIs
  (and of ``--sdk``) are interleaved, one of each in turn, so a ratio between them shares the
  machine's load. ``--root DIR`` runs the ask
  from another checkout of the code (e.g. ``git archive HEAD``); ``--before DIR`` runs every mode from
  both this checkout and DIR, interleaved: a before/after in one run on one machine.
  ``--user-install`` also runs it as a user's install would import it: without aiohttp, a test-only
  dependency here that the OpenAI SDK imports whenever it is installed (50-80 ms of its import).

    python tests/benchmarks/own_delay.py [--turns 3] [--asks 7] [--apis chat,responses,messages]
        [--root DIR] [--before DIR] [--user-install] [--sdk] [--skip-chat]

Targets: the chat's first-turn own delay <= 50 ms once the warm-up has finished; ``ttft ask``
process start -> request arrival <= 400 ms (median).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CHAT_TARGET_MS = 50.0
ASK_TARGET_MS = 400.0
SCHEDULE = {"first_token_ms": 100.0, "token_ms": 10.0, "visible_tokens": 10}
GENERATION_PATHS = ("/chat/completions", "/responses", "/messages")
# -m and --base-url per API (the fake server's OpenAI base is URL + /v1; Anthropic's SDK adds /v1 itself)
ASK_APIS = {
    "chat": ("compat:x", "/v1"),
    "responses": ("openai-responses:x", "/v1"),
    "messages": ("anthropic:x", ""),
}


def _serve(conn: Any) -> None:
    """The fake server, in its own process (it must not share a GIL with what it measures)."""
    import tests.fakes as fakes

    srv = fakes.FakeServer(fakes.Schedule(**SCHEDULE)).start()
    conn.send(srv.openai_base_url)
    while True:
        cmd = conn.recv()
        if cmd == "arrivals":  # when each completion request arrived (body read), on CLOCK_MONOTONIC
            conn.send([r.received_ns for r in srv.requests if r.path.endswith(GENERATION_PATHS)])
        elif cmd == "stop":
            srv.stop()
            conn.send("ok")
            return


class Server:
    def __init__(self) -> None:
        self.conn, child = mp.Pipe()
        self.proc = mp.get_context("spawn").Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        self.url: str = self.conn.recv()

    def arrivals(self) -> list[int]:
        self.conn.send("arrivals")
        return self.conn.recv()

    def wait_arrivals(self, n: int, timeout: float = 10.0) -> list[int]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.arrivals()
            if len(got) >= n or time.monotonic() > deadline:
                return got
            time.sleep(0.01)

    def stop(self) -> None:
        self.conn.send("stop")
        self.conn.recv()
        self.proc.join(5)


async def chat_turns(url: str, server: Server, turns: int, warm: bool) -> list[dict[str, float]]:
    from ttft.telemetry import events as ev
    from ttft.tui.chat.app import ChatApp

    from tests.support.tui_support import wait_until

    app = ChatApp("compat:fake-model", base_url=url, warm_up=warm)
    out: list[dict[str, float]] = []
    started: list[Any] = []  # each turn's recorder, for its absolute stamps
    start = app.chat.session.start

    async def spy(*a: Any, **k: Any) -> Any:
        live = await start(*a, **k)
        started.append(live.recorder)
        return live

    app.chat.session.start = spy  # type: ignore[method-assign]
    async with app.run_test(size=(140, 44)) as pilot:
        if warm:  # the user types for a moment; the warm-up is done by the time they press Enter
            await wait_until(pilot, lambda: not [w for w in app.workers if w.group == "warm-up"], timeout=60)
        await pilot.pause(0.3)
        for i in range(turns):
            before = len(server.arrivals())
            app.query_one("#prompt").value = f"turn {i}"
            enter = ev.now_ns()
            await pilot.press("enter")
            await wait_until(
                pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy, timeout=60
            )
            arrived = server.wait_arrivals(before + 1)[before]
            rec = app.chat.session.records[-1]
            row = {
                "enter_to_arrival_ms": (arrived - enter) / 1e6,
                "own_delay_ms": rec.metrics.own_delay_ms,
                "ttft_ms": rec.metrics.ttft_ms,
                "key_ms": float("nan"),
                "transit_ms": float("nan"),
            }
            live = started[-1] if len(started) == i + 1 else None
            if live is not None and live.submitted_ns is not None and live.attempts:
                row["key_ms"] = (live.submitted_ns - enter) / 1e6  # the key's way to the submit handler
                row["transit_ms"] = (arrived - live.attempts[0].sent_ns) / 1e6  # sent -> arrival (a connect, too)
            out.append(row)
            await pilot.pause(0.2)
    return out


# `python -m tui.cli`, with aiohttp unimportable (a user's install has none; the SDK then skips its aiohttp client).
WITHOUT_AIOHTTP = "import sys; sys.modules['aiohttp'] = None; from ttft.tui.cli import main; sys.exit(main())"


def ask_command(url: str, api: str, user_install: bool, flags: tuple[str, ...]) -> list[str]:
    """``ttft ask`` on ``api`` against the fake server at ``url`` (its OpenAI base, ending in /v1)."""
    spec, suffix = ASK_APIS[api]
    base = url.removesuffix("/v1") + suffix
    entry = ["-c", WITHOUT_AIOHTTP] if user_install else ["-m", "ttft.tui.cli"]
    return [sys.executable, *entry, "ask", "-m", spec, "--base-url", base, "--json", *flags, "hi"]


Mode = tuple[Path, str, bool, tuple[str, ...]]  # checkout, api, as a user's install, flags


def ask_runs(url: str, server: Server, n: int, modes: list[Mode]) -> dict[Mode, list[dict[str, float]]]:
    """``n`` fresh ``ttft ask`` processes per mode, the modes interleaved (one of each in turn)."""
    data = tempfile.mkdtemp(prefix="ttft-own-")
    out: dict[Mode, list[dict[str, float]]] = {m: [] for m in modes}
    for _ in range(n):
        for mode in modes:
            root, api, user, flags = mode
            env = {**os.environ, "PYTHONPATH": str(root), "TTFT_DATA_DIR": data}
            env.pop("TTFT_IN_PROCESS", None)
            env.update(OPENAI_API_KEY="sk-own-delay", ANTHROPIC_API_KEY="sk-own-delay")  # the fake takes any key
            cmd = ask_command(url, api, user, flags)
            before = len(server.arrivals())
            start = time.monotonic_ns()  # the process start, as the parent sees it
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=60)
            if proc.returncode != 0:
                raise SystemExit(f"ttft ask failed ({proc.returncode}): {proc.stderr[-2000:]}")
            arrived = server.wait_arrivals(before + 1)[before]
            m = json.loads(proc.stdout)["metrics"]
            out[mode].append(
                {
                    "start_to_arrival_ms": (arrived - start) / 1e6,
                    "own_delay_ms": m.get("own_delay_ms") or float("nan"),  # absent in code from before the field
                    "ttft_ms": m["ttft_ms"],
                }
            )
    return out


def fmt(v: float | None) -> str:
    return "    -" if v is None or v != v else f"{v:7.1f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--turns", type=int, default=3, help="chat turns per run")
    p.add_argument("--chat-runs", type=int, default=3, help="fresh chat apps per mode (the first turn's medians)")
    p.add_argument("--asks", type=int, default=7, help="ttft ask processes")
    p.add_argument("--root", type=Path, default=ROOT, help="run `ttft ask` from this checkout")
    p.add_argument("--before", type=Path, help="also run every ask from this checkout, interleaved")
    p.add_argument("--skip-chat", action="store_true")
    p.add_argument("--user-install", action="store_true", help="also run ask without aiohttp, as a user's install")
    p.add_argument("--sdk", action="store_true", help="also run ask with --sdk (each API's SDK)")
    p.add_argument("--apis", default="chat,responses,messages", help="the hosted APIs to ask, comma-separated")
    args = p.parse_args()
    os.environ.setdefault("TTFT_DATA_DIR", tempfile.mkdtemp(prefix="ttft-own-"))
    server = Server()
    verdicts: list[str] = []
    try:
        print(f"fake server {server.url}: first token {SCHEDULE['first_token_ms']:.0f} ms, 10 tokens")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        if not args.skip_chat:
            first: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            for warm in (False, True):
                label = "with start-up warm-up" if warm else "no warm-up (the first turn starts the backend)"
                for run in range(args.chat_runs):
                    rows = asyncio.run(chat_turns(server.url, server, args.turns, warm))
                    first[warm].append(rows[0])
                    print(f"\nchat, {label}, run {run + 1}:")
                    print("  turn   Enter->arrival = key->handler + own_delay_ms + sent->arrival     TTFT")
                    for i, r in enumerate(rows):
                        print(
                            f"  {i:>4}   {fmt(r['enter_to_arrival_ms'])} ms     {fmt(r['key_ms'])} ms"
                            f"     {fmt(r['own_delay_ms'])} ms     {fmt(r['transit_ms'])} ms   {fmt(r['ttft_ms'])} ms"
                        )

            def med(rows: list[dict[str, float]], key: str) -> float:
                return statistics.median(r[key] for r in rows)

            own_first, arrival_first = med(first[True], "own_delay_ms"), med(first[True], "enter_to_arrival_ms")
            ok = own_first <= CHAT_TARGET_MS and arrival_first <= CHAT_TARGET_MS
            verdicts.append(
                f"chat first turn after warm-up (median of {args.chat_runs}): own delay {own_first:.1f} ms,"
                f" Enter->arrival {arrival_first:.1f} ms (target <= {CHAT_TARGET_MS:.0f} ms): "
                + ("MET" if ok else "MISSED")
                + f"  [without warm-up: own delay {med(first[False], 'own_delay_ms'):.0f} ms,"
                f" Enter->arrival {med(first[False], 'enter_to_arrival_ms'):.0f} ms]"
            )
        apis = [a.strip() for a in args.apis.split(",") if a.strip()]
        roots = [args.root.resolve(), *([args.before.resolve()] if args.before else [])]
        modes: list[Mode] = [
            (root, api, user, flags)
            for api in apis
            for root in roots
            for user, flags in [(False, ())]
            + ([(True, ())] if args.user_install else [])
            + ([(False, ("--sdk",))] if args.sdk else [])
        ]
        print(f"\nload average {os.getloadavg()[0]:.1f} before the asks")
        all_runs = ask_runs(server.url, server, args.asks, modes)
        for (root, api, user, flags), runs in all_runs.items():
            how = ("as a user's install (no aiohttp)" if user else "in this environment") + (
                ", with --sdk" if flags else ""
            )
            if len(roots) > 1:
                how += ", before" if root == roots[1] else ", after"
            print(f"\nttft ask -m {ASK_APIS[api][0]} (from {root}, {how}), {len(runs)} processes:")
            print("  run   start->arrival   own_delay_ms   TTFT")
            for i, r in enumerate(runs):
                arrival, own, ttft = fmt(r["start_to_arrival_ms"]), fmt(r["own_delay_ms"]), fmt(r["ttft_ms"])
                print(f"  {i:>3}   {arrival} ms     {own} ms   {ttft} ms")
            arrival_med = statistics.median(r["start_to_arrival_ms"] for r in runs)
            own_med = statistics.median(r["own_delay_ms"] for r in runs)
            verdicts.append(
                f"ttft ask {api} ({how}) process start -> arrival: median {arrival_med:.0f} ms, own_delay_ms"
                f" median {fmt(own_med).strip()} ms (target <= {ASK_TARGET_MS:.0f} ms): "
                + ("MET" if arrival_med <= ASK_TARGET_MS else "MISSED")
            )
        print(f"\nload average {os.getloadavg()[0]:.1f}")
    finally:
        server.stop()
    print("\n" + "\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
