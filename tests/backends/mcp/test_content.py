"""A tool's result as the model reads it: text joined, other content described, capped at a
character's boundary with the full size kept."""

from __future__ import annotations

import base64

import mcp_types as types
from ttft.backends.agent.host import ToolResult, cap
from ttft.backends.mcp.content import result_text, to_result


def test_text_is_joined_and_other_content_described() -> None:
    png = base64.b64encode(b"\0" * 12 * 1024).decode()
    wav = base64.b64encode(b"\0" * 3 * 1024 * 1024).decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="one"),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
            types.AudioContent(type="audio", data=wav, mime_type="audio/wav"),
            types.ResourceLink(type="resource_link", name="notes", uri="file:///notes.md"),
            types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///b.bin", blob=base64.b64encode(b"12").decode()),
            ),
        ]
    )
    assert result_text(result).split("\n") == [
        "one",
        "[image/png 12 KB]",
        "[audio/wav 3.0 MB]",
        "[resource notes: file:///notes.md]",
        "inside",
        "[resource 2 B file:///b.bin]",
    ]


def test_structured_content_alone_is_its_json_and_an_error_stays_one() -> None:
    result = types.CallToolResult(content=[], structured_content={"temp": 21}, is_error=True)
    got = to_result(result)
    assert got.text == '{"temp": 21}' and got.is_error


def test_the_cap_cuts_at_a_characters_boundary_and_keeps_the_full_size() -> None:
    text = "é" * 10  # 2 bytes each
    got = cap(ToolResult(text), max_bytes=5)
    assert (got.text, got.size_bytes, got.truncated) == ("éé", 20, True)
    whole = cap(ToolResult(text), max_bytes=20)
    assert (whole.text, whole.size_bytes, whole.truncated) == (text, 20, False)
