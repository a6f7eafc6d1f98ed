"""CPU per chunk of the lean reader's own layers, from a body read to the recorder, with no network.

    python tests/benchmarks/lean_chunk_cost.py [--tokens 1000] [--loop auto|asyncio]

client_capacity.py measures the whole client under load, where the machine's other programs move
its figures by tens of microseconds. This times, the same way each run, what ttft adds between the
HTTP client's socket reads and the recorder: a turn of ``--tokens`` streamed chunks (one SSE event
per read, as at 20 tok/s) through ``run_turn`` -> ``HostedBackend.stream`` -> the lean reader's
SSE split, orjson and translation, with aiohttp's response swapped for one whose reads return at
once (so no socket, parser or loop wake-up is counted: those are the HTTP client's and the loop's).
Printed: the layers' CPU per chunk (best of 5 turns, a short turn's cost subtracted, so it is per
chunk, not per request), and the same for the split + JSON + translation alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from multidict import CIMultiDict  # noqa: E402
from ttft.backends.base import ChatRequest, Message  # noqa: E402
from ttft.backends.load import event_loop  # noqa: E402
from ttft.backends.providers.lean.chat import LeanChatBackend  # noqa: E402
from ttft.backends.providers.lean.sse import SSESplitter, loads  # noqa: E402
from ttft.backends.transport.aiohttp_client import AiohttpClient, AiohttpResponse  # noqa: E402
from ttft.backends.transport.http import Probe  # noqa: E402
from ttft.backends.turn import new_recorder, run_turn  # noqa: E402
from ttft.telemetry import events as ev  # noqa: E402
from ttft.telemetry.settings import TurnSettings  # noqa: E402


def body(tokens: int) -> list[bytes]:
    """The wire of one answer, one read per event (as a stream at 20 tok/s arrives)."""
    reads = []
    for i in range(tokens):
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}]}  # fmt: skip
        reads.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    last = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": tokens + 5}}  # fmt: skip
    reads.append(b"data: " + json.dumps(last).encode() + b"\n\n")
    reads.append(b"data: [DONE]\n\n")
    return reads


class _Content:
    def __init__(self, reads: list[bytes]) -> None:
        self._reads = iter(reads)

    async def readany(self) -> bytes:
        return next(self._reads, b"")


class _Raw:
    status = 200
    version = None

    def __init__(self, reads: list[bytes]) -> None:
        self.headers = CIMultiDict({"content-type": "text/event-stream"})
        self.content = _Content(reads)

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class _InstantClient(AiohttpClient):
    """The lean reader's client, its response's reads answered from memory."""

    reads: ClassVar[list[bytes]] = []

    async def send(
        self, url: str, *, body: bytes, headers: dict[str, str], params: dict[str, str], probe: Probe
    ) -> AiohttpResponse:
        probe.begin_attempt()
        probe.status = 200
        probe.push(ev.HeadersReceived(ev.now_ns(), probe.attempt, 200, None))
        return AiohttpResponse(_Raw(self.reads), url, params, probe, None)  # type: ignore[arg-type]


async def turn_s(backend: LeanChatBackend, reads: list[bytes]) -> float:
    assert isinstance(backend._aio, _InstantClient)
    backend._aio.reads = reads
    request = ChatRequest((Message("user", "hi"),), TurnSettings(max_output_tokens=len(reads)))
    recorder = new_recorder(backend, request, session_id="cost", turn_index=0)
    t0 = time.process_time()
    record = await run_turn(backend, request, recorder)
    used = time.process_time() - t0
    assert record.status == "ok", record.error
    return used


async def layers_us(tokens: int) -> float:
    backend = LeanChatBackend("m", provider="compat", base_url="http://127.0.0.1:9/v1", compat=True)
    backend._aio = _InstantClient(timeout_s=None, connect_timeout_s=1)
    long_reads, short_reads = body(tokens), body(1)
    best = float("inf")
    for _ in range(5):
        best = min(best, await turn_s(backend, long_reads) - await turn_s(backend, short_reads))
    await backend.http.aclose()
    return best / (tokens - 1) * 1e6


def parse_us(tokens: int) -> float:
    backend = LeanChatBackend("m", provider="compat", base_url="http://127.0.0.1:9/v1", compat=True)
    from ttft.backends.providers.hosted import TurnState
    from ttft.backends.think import ThinkSplitter

    reads = body(tokens)[:-2]
    best = float("inf")
    for _ in range(5):
        state = TurnState(extra={"splitter": ThinkSplitter(), "complete": False})
        split = SSESplitter()
        t0 = time.process_time()
        for raw in reads:
            for data in split.feed(raw):
                for _e in backend._translate(loads(data), 0, state):
                    pass
        best = min(best, time.process_time() - t0)
    return best / tokens * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=1000)
    p.add_argument("--loop", choices=("auto", "asyncio"), default="auto")
    a = p.parse_args()
    os.environ.setdefault("TTFT_DATA_DIR", tempfile.mkdtemp(prefix="ttft-chunk-cost-"))
    if a.loop == "asyncio":
        os.environ[event_loop.ENV] = "asyncio"
    factory = event_loop.loop_factory()
    layers = event_loop.run(layers_us(a.tokens), factory)
    parse = parse_us(a.tokens)
    print(f"lean reader, {a.tokens} chunks, {event_loop.loop_name(factory)} loop: "
          f"{layers:.1f} us/chunk from a read to the recorder; split + orjson + translation {parse:.1f} us/chunk; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
