"""How far ttft's measured TTFT/TPOT are from a bare SDK loop timing the same server, per API.

Runs a loopback fake server (first token at 100 ms, then one token every 10 ms, 30 tokens),
then alternates, N times per API: one turn through ttft's backend (instrumented HTTP client,
byte-arrival stamps, recorder) and one bare ``async for`` over the official SDK stream
stamped with ``time.monotonic_ns()`` where the SDK yields. Prints, per API, the median and
p99 of (ttft - bare) for TTFT and TPOT, plus each side's median error against the schedule.

    python tests/benchmarks/sdk_overhead.py [N]
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anthropic
import openai
from ttft.telemetry.metrics import percentiles

from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import backend_for, one_turn

SCHEDULE = Schedule(first_token_ms=100, token_ms=10, visible_tokens=30)
MSG = [{"role": "user", "content": "hi"}]


async def bare(api: str, srv: FakeServer) -> tuple[float, float]:
    """TTFT and TPOT (ms) as a plain SDK loop sees them."""
    stamps: list[int] = []
    if api == "anthropic":
        a = anthropic.AsyncAnthropic(base_url=srv.url, api_key="k", max_retries=0)
        t0 = time.monotonic_ns()
        stream = await a.messages.create(model="m", max_tokens=100, messages=MSG, stream=True)
        async for e in stream:
            if e.type == "content_block_delta" and e.delta.type == "text_delta":
                stamps.append(time.monotonic_ns())
        await a.close()
    else:
        o = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="k", max_retries=0)
        t0 = time.monotonic_ns()
        if api == "chat":
            stream = await o.chat.completions.create(model="m", messages=MSG, stream=True)
            async for c in stream:
                if c.choices and c.choices[0].delta.content:
                    stamps.append(time.monotonic_ns())
        else:
            stream = await o.responses.create(model="m", input="hi", stream=True)
            async for e in stream:
                if e.type == "response.output_text.delta":
                    stamps.append(time.monotonic_ns())
        await o.close()
    ttft = (stamps[0] - t0) / 1e6
    tpot = (stamps[-1] - stamps[0]) / 1e6 / (len(stamps) - 1)
    return ttft, tpot


async def main(n: int) -> None:
    with FakeServer(SCHEDULE) as srv:
        print(
            f"schedule: first token {SCHEDULE.first_token_ms:g} ms, then {SCHEDULE.token_ms:g} ms/token, "
            f"{SCHEDULE.visible_tokens} tokens; {n} pairs per API (after one warm-up pair)\n"
        )
        print(
            f"{'API':<12} {'dTTFT p50':>10} {'dTTFT p99':>10} {'dTPOT p50':>10} {'dTPOT p99':>10}   "
            f"{'ttft TTFT':>9} {'bare TTFT':>9} {'ttft TPOT':>9} {'bare TPOT':>9}"
        )
        for api in ("chat", "responses", "anthropic"):
            backend = backend_for(api, srv)
            d_ttft, d_tpot, ours_ttft, bare_ttft, ours_tpot, bare_tpot = [], [], [], [], [], []
            for i in range(n + 1):
                d = await one_turn(backend, max_retries=0)
                b_ttft, b_tpot = await bare(api, srv)
                if i == 0:
                    continue  # first-use costs of both sides
                m = d["metrics"]
                ours_ttft.append(m["ttft_ms"])
                ours_tpot.append(m["tpot_ms"])
                bare_ttft.append(b_ttft)
                bare_tpot.append(b_tpot)
                d_ttft.append(m["ttft_ms"] - b_ttft)
                d_tpot.append(m["tpot_ms"] - b_tpot)
            await backend.aclose()
            pt, pp = percentiles(d_ttft), percentiles(d_tpot)
            print(
                f"{api:<12} {pt.p50:>+10.2f} {pt.p99:>+10.2f} {pp.p50:>+10.3f} {pp.p99:>+10.3f}   "
                f"{percentiles(ours_ttft).p50:>9.1f} {percentiles(bare_ttft).p50:>9.1f} "
                f"{percentiles(ours_tpot).p50:>9.2f} {percentiles(bare_tpot).p50:>9.2f}"
            )
        print(
            "\nd = ttft's measurement minus the bare SDK loop's (ms); negative = ttft reads earlier (closer to "
            "the bytes' arrival)."
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
