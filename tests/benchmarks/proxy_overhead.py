"""What ``ttft proxy`` adds to an app's calls, and whether it keeps up; prints the figures.

    python tests/benchmarks/proxy_overhead.py [--requests 200] [--streams 256]

Three processes, as a real run has them: the scheduled fake server, the proxy (``backends.proxy``, with
a 10 ms ticker measuring its loop's lag), and this client (raw aiohttp, no SDK, the same code both ways).

1. Added latency: 200 streamed Chat Completions requests direct and 200 through the proxy, interleaved
   one by one (first token at 20 ms, then 32 tokens 2 ms apart). TTFT here is the first token's
   arrival after the send; the added TTFT is the proxy's p50 and p99 minus the direct ones. The added
   time per chunk: for each SSE event's index, the median arrival through the proxy minus the median
   direct; the median and max over the indices. The proxy's own CPU per relayed chunk is beside it.
2. Bytes: every format (Chat Completions, Responses, Messages; streamed and not), a gzip body and a
   malformed stream, replayed verbatim by a scripted upstream in small pieces: the client's bytes through
   the proxy against the bytes sent (goal: 0 differing).
3. Load: 256 concurrent streams (64 tokens 50 ms apart, ~20 tokens/s each: 5,000 chunks/s through the
   proxy) all complete, with the proxy loop's lag p99 (goal: <= 5 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
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
        print(server.base_url, flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        watch = ClientWatch()
        watch.start()
        cpu0 = time.process_time()
        while line := await reader.readline():
            if line.strip() == b"report":  # the window since the last report: loop lag, CPU, calls
                out = await watch.stop()
                cpu = time.process_time() - cpu0
                hold = {"p50": _pct(holds, 0.5), "p99": _pct(holds, 0.99)} if holds else None
                print(
                    json.dumps({"lag": out["loop_lag_ms"], "cpu_s": cpu, "calls": calls, "hold_us": hold}), flush=True
                )
                holds.clear()
                watch = ClientWatch()
                watch.start()
                cpu0 = time.process_time()
                calls = 0
        await watch.stop()
        await server.aclose()

    asyncio.run(main())


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
        self.url = self.p.stdout.readline().strip()

    def report(self) -> dict[str, Any]:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write("report\n")
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


async def _one(s: aiohttp.ClientSession, url: str, body: bytes) -> tuple[float, list[float], bytes]:
    """(the first token's arrival ms, each SSE event's arrival ms, the body), from just before the send."""
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
    return first, events, buf


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


async def added_latency(fake: str, proxy: Child, n: int) -> dict[str, Any]:
    direct_url = fake + "/v1/chat/completions"
    proxy_url = proxy.url + "/v1/chat/completions"
    body = _body("lat")
    ttft: dict[str, list[float]] = {"direct": [], "proxy": []}
    events: dict[str, list[list[float]]] = {"direct": [], "proxy": []}
    conn = aiohttp.TCPConnector(limit=4)
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as s:
        for url in (direct_url, proxy_url):  # warm both paths' connections and first-use costs
            await _one(s, url, body)
        proxy.report()
        for _ in range(n):
            for way, url in (("direct", direct_url), ("proxy", proxy_url)):
                first, ev, _ = await _one(s, url, body)
                ttft[way].append(first)
                events[way].append(ev)
    window = proxy.report()
    k = min(len(e) for e in events["direct"] + events["proxy"])
    per_index = [
        statistics.median(e[i] for e in events["proxy"]) - statistics.median(e[i] for e in events["direct"])
        for i in range(k)
    ]
    chunks = sum(len(e) for e in events["proxy"])
    return {
        "ttft_direct_ms": {"p50": _pct(ttft["direct"], 0.5), "p99": _pct(ttft["direct"], 0.99)},
        "ttft_proxy_ms": {"p50": _pct(ttft["proxy"], 0.5), "p99": _pct(ttft["proxy"], 0.99)},
        "ttft_added_ms": {
            "p50": _pct(ttft["proxy"], 0.5) - _pct(ttft["direct"], 0.5),
            "p99": _pct(ttft["proxy"], 0.99) - _pct(ttft["direct"], 0.99),
        },
        "per_chunk_added_us": {"median": statistics.median(per_index) * 1000, "max": max(per_index) * 1000},
        "proxy_cpu_per_chunk_us": window["cpu_s"] / max(1, chunks) * 1e6,
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
    ok = [r for r in results if not isinstance(r, BaseException)]
    return {
        "streams": streams,
        "completed": len(ok),
        "failed": [repr(r)[:120] for r in results if isinstance(r, BaseException)][:3],
        "wall_s": wall,
        "proxy_loop_lag_ms": window["lag"],
        "proxy_cpu_percent": window["cpu_s"] / wall * 100,
        "calls_recorded": window["calls"],
    }


async def run(args: argparse.Namespace) -> None:
    fake = Child("--serve-fake")
    proxy = Child("--serve-proxy", fake.url)
    try:
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
