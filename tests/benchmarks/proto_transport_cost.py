"""CPU per chunk of the Protocol + httptools transport's own code (backends.transport.http1), with no socket.

    python tests/benchmarks/proto_transport_cost.py [--tokens 2000] [--loop auto|asyncio]

client_capacity.py measures the whole client under load; lean_chunk_cost.py the reader's layers above
the HTTP client. This times what sits between them on the bench's default path: each chunk of a
chunked-encoded SSE answer handed to ``Conn.data_received`` as one socket read (httptools' parser, the
stamp, the queue) and taken back by ``ProtoResponse.read_stamped`` (the wake-up, the probe's stamp),
with a transport that only counts pause/resume. Printed: best of 5 turns, CPU per chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.backends.load import event_loop  # noqa: E402
from ttft.backends.transport.http import Probe  # noqa: E402
from ttft.backends.transport.http1 import Conn, ProtoResponse  # noqa: E402


class _Transport(asyncio.Transport):
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def reads(tokens: int) -> list[bytes]:
    """One chunked-encoding chunk per read, each one SSE event (as a stream at 20 tok/s arrives)."""
    out = []
    for i in range(tokens):
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]}  # fmt: skip
        event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        out.append(b"%x\r\n%s\r\n" % (len(event), event))
    out.append(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
    return out


async def one_turn(wire: list[bytes]) -> float:
    conn = Conn(("http", "h", 80))
    conn.connection_made(_Transport())
    conn.begin()
    conn.data_received(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    resp = ProtoResponse(conn, "http://h/v1/chat/completions", {}, Probe(), None, lambda c, keep: None)
    feed, read = conn.data_received, resp.read_stamped
    loop = asyncio.get_running_loop()
    t0 = time.process_time()
    for data in wire:
        # the socket's read lands while the reader waits, as under load: a wake-up per chunk
        loop.call_soon(feed, data)
        await read()
    assert await read() == b""
    return time.process_time() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--loop", choices=("auto", "asyncio"), default="auto")
    a = p.parse_args()
    factory = event_loop.loop_factory() if a.loop == "auto" else None
    wire = reads(a.tokens)

    async def best() -> float:
        return min([await one_turn(wire) for _ in range(5)])

    s = event_loop.run(best(), factory)
    print(
        f"Protocol + httptools transport, {event_loop.loop_name(factory)}: {s / len(wire) * 1e6:.2f} us a chunk "
        f"(parse, stamp, queue, wake-up, hand-over; best of 5 turns of {a.tokens} chunks)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
