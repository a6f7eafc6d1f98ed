"""A tool-using turn in the chat (the real ``ChatApp``, headless): ttft's own time between steps while the
screen draws each step, against the same schedule as ``agent_steps.py`` (``ttft ask``'s loop, no screen).

A loopback model (tests.fakes.agent_server) asks for one tool call after ``--model-ms`` (150), the tool
(an in-process host) takes ``--tool-ms`` (250), the model answers after ``--answer-ms`` (100). The tool
is allowed for the chat ("always") before the first turn, so no dialog waits; each turn is sent as a
person would (typed, Enter) and the next one once its figures are shown. Printed, as medians over
``--turns``: the record's ``time_in_ttft_ms`` (ttft's own time between the steps: reading the call,
starting the tool, building and sending the next request, on the stream thread while the UI draws),
and the tool's end -> the next request's arrival at the server.

    python tests/benchmarks/chat_agent_steps.py [--turns 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


async def run(turns: int, model_ms: float, tool_ms: float, answer_ms: float) -> list[tuple[float, float]]:
    from ttft.backends.providers.registry import create_backend
    from ttft.telemetry.steps import ToolStepRecord
    from ttft.tui.chat.app import ChatApp
    from ttft.tui.tool_servers import ToolServers

    from tests.fakes.agent_server import AgentServer, Call, Step
    from tests.support.tool_host import FakeHost, FakeTool
    from tests.support.tui_support import factory_for

    script = [Step(calls=(Call("search", {"q": "x"}),), first_ms=model_ms), Step(text="done", first_ms=answer_ms)]
    out: list[tuple[float, float]] = []
    with AgentServer(script) as srv:
        tools = ToolServers()
        tools.host = FakeHost(FakeTool("search", "result " * 50, delay_s=tool_ms / 1000, server="web"))  # type: ignore[assignment]
        backend = create_backend("compat:m", base_url=srv.base_url, lean=True)
        app = ChatApp("compat:m", factory=factory_for(backend), tools=tools)
        async with app.run_test(size=(160, 50)) as pilot:
            app.chat.chat_tools.consent.allowed.add("search")
            for n in range(1, turns + 2):  # the first turn (imports, first paints) is left out
                arrived = len(srv.arrived_ns)
                await pilot.press(*f"turn {n}")
                await pilot.press("enter")
                deadline = time.monotonic() + 60
                while len(app.chat.session.records) < n or app.chat.busy:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"turn {n} did not end")
                    await pilot.pause(0.02)
                rec = app.chat.session.records[-1]
                tool = next(s for s in rec.steps if isinstance(s, ToolStepRecord))
                assert rec.agent is not None and rec.timestamps.sent is not None and tool.end_ms is not None
                tool_end_ns = rec.timestamps.sent + int(tool.end_ms * 1e6)
                if n > 1:
                    out.append((rec.agent.time_in_ttft_ms, (srv.arrived_ns[arrived + 1] - tool_end_ns) / 1e6))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=15)
    p.add_argument("--model-ms", type=float, default=150.0)
    p.add_argument("--tool-ms", type=float, default=250.0)
    p.add_argument("--answer-ms", type=float, default=100.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TTFT_DATA_DIR"] = tmp  # the turns' logs and history are the benchmark's own
        got = asyncio.run(run(args.turns, args.model_ms, args.tool_ms, args.answer_ms))
    own = statistics.median(g[0] for g in got)
    gap = statistics.median(g[1] for g in got)
    print(f"chat, {len(got)} turns (load average {os.getloadavg()[0]:.1f})")
    print(f"  ttft's own time between steps (time_in_ttft_ms, 2 gaps): median {own:.2f} ms, {own / 2:.2f} ms per gap")
    print(f"  tool end -> next request at the server: median {gap:.2f} ms")


if __name__ == "__main__":
    main()
