"""A real MCP server on the official SDK (``MCPServer``) for the MCP client's tests and benchmark.

Run as ``python tests/fakes/mcp_server.py [MODE] [--http PORT]``: over stdio by default, or streamable
HTTP on 127.0.0.1. Modes make it misbehave the ways a real server can: ``--garbage`` prints lines that
are not JSON-RPC before serving, ``--mute`` reads stdin and never answers (not even initialize),
``--stderr`` writes a line to stderr at start. Its tools: ``echo``, ``noop``, ``slow`` (sleeps), ``fail`` (raises),
``big`` (N bytes of text), ``picture`` (an image and text), ``die`` (the process exits mid-call).

The hostile modes (issue 39), each still the SDK's server underneath:

- ``--tamper`` (stdio): the SDK's replies pass through :func:`tamper` on their way to stdout, which
  turns a marker the ``echo`` tool was given into bytes the SDK cannot read: ``@@BADBYTES@@`` (invalid
  UTF-8 inside a string), ``@@RAWBREAK@@`` (an invalid byte before the reply), ``@@SURROGATE@@`` (a
  lone surrogate), ``@@DEEP@@`` (arrays nested 5,000 deep) and ``@@NORESULT@@`` (a reply whose result
  is not an object).
- ``--bad-schema`` (stdio, with ``--tamper``'s pipe): in the tools list, ``noop``'s inputSchema is a
  string and ``fail``'s is not an object schema.
- ``--latin1-banner`` (stdio): a Latin-1 line on stdout before serving.
- ``--hostile-text``: a server name and version with line breaks, and tools whose description and
  title hold line breaks (one description 12,000 characters long).
- ``--require-token TOKEN`` (with ``--http``): 401 without an ``Authorization`` header, 403 with a
  wrong one.

In any hostile mode (or with ``--hostile`` alone) two tools more: ``rpc_error`` (answers a JSON-RPC
error with the code asked for) and ``shout`` (writes N bytes to stderr, then answers).
"""

from __future__ import annotations

import base64
import io
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import ImageContent, TextContent

PNG_BYTES = 12 * 1024  # the picture tool's image: "[image/png 12 KB]"
HOSTILE_NAME = "ttft-fake\nother  ready  · 9 tools"
LONG_DESCRIPTION = "Line one.\nLine two.\r\n\u2028" + "x" * 12000
HOSTILE = ("--hostile", "--tamper", "--bad-schema", "--latin1-banner", "--hostile-text", "--require-token")


def build(argv: Sequence[str] = ()) -> MCPServer:
    hostile = "--hostile-text" in argv
    server = MCPServer(HOSTILE_NAME if hostile else "ttft-fake", version="1.0\n\nfake 2.0" if hostile else "")

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

    if any(mode in argv for mode in HOSTILE):

        @server.tool(name="rpc_error", description="Answer a JSON-RPC error with this code.")
        def rpc_error(code: int, message: str = "the server says no") -> str:
            raise MCPError(code=code, message=message)

        @server.tool(name="shout", description="Write N bytes to stderr, then answer.")
        def shout(n: int) -> str:
            chunk = b"e" * 65535 + b"\n"
            left = n
            while left > 0:
                left -= os.write(2, chunk[: min(left, len(chunk))])
            return "shouted"

    if hostile:

        @server.tool(name="long", description=LONG_DESCRIPTION)
        def long() -> str:
            return ""

        @server.tool(name="titled", title="Title\nmcp other  ready")
        def titled() -> str:
            return ""

    return server


def tamper(line: str, argv: list[str]) -> bytes:
    """One reply of the SDK's (a JSON line) as the hostile server writes it."""
    data = line.encode("utf-8")
    if "--bad-schema" in argv and '"tools"' in line:
        reply = json.loads(line)
        for tool in reply.get("result", {}).get("tools", []):
            if tool["name"] == "noop":
                tool["inputSchema"] = "not a schema"
            elif tool["name"] == "fail":
                tool["inputSchema"] = {"type": "string"}
        data = (json.dumps(reply) + "\n").encode()
    if b"@@NORESULT@@" in data:
        reply = json.loads(line)
        data = (json.dumps({"jsonrpc": "2.0", "id": reply["id"], "result": "not an object"}) + "\n").encode()
    if b"@@RAWBREAK@@" in data:
        data = b"\xff" + data
    data = data.replace(b"@@BADBYTES@@", b"\xff\xfe")
    data = data.replace(b"@@SURROGATE@@", b"\\ud800")
    return data.replace(b'"@@DEEP@@"', b"[" * 5000 + b"]" * 5000)


class _Tampered(io.TextIOBase):
    """The SDK server's stdout: each line tampered with, then written to fd 1 as bytes."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv

    def write(self, text: str) -> int:
        data = memoryview(tamper(text, self.argv))
        while data:
            data = data[os.write(1, data) :]
        return len(text)

    def flush(self) -> None:
        pass


async def serve_tampered(server: MCPServer, argv: list[str]) -> None:
    """``server`` over stdio as ``run()`` serves it, its stdout through :class:`_Tampered`."""
    async with stdio_server(stdout=anyio.wrap_file(_Tampered(argv))) as (read, write):  # type: ignore[arg-type]
        low = server._lowlevel_server  # the SDK's own run_stdio_async does the same
        await low.run(read, write, low.create_initialization_options())


def serve_guarded(server: MCPServer, port: int, token: str) -> None:
    """Streamable HTTP behind a bearer token: 401 without one, 403 with a wrong one."""
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization")
            status = 401 if auth is None else 403 if auth != f"Bearer {token}".encode() else 0
            if status:
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
                await send({"type": "http.response.body", "body": b"no"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


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
    if "--latin1-banner" in argv:
        sys.stdout.buffer.write("Servidor listo: café, ñandú\n".encode("latin-1"))
        sys.stdout.flush()
    server = build(argv)
    if "--http" in argv:
        port = int(argv[argv.index("--http") + 1])
        if "--require-token" in argv:
            serve_guarded(server, port, argv[argv.index("--require-token") + 1])
        else:
            server.run("streamable-http", host="127.0.0.1", port=port)
    elif "--tamper" in argv or "--bad-schema" in argv:
        anyio.run(serve_tampered, server, argv)
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
