"""What ``ttft proxy`` adds to an app's calls, and whether it keeps up; prints the figures.

    python tests/benchmarks/proxy_overhead.py [--requests 200] [--streams 256]

Three processes, as a real run has them: the scheduled fake server, the proxy (``backends.proxy``, on the
event loop ``ttft proxy`` runs on: uvloop when installed, named in the output, ``TTFT_EVENT_LOOP=asyncio``
for asyncio's own; with a 10 ms ticker measuring its loop's lag under load), and this client (raw aiohttp, no SDK,
the same code both ways).

1. Added latency: 200 streamed Chat Completions requests direct and 200 through the proxy, interleaved
   one by one (first token at 20 ms, then 32 tokens 2 ms apart). Each request's times are from just
   before its send to each read's arrival at the client.

   - ``ttft_added_ms``: the first token's arrival, p50 and p99 through the proxy minus the same
     percentile direct: the whole delay of the proxy's hop (the request's way up and the answer's way back).
   - ``chunk_delay_through_proxy_us``: for each SSE event's index i, the median arrival through the proxy
     minus the median direct (``delay(i)``); the median and max over the indices. Every chunk pays the
     hop's constant delay, so this is about ``ttft_added_ms`` again for every chunk.
   - ``per_chunk_added_beyond_first_us``: what the proxy adds to a chunk beyond what it added to the
     first token (the issue's "at most 50 us per chunk"): ``delay(i) - delay(first token's index)``
     for each later index; the median and max over them. A proxy that falls behind the stream grows it.
   - ``itl_added_us``: the inter-token gap, median over every gap between two token events through the
     proxy minus the same median direct.
   - ``proxy_cpu_per_chunk_us``: the proxy process's CPU (its precise clock; the user and system shares
     from its 10 ms tick counts) over the part, divided by the SSE events it relayed. It holds everything
     the proxy does for the calls, not only the relay of each chunk: the request's reading and
     forwarding, and the record made at each call's end (about 35 events a call here). The lag ticker
     is off for this part (its wakes cost the proxy ~1-3 % of a core). System time is mostly the
     kernel's loopback work for each socket read and write.
   - ``proxy_hold_per_read_us``: from a read's arrival at the proxy to its write to the client done.
2. Bytes: every format (Chat Completions, Responses, Messages; streamed and not), a gzip body and a
   malformed stream, replayed verbatim by a scripted upstream in small pieces: the client's bytes through
   the proxy against the bytes sent (goal: 0 differing).
3. Load: 256 concurrent streams (64 tokens 50 ms apart, ~20 tokens/s each: 5,000 chunks/s through the
   proxy) all complete, with the proxy loop's lag p99 (goal: <= 5 ms) and its CPU per relayed SSE event
   (as in 1, about 67 events a call here, the ticker's wakes included).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

LAT = {"first_token_ms": 20.0, "token_ms": 2.0, "visible_tokens": 32}
LOAD = {"first_token_ms": 50.0, "token_ms": 50.0, "visible_tokens": 64}


# --- the two servers, each in its own process ------------------------------------------------
def serve_fake() -> None:
    from tests.fakes.schedule import Schedule
    from tests.fakes.server import FakeServer

    class Wide(FakeServer):
        backlog = 2048

    srv = Wide()
    srv.schedules = {"lat": Schedule(**LAT), "load": Schedule(**LOAD)}  # type: ignore[arg-type]
    srv.start()
    print(srv.url, flush=True)
    sys.stdin.read()
    srv.stop()


def serve_proxy(upstream: str) -> None:
    from ttft.backends.load import event_loop
    from ttft.backends.load.watch import ClientWatch
    from ttft.backends.proxy import tap
    from ttft.backends.proxy.server import ProxyConfig, ProxyServer
    from ttft.telemetry import events as ev

    holds: list[float] = []  # us from a read's arrival to its write to the client done (the proxy's own hold)
    feed = tap.CallTap.feed

    def timed_feed(self: tap.CallTap, data: bytes, t: int) -> None:
        holds.append((ev.now_ns() - t) / 1000)
        feed(self, data, t)

    tap.CallTap.feed = timed_feed  # type: ignore[method-assign]

    async def main() -> None:
        calls = 0

        def on_call(_: Any) -> None:
            nonlocal calls
            calls += 1

        server = ProxyServer(ProxyConfig(port=0, upstream=upstream), on_call)
        await server.start()
        print(server.base_url, event_loop.running(), flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        watch: ClientWatch | None = ClientWatch()
        watch.start()
        cpu0, wall0, proc0 = os.times(), time.perf_counter(), time.process_time()
        while line := await reader.readline():
            # the window since the last report: loop lag (None for a quiet one), CPU, calls; then the next
            # window, "report quiet" for one without the lag ticker (its wakes are CPU of their own)
            if line.split()[:1] == [b"report"]:
                out = await watch.stop() if watch is not None else {"loop_lag_ms": None}
                cpu1 = os.times()
                user, system = cpu1.user - cpu0.user, cpu1.system - cpu0.system
                wall, proc = time.perf_counter() - wall0, time.process_time() - proc0
                hold = {"p50": _pct(holds, 0.5), "p99": _pct(holds, 0.99)} if holds else None
                window = {
                    "lag": out["loop_lag_ms"],
                    "user_s": user,
                    "system_s": system,
                    "calls": calls,
                    "hold_us": hold,
                    "wall_s": wall,
                    "cpu_s": proc,  # precise (the process's CPU clock); user_s/system_s count 10 ms ticks
                }
                print(json.dumps(window), flush=True)
                holds.clear()
                watch = None if line.split()[1:] == [b"quiet"] else ClientWatch()
                if watch is not None:
                    watch.start()
                cpu0, wall0, proc0 = os.times(), time.perf_counter(), time.process_time()
                calls = 0
        if watch is not None:
            await watch.stop()
        await server.aclose()

    event_loop.run(main(), event_loop.loop_factory())  # the loop ttft proxy runs on (uvloop when installed)


class Child:
    def __init__(self, *args: str) -> None:
        self.p = subprocess.Popen(
            [sys.executable, __file__, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.p.stdout is not None and self.p.stdin is not None
        self.url, _, self.loop = self.p.stdout.readline().strip().partition(" ")

    def report(self, *, quiet: bool = False) -> dict[str, Any]:
        """The proxy's window since the last report; the next one runs without the lag ticker if ``quiet``."""
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write("report quiet\n" if quiet else "report\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())  # type: ignore[no-any-return]

    def stop(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.close()
        self.p.wait(30)


# --- 1. added latency ----------------------------------------------------------------------
def _body(model: str) -> bytes:
    return json.dumps(
        {"model": model, "stream": True, "messages": [{"role": "user", "content": "hi"}],
         "stream_options": {"include_usage": True}}
    ).encode()  # fmt: skip


class Got:
    """One streamed request as the client saw it: ms from just before the send."""

    def __init__(self, first: float, events: list[float], body: bytes) -> None:
        self.first = first  # the first token's arrival
        self.events = events  # each SSE event's arrival (a read's, for the events it completed)
        self.body = body
        blocks = body.split(b"\n\n")
        self.tokens = [i for i, b in enumerate(blocks[: len(events)]) if b'"content":"w' in b]  # token events


async def _one(s: aiohttp.ClientSession, url: str, body: bytes) -> Got:
    t0 = time.perf_counter()
    events: list[float] = []
    buf = b""
    async with s.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
        first = None
        while data := await r.content.readany():
            t = (time.perf_counter() - t0) * 1000
            buf += data
            if first is None and b'"content":"w' in buf:
                first = t
            events += [t] * (buf.count(b"\n\n") - len(events))
    assert first is not None and buf.endswith(b"data: [DONE]\n\n"), buf[-200:]
    return Got(first, events, buf)


def _cpu_per(window: dict[str, Any], chunks: int) -> dict[str, float]:
    """The proxy's CPU in a window per relayed SSE event, us: the total, and its user and system shares."""
    total = window["cpu_s"] / max(1, chunks) * 1e6
    user_share = window["user_s"] / max(1e-9, window["user_s"] + window["system_s"])
    return {"total": total, "user": total * user_share, "system": total * (1 - user_share)}


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


async def added_latency(fake: str, proxy: Child, n: int) -> dict[str, Any]:
    direct_url = fake + "/v1/chat/completions"
    proxy_url = proxy.url + "/v1/chat/completions"
    body = _body("lat")
    got: dict[str, list[Got]] = {"direct": [], "proxy": []}
    conn = aiohttp.TCPConnector(limit=4)
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as s:
        for url in (direct_url, proxy_url):  # warm both paths' connections and first-use costs
            await _one(s, url, body)
        proxy.report(quiet=True)  # no lag ticker: the proxy's CPU here is its own for the calls
        for _ in range(n):
            for way, url in (("direct", direct_url), ("proxy", proxy_url)):
                got[way].append(await _one(s, url, body))
    window = proxy.report()
    ttft = {way: [g.first for g in gs] for way, gs in got.items()}
    k = min(len(g.events) for g in got["direct"] + got["proxy"])
    delay = [  # each event index's delay through the proxy, ms
        statistics.median(g.events[i] for g in got["proxy"]) - statistics.median(g.events[i] for g in got["direct"])
        for i in range(k)
    ]
    first = min(g.tokens[0] for g in got["direct"] + got["proxy"])
    beyond = [d - delay[first] for d in delay[first + 1 :]]
    itl = {
        way: [b - a for g in gs for a, b in itertools.pairwise(g.events[i] for i in g.tokens)]
        for way, gs in got.items()
    }
    chunks = sum(len(g.events) for g in got["proxy"])
    return {
        "ttft_direct_ms": {"p50": _pct(ttft["direct"], 0.5), "p99": _pct(ttft["direct"], 0.99)},
        "ttft_proxy_ms": {"p50": _pct(ttft["proxy"], 0.5), "p99": _pct(ttft["proxy"], 0.99)},
        "ttft_added_ms": {
            "p50": _pct(ttft["proxy"], 0.5) - _pct(ttft["direct"], 0.5),
            "p99": _pct(ttft["proxy"], 0.99) - _pct(ttft["direct"], 0.99),
        },
        "chunk_delay_through_proxy_us": {"median": statistics.median(delay) * 1000, "max": max(delay) * 1000},
        "per_chunk_added_beyond_first_us": {
            "median": statistics.median(beyond) * 1000,
            "max": max(beyond) * 1000,
            "max_at_event": first + 1 + beyond.index(max(beyond)),
            "of_events": k,
        },
        "itl_added_us": (statistics.median(itl["proxy"]) - statistics.median(itl["direct"])) * 1000,
        "proxy_cpu_per_chunk_us": _cpu_per(window, chunks),
        "proxy_hold_per_read_us": window["hold_us"],
        "proxy_loop_lag_ms": window["lag"],
        "calls_recorded": window["calls"],
        "requests_each_way": n,
    }


# --- 2. bytes ----------------------------------------------------------------------------
async def bytes_check(fake: str) -> dict[str, Any]:
    from tests.backends.proxy.conftest import Scripted

    fixtures: list[tuple[str, str, dict[str, str], bytes]] = []
    formats = {
        "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}]},
        "/v1/responses": {"input": "hi"},
        "/v1/messages": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64},
    }
    async with aiohttp.ClientSession(auto_decompress=False) as s:
        for path, fields in formats.items():
            for stream in (True, False):
                body = json.dumps({"model": "fake-model", "stream": stream, **fields}).encode()
                async with s.post(fake + path, data=body, headers={"Content-Type": "application/json"}) as r:
                    got = await r.read()
                    fixtures.append((f"{path} stream={stream}", path, {"Content-Type": r.headers["Content-Type"]}, got))
    sse = fixtures[0][3]
    fixtures.append(
        (
            "gzip",
            "/v1/chat/completions",
            {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"},
            gzip.compress(sse),
        )
    )
    bad = b"data: {oops\n\ndata: \xff\n\n" + sse
    fixtures.append(("malformed", "/v1/chat/completions", {"Content-Type": "text/event-stream"}, bad))
    up = Scripted().start()
    proxy = Child("--serve-proxy", up.url)
    out: dict[str, int] = {}
    try:
        async with aiohttp.ClientSession(auto_decompress=False) as s:
            for name, path, headers, sent in fixtures:
                up.headers = headers
                up.pieces = [sent[i : i + 61] for i in range(0, len(sent), 61)]
                up.gap_s = 0.001
                async with s.post(proxy.url + path, data=b'{"model":"fake-model"}') as r:
                    got = await r.read()
                out[name] = sum(a != b for a, b in zip(got, sent, strict=False)) + abs(len(got) - len(sent))
    finally:
        proxy.stop()
        up.stop()
    return {"fixtures": len(out), "differing_bytes": sum(out.values()), "per_fixture": out}


# --- 3. load -----------------------------------------------------------------------------
async def load(proxy: Child, streams: int) -> dict[str, Any]:
    url = proxy.url + "/v1/chat/completions"
    body = _body("load")
    conn = aiohttp.TCPConnector(limit=0)
    proxy.report()
    t0 = time.perf_counter()
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as s:
        results = await asyncio.gather(*(_one(s, url, body) for _ in range(streams)), return_exceptions=True)
    wall = time.perf_counter() - t0
    window = proxy.report()
    ok = [r for r in results if isinstance(r, Got)]
    return {
        "streams": streams,
        "completed": len(ok),
        "failed": [repr(r)[:120] for r in results if isinstance(r, BaseException)][:3],
        "wall_s": wall,
        "proxy_loop_lag_ms": window["lag"],
        "proxy_cpu_percent": window["cpu_s"] / wall * 100,
        "proxy_cpu_per_chunk_us": _cpu_per(window, sum(len(r.events) for r in ok)),
        "calls_recorded": window["calls"],
    }


async def run(args: argparse.Namespace) -> None:
    fake = Child("--serve-fake")
    proxy = Child("--serve-proxy", fake.url)
    try:
        print(json.dumps({"proxy_event_loop": proxy.loop}), flush=True)
        lat = await added_latency(fake.url, proxy, args.requests)
        print(json.dumps({"added_latency": lat}, indent=1), flush=True)
        ld = await load(proxy, args.streams)
        print(json.dumps({"load": ld}, indent=1), flush=True)
        print(json.dumps({"bytes": await bytes_check(fake.url)}, indent=1), flush=True)
    finally:
        proxy.stop()
        fake.stop()
    print(f"cpus: {os.cpu_count()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--streams", type=int, default=256)
    p.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--serve-proxy", metavar="UPSTREAM", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve_fake:
        serve_fake()
    elif args.serve_proxy:
        serve_proxy(args.serve_proxy)
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
