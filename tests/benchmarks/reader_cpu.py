"""Client CPU per streamed chunk, through each API's SDK and through its lean reader.

    python tests/benchmarks/reader_cpu.py [--tokens 2000] [--runs 5]

The loopback fake server runs in its own process (its CPU is not the client's), streaming
``--tokens`` one-token chunks as fast as it can. This process runs one turn per path and API
through ``run_turn`` (the same loop as ``ttft ask``) on the httpx2 client and reads its own CPU
time (``time.process_time``) around it; a 2-token turn's CPU is subtracted so the figure is per
chunk, not per request. The paths alternate within each run (SDK, lean, SDK, lean ...) so that
their ratio shares the machine's load; printed are the median per chunk over ``--runs`` and the
ratio SDK / lean, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

APIS = ("chat", "responses", "messages")


def _serve(conn: Any, tokens: int) -> None:
    import tests.fakes as fakes

    srv = fakes.FakeServer(fakes.Schedule(first_token_ms=1, token_ms=0, visible_tokens=tokens)).start()
    conn.send(srv.url)
    conn.recv()  # stop
    srv.stop()


def _backend(api: str, lean: bool, url: str) -> Any:
    if api == "chat":
        if lean:
            from ttft.backends.providers.lean.chat import LeanChatBackend as Chat
        else:
            from ttft.backends.providers.openai_chat import OpenAIChatBackend as Chat  # type: ignore[assignment]
        return Chat("m", provider="compat", base_url=url + "/v1", compat=True)
    if api == "responses":
        if lean:
            from ttft.backends.providers.lean.responses import LeanResponsesBackend as Responses
        else:
            from ttft.backends.providers.openai_responses import OpenAIResponsesBackend as Responses  # type: ignore[assignment]
        return Responses("m", base_url=url + "/v1", api_key="k")
    if lean:
        from ttft.backends.providers.lean.messages import LeanMessagesBackend as Messages
    else:
        from ttft.backends.providers.anthropic_messages import AnthropicMessagesBackend as Messages  # type: ignore[assignment]
    return Messages("m", base_url=url, api_key="k")


async def _cpu_s(backend: Any, tokens: int) -> float:
    from ttft.backends.base import ChatRequest, Message
    from ttft.backends.turn import new_recorder, run_turn
    from ttft.telemetry.settings import TurnSettings

    request = ChatRequest((Message("user", "hi"),), TurnSettings(max_output_tokens=tokens, max_retries=0))
    recorder = new_recorder(backend, request, session_id="cpu", turn_index=0, saved_probe=False)
    t0 = time.process_time()
    record = await run_turn(backend, request, recorder)
    used = time.process_time() - t0
    assert record.status == "ok", record.error
    return used


async def per_chunk_us(api: str, lean: bool, long_url: str, short_url: str, tokens: int) -> float:
    long_b, short_b = _backend(api, lean, long_url), _backend(api, lean, short_url)
    try:
        await _cpu_s(long_b, tokens)  # first use: connections, the SDK's models
        await _cpu_s(short_b, 2)
        return (await _cpu_s(long_b, tokens) - await _cpu_s(short_b, 2)) / (tokens - 2) * 1e6
    finally:
        await long_b.aclose()
        await short_b.aclose()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args()
    os.environ.setdefault("TTFT_DATA_DIR", tempfile.mkdtemp(prefix="ttft-reader-cpu-"))
    ctx = mp.get_context("spawn")
    servers = []
    for n in (a.tokens, 2):
        conn, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, n), daemon=True)
        proc.start()
        servers.append((conn, proc, conn.recv()))
    (_, _, long_url), (_, _, short_url) = servers
    print(f"{a.tokens} one-token chunks per turn, {a.runs} runs; load average {os.getloadavg()[0]:.1f}")
    got: dict[tuple[str, bool], list[float]] = {(api, lean): [] for api in APIS for lean in (False, True)}
    try:
        for _ in range(a.runs):
            for api in APIS:
                for lean in (False, True):
                    got[(api, lean)].append(asyncio.run(per_chunk_us(api, lean, long_url, short_url, a.tokens)))
    finally:
        for conn, proc, _ in servers:
            conn.send("stop")
            proc.join(5)
    print(f"{'API':<10} {'SDK us/chunk':>13} {'lean us/chunk':>14} {'SDK / lean':>11}")
    for api in APIS:
        sdk, lean = (statistics.median(got[(api, x)]) for x in (False, True))
        print(f"{api:<10} {sdk:>13.1f} {lean:>14.1f} {sdk / lean:>10.2f}x")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
