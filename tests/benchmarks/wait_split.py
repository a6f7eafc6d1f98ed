"""How well the wait's split recovers a known server, and what the wire trace costs; prints figures.

    PYTHONPATH=. python tests/benchmarks/wait_split.py [--turns 20]

1. A loopback HTTPS fake (tests/fakes/tls_server.py) holds its headers 150 ms after reading the
   request and sends the first token 80 ms after them. For each client path (the OpenAI SDK,
   the lean reader on httpx2, the lean reader on aiohttp, the Anthropic SDK), ``--turns`` turns
   on one client: the first opens a connection, the rest reuse it. Prints the median of each
   part for new and reused connections, and the largest |sum - ttft_ms|.
2. The trace's own cost: the same lean httpx2 turns against a plain-http fake with the first
   token at once, TTFT median with the trace extension and the live event task (as shipped)
   against a client whose request hook sets no trace (the wire steps then never come).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from typing import Any

from ttft.backends.base import Backend
from ttft.backends.providers.lean.chat import LeanChatBackend
from ttft.backends.transport.http import InstrumentedHTTP

from tests.fakes import FakeServer, Schedule
from tests.fakes.tls_server import TLSFakeServer
from tests.support.backend_util import backend_for, one_turn

PARTS = ("pool", "dns", "connect", "tls", "send", "server", "first_token")


def _make(path: str, srv: FakeServer) -> Backend:
    if path == "sdk":
        return backend_for("chat", srv)
    if path == "anthropic":
        return backend_for("anthropic", srv)
    b = LeanChatBackend("fake-model", base_url=srv.openai_base_url, api_key="sk-test")
    if path == "lean-aiohttp":
        b.use_aiohttp()
    return b


async def _turns(b: Backend, n: int) -> list[dict[str, Any]]:
    try:
        return [await one_turn(b, max_retries=0) for _ in range(n)]
    finally:
        await b.aclose()


def _row(label: str, recs: list[dict[str, Any]]) -> str:
    med = {p: statistics.median(r["metrics"]["wait_ms"][p] for r in recs) for p in PARTS}
    ttft = statistics.median(r["metrics"]["ttft_ms"] for r in recs)
    return f"{label:<22} " + " ".join(f"{med[p]:8.2f}" for p in PARTS) + f" {ttft:8.1f}"


async def recovery(n: int) -> None:
    with TLSFakeServer(Schedule(headers_ms=150, first_token_ms=230, token_ms=2, visible_tokens=4)) as srv:
        os.environ["SSL_CERT_FILE"] = srv.ca_file
        print(f"{'median ms':<22} " + " ".join(f"{p[:8]:>8}" for p in PARTS) + f" {'ttft':>8}")
        for path in ("sdk", "lean-httpx2", "lean-aiohttp", "anthropic"):
            recs = await _turns(_make(path, srv), n)
            bad = [r for r in recs if r["status"] != "ok"]
            if bad:
                print(f"{path}: {len(bad)} failed: {bad[0]['error']}")
                continue
            gap = max(abs(sum(r["metrics"]["wait_ms"].values()) - r["metrics"]["ttft_ms"]) for r in recs)
            print(_row(f"{path} new", recs[:1]))
            print(_row(f"{path} reused", recs[1:]) + f"   max |sum - ttft| {gap:.4f} ms")


class _Untraced(InstrumentedHTTP):
    async def _on_request(self, request: Any) -> None:
        await super()._on_request(request)
        request.extensions = {k: v for k, v in request.extensions.items() if k != "trace"}


async def trace_cost(n: int) -> None:
    with FakeServer(Schedule(first_token_ms=0, token_ms=1, visible_tokens=4)) as srv:
        out = {}
        for label, cls in (("traced (shipped)", InstrumentedHTTP), ("no trace extension", _Untraced)):
            b = LeanChatBackend("fake-model", base_url=srv.openai_base_url, api_key="sk-test")
            b.http = cls(b.timeout_s, tls=False)
            recs = await _turns(b, n + 2)
            out[label] = statistics.median(r["metrics"]["ttft_ms"] for r in recs[2:])
        for label, v in out.items():
            print(f"TTFT median, first token at once, {label:<20} {v:.3f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=20)
    args = p.parse_args()
    asyncio.run(recovery(args.turns))
    asyncio.run(trace_cost(args.turns * 3))


if __name__ == "__main__":
    main()
