"""The server's own account against a schedule that knows the truth: vLLM's per-request figures as ttft joins them.

    PYTHONPATH=. python tests/benchmarks/server_join.py [--turns 20]

A loopback fake with vLLM's per-request metrics holds each request in its queue for 400 ms and sends
the first token 150 ms after scheduling. For each OpenAI reader (the SDKs' and the lean ones) it prints
the median and largest distance of ``server_queue_ms`` and ``server_ttft_ms`` from that schedule, and
the rest of the client's TTFT (``server_rest_ms``: loopback, HTTP and the reader), and how far that rest
is from the wire split's network part (dns + connect + tls + send, ``metrics.wait_ms``). The join passes the
server's figures on exactly (the tests assert it); what this measures is how near the server's own
clock comes to the schedule, and what is left for the path between.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ttft.backends.providers.lean.chat import LeanChatBackend

from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import backend_for, one_turn

HELD = Schedule(queue_hold_ms=400, first_token_ms=150, token_ms=5, visible_tokens=6, vllm_metrics=True)
READERS = ("compat", "lean-chat", "responses", "lean-responses")


async def turns(reader: str, n: int) -> list[dict[str, Any]]:
    out = []
    with FakeServer(HELD) as srv:
        for _ in range(n):
            if reader == "lean-chat":
                b: Any = LeanChatBackend("fake-model", provider="compat", base_url=srv.openai_base_url, compat=True)
            else:
                b = backend_for(reader, srv)
            try:
                out.append((await one_turn(b, max_retries=0, stream=True))["metrics"])
            finally:
                await b.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=20)
    args = ap.parse_args()
    os.environ.setdefault("TTFT_DATA_DIR", "/tmp/ttft-server-join")
    print(f"{args.turns} turns per reader, load average {os.getloadavg()[0]:.2f}")
    print(f"{'reader':<16} {'queue - 400 ms':>22} {'TTFT - 150 ms':>22} {'rest of TTFT':>18} {'rest - network':>18}")
    for reader in READERS:
        ms = asyncio.run(turns(reader, args.turns))
        q = [abs(m["server_queue_ms"] - HELD.queue_hold_ms) for m in ms]
        t = [abs(m["server_ttft_ms"] - HELD.first_token_ms) for m in ms]
        r = [m["server_rest_ms"] for m in ms]
        w = [m["server_rest_ms"] - sum(m["wait_ms"][k] for k in ("dns", "connect", "tls", "send")) for m in ms]
        print(
            f"{reader:<16} {statistics.median(q):>9.2f} (max {max(q):6.2f}) {statistics.median(t):>9.2f} "
            f"(max {max(t):6.2f}) {statistics.median(r):>7.2f} (max {max(r):6.2f}) "
            f"{statistics.median(w):>7.2f} (max {max(w):6.2f}) ms"
        )


if __name__ == "__main__":
    main()
