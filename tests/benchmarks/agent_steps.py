"""A tool-using turn's steps, measured against a schedule: what each step took, and ttft's own time between.

A loopback model (tests.fakes.agent_server) answers the first request with one tool call after
``--model-ms`` (150), the tool (an in-process host, tests.support.tool_host) takes ``--tool-ms`` (250),
and the model answers the second request after ``--answer-ms`` (100). Each turn runs through the real
agent loop (backends.agent.loop) and the lean Chat Completions reader, as ``ttft ask --mcp`` runs it
(``--api responses`` / ``messages`` and ``--sdk`` pick the others). Printed, as medians over ``--turns``:

- each step as the record measures it against the schedule: the first model step's TTFT (to the tool
  call), the tool step's duration, the second model step's TTFT (to the answer);
- ttft's own time between steps (the record's ``time_in_ttft_ms``, per gap: model -> tool, tool -> model),
  and each gap on its own: the first step's end -> the tool's start (reading the call, consent, the
  arguments), the tool's end -> the next request's arrival at the server (building and sending it).

Goal: ttft's own time <= 5 ms per step.

    python tests/benchmarks/agent_steps.py [--turns 15] [--api chat|responses|messages] [--sdk]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ttft.backends.agent.consent import Consent
from ttft.backends.agent.loop import AgentTurn
from ttft.backends.base import build_request
from ttft.backends.providers.registry import create_backend
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.steps import ModelStepRecord, ToolStepRecord

from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.tool_host import FakeHost, FakeTool

SPECS = {"chat": "compat:m", "responses": "openai-responses:m", "messages": "anthropic:m"}


async def one_turn(srv: AgentServer, spec: str, lean: bool, tool_s: float) -> tuple[TurnRecord, int]:
    base = srv.url if spec.startswith("anthropic") else srv.base_url
    backend = create_backend(spec, base_url=base, api_key="k", lean=lean)
    host = FakeHost(FakeTool("search", "result " * 50, delay_s=tool_s, server="web"))
    agent = AgentTurn(backend, build_request("go"), host, Consent(allow_all=True), session_id="b", turn_index=0)
    n = len(srv.arrived_ns)
    try:
        rec = await agent.run()
    finally:
        await backend.aclose()
    return rec, srv.arrived_ns[n + 1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=15)
    p.add_argument("--api", choices=sorted(SPECS), default="chat")
    p.add_argument("--sdk", action="store_true", help="read with the SDK rather than ttft's lean reader")
    p.add_argument("--model-ms", type=float, default=150.0)
    p.add_argument("--tool-ms", type=float, default=250.0)
    p.add_argument("--answer-ms", type=float, default=100.0)
    a = p.parse_args()
    script = [
        Step(calls=(Call("search", {"q": "weather"}),), first_ms=a.model_ms, piece_ms=1.0),
        Step(text="It is sunny today.", first_ms=a.answer_ms, piece_ms=1.0),
    ]
    rows: dict[str, list[float]] = {k: [] for k in ("m1", "tool", "m2", "own", "gap1", "gap2")}
    with AgentServer(script) as srv:
        for i in range(a.turns + 1):
            rec, second_arrival = asyncio.run(one_turn(srv, SPECS[a.api], not a.sdk, a.tool_ms / 1000))
            if i == 0:
                continue  # the first turn pays the imports and the first connection
            m1, tool, m2 = rec.steps
            assert isinstance(m1, ModelStepRecord) and isinstance(m2, ModelStepRecord)
            assert isinstance(tool, ToolStepRecord) and tool.end_ms is not None and m1.end_ms is not None
            assert rec.agent is not None and rec.timestamps.sent is not None
            rows["m1"].append(m1.ttft_ms)
            rows["tool"].append(tool.duration_ms)
            rows["m2"].append(m2.ttft_ms)
            rows["own"].append(rec.agent.time_in_ttft_ms / 2)
            rows["gap1"].append(tool.start_ms - m1.end_ms)
            rows["gap2"].append((second_arrival - rec.timestamps.sent) / 1e6 - tool.end_ms)

    def med(k: str) -> float:
        return statistics.median(rows[k])

    load = os.getloadavg()[0]
    reader = "SDK" if a.sdk else "lean"
    print(f"agent steps: {a.api} ({reader} reader), {a.turns} turns, load average {load:.2f}, medians")
    print(f"  model step 1 TTFT (to the tool call)  {med('m1'):7.1f} ms   schedule {a.model_ms:.0f} ms")
    print(f"  tool step                             {med('tool'):7.1f} ms   schedule {a.tool_ms:.0f} ms")
    print(f"  model step 2 TTFT (to the answer)     {med('m2'):7.1f} ms   schedule {a.answer_ms:.0f} ms")
    print(f"  ttft's own time per step (time_in_ttft_ms / 2)  {med('own'):5.2f} ms   goal <= 5 ms")
    print(f"    model end -> tool start             {med('gap1'):7.2f} ms")
    print(f"    tool end -> next request at server  {med('gap2'):7.2f} ms")


if __name__ == "__main__":
    main()
