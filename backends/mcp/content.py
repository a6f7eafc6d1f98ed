"""A tool call's result as the text the model reads: text content joined, anything else described in
a few words (``[image/png 12 KB]``), and the whole cut to the host's cap at a character's boundary.

The model gets words, not bytes it cannot read here: an image is named with its type and size rather
than pasted as base64 that would fill its context.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from ..agent.host import DEFAULT_MAX_RESULT_BYTES, ToolResult, cap


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{round(n / 1024)} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _b64_size(data: str) -> int:
    """The decoded size of base64 text, without decoding it."""
    data = data.rstrip("=")
    return len(data) * 3 // 4


def describe(block: Any) -> str:
    """One content block as text: its text, or a bracketed description of what it is."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        mime = block.mime_type or kind
        return f"[{mime} {_size(_b64_size(block.data))}]"
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        if isinstance(res, types.TextResourceContents):
            return res.text
        if isinstance(res, types.BlobResourceContents):
            return f"[{res.mime_type or 'resource'} {_size(_b64_size(res.blob))} {res.uri}]"
    if isinstance(block, types.ResourceLink):
        return f"[resource {block.name}: {block.uri}]"
    kind = getattr(block, "type", None) or type(block).__name__
    return f"[{kind} content]"


def result_text(result: types.CallToolResult) -> str:
    """The whole result as text; structured content alone (no blocks) as its JSON."""
    parts = [describe(b) for b in result.content]
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return "\n".join(parts)


def to_result(result: types.CallToolResult, max_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> ToolResult:
    return cap(ToolResult(result_text(result), is_error=bool(result.is_error)), max_bytes)
