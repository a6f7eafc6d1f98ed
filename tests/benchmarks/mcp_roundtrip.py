"""What a tool call costs through ttft's MCP host: the round trip of a no-op tool to a real MCP server
(tests/fakes/mcp_server.py, the official SDK's ``MCPServer``) over stdio, and over streamable HTTP on
127.0.0.1; and the server's start (spawn, initialize, list tools).

Prints the median, p90 and min of ``--calls`` sequential calls of ``noop`` (after ``--warmup``), each
timed from ``McpHost.call`` to its ``ToolResult``, and the load average, since the shared machine's
load moves these figures.

    python tests/benchmarks/mcp_roundtrip.py [--calls 200] [--warmup 20] [--no-http]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.backends.mcp.host import McpHost, start_host  # noqa: E402
from ttft.backends.providers.config import McpServerConfig  # noqa: E402

from tests.backends.mcp.servers import http_server, stdio  # noqa: E402


async def _calls(host: McpHost, n: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await host.call("noop", {})
    took: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        result = await host.call("noop", {})
        took.append((time.perf_counter_ns() - t0) / 1e6)
        assert not result.is_error, result.text
    return took


async def _one(label: str, server: McpServerConfig, n: int, warmup: int) -> None:
    with tempfile.TemporaryDirectory() as logs:
        host = await start_host([server], log_dir=Path(logs), on_notice=print, start_timeout_s=60)
        try:
            st = host.startup[0]
            took = sorted(await _calls(host, n, warmup))
        finally:
            await host.aclose()
    spawn = f"spawn {st.spawn_ms:.1f} ms, " if st.spawn_ms is not None else ""
    print(f"{label}: start {spawn}initialize {st.initialize_ms:.1f} ms, list tools {st.list_tools_ms:.1f} ms")
    p90 = took[int(0.9 * (len(took) - 1))]
    print(
        f"{label}: noop round trip over {n} calls: median {statistics.median(took):.3f} ms,"
        f" p90 {p90:.3f} ms, min {took[0]:.3f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--no-http", action="store_true", help="the stdio server only")
    a = ap.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} · {os.cpu_count()} CPUs")
    asyncio.run(_one("stdio", stdio("bench"), a.calls, a.warmup))
    if not a.no_http:
        with http_server() as url:
            asyncio.run(_one("http ", McpServerConfig(name="bench", url=url), a.calls, a.warmup))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
