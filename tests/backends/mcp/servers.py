"""The fake MCP server (tests/fakes/mcp_server.py) as the host's tests start it: over stdio, or over
streamable HTTP on a free 127.0.0.1 port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ttft.backends.providers.config import McpServerConfig

from tests.support.paths import ROOT

FAKE = ROOT / "tests" / "fakes" / "mcp_server.py"


def stdio(name: str, *mode: str, tools: tuple[str, ...] | None = None) -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable, args=(str(FAKE), *mode), tools=tools)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(*mode: str) -> Iterator[str]:
    """The fake served over streamable HTTP (in ``mode``): its /mcp URL, until the block ends."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FAKE), "--http", str(port), *mode], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60  # a loaded machine: the SDK's import alone may take seconds
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the fake MCP server over HTTP did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
