"""A real MCP server on the official SDK (``MCPServer``) for the MCP client's tests and benchmark.

Run as ``python tests/fakes/mcp_server.py [MODE] [--http PORT]``: over stdio by default, or streamable
HTTP on 127.0.0.1. Modes make it misbehave the ways a real server can: ``--garbage`` prints lines that
are not JSON-RPC before serving, ``--mute`` reads stdin and never answers (not even initialize),
``--stderr`` writes a line to stderr at start. Its tools: ``echo``, ``noop``, ``slow`` (sleeps), ``fail`` (raises),
``big`` (N bytes of text), ``picture`` (an image and text), ``die`` (the process exits mid-call).
"""

from __future__ import annotations

import base64
import os
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ImageContent, TextContent

PNG_BYTES = 12 * 1024  # the picture tool's image: "[image/png 12 KB]"


def build() -> MCPServer:
    server = MCPServer("ttft-fake")

    @server.tool(name="echo", description="Say the text back.\x1b[31m red?")
    def echo(text: str) -> str:
        return text

    @server.tool(name="noop", description="Do nothing, at once.")
    def noop() -> str:
        return ""

    @server.tool(name="slow", description="Sleep, then answer.")
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "slept"

    @server.tool(name="fail", description="Always fails.")
    def fail() -> str:
        raise ToolError("the tool broke on purpose")

    @server.tool(name="big", description="Answer N bytes of text.")
    def big(n: int) -> str:
        return "x" * n

    @server.tool(name="picture", description="An image with a caption.")
    def picture() -> list[TextContent | ImageContent]:
        data = base64.b64encode(b"\x89PNG" + b"\0" * (PNG_BYTES - 4)).decode()
        return [
            TextContent(type="text", text="a caption"),
            ImageContent(type="image", data=data, mime_type="image/png"),
        ]

    @server.tool(name="die", description="The server exits mid-call.")
    def die() -> str:
        os._exit(3)

    return server


def mute() -> None:
    """Read every request and answer none: a server hung before initialize."""
    for _ in sys.stdin:
        pass
    time.sleep(3600)


def main(argv: list[str]) -> None:
    if "--stderr" in argv:
        print("fake server starting", file=sys.stderr, flush=True)
    if "--mute" in argv:
        mute()
        return
    if "--garbage" in argv:
        sys.stdout.write('this is not json-rpc\n{"jsonrpc": "2.0", "oops": 1}\n\x1b[2J\n')
        sys.stdout.flush()
    server = build()
    if "--http" in argv:
        port = int(argv[argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
