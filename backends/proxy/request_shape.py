"""What the proxy reads of a call's request body: the model, whether it streams, and its shape.

The body is parsed through the untrusted-JSON guard (:mod:`telemetry.json_guard`): one too large,
too deep or not JSON is still forwarded unchanged, and its call is recorded with what could be read
(nothing of the body) and a notice saying so. The shape (:class:`telemetry.proxy.shape.CallShape`'s
request half) holds digests, never content: one per message (its role and the canonical JSON of its
content, blake2b, 8 bytes, keyed), one of the system prompt or instructions, and the ids of the tool results
the request carries (Chat: ``tool`` messages' ``tool_call_id``; Messages: ``tool_result`` blocks'
``tool_use_id``; Responses: ``function_call_output`` items' ``call_id``).

The digests are only ever compared with each other, within one proxy process (one run's calls), so
they are keyed with random bytes that process holds in memory alone: a digest in the session log
cannot be checked against a guessed message ("yes", a file's known text).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from ...telemetry import json_guard
from .decode import BodyDecoder

MAX_ID_CHARS = 128
_KEY = secrets.token_bytes(16)  # this process's digest key (see the module doc): never written anywhere


# Keys an app moves between calls without changing what a message says: Claude Code puts
# ``cache_control`` on the last message of each request, so a message's digest must not hold it.
_VOLATILE = frozenset({"cache_control"})


def _canonical(content: Any) -> Any:
    """The content as it reads, whatever form it came in: a string is one text block, and the keys an app
    moves from call to call (:data:`_VOLATILE`) are dropped from each block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [{k: v for k, v in b.items() if k not in _VOLATILE} if isinstance(b, dict) else b for b in content]
    return content


def digest(role: str, content: Any) -> str:
    """A short stable digest of one message: its role and its content's canonical JSON (see :func:`_canonical`)."""
    try:
        text = json.dumps(_canonical(content), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(content)
    h = hashlib.blake2b(digest_size=8, key=_KEY)
    h.update(role.encode("utf-8", "replace"))
    h.update(b"\x00")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _id(value: Any) -> str | None:
    """An id from the body: a string, printable, bounded; anything else is no id."""
    if not isinstance(value, str) or not value:
        return None
    clean = "".join(c for c in value[:MAX_ID_CHARS] if c.isprintable())
    return clean or None


def _role(value: Any) -> str:
    return value[:64] if isinstance(value, str) else ""


def _text(content: Any) -> str:
    """The readable text of a message's content (a string, or text parts), for the prompt and its size."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                t = part.get("text")
                if isinstance(t, str):
                    out.append(t)
                elif isinstance(part.get("content"), str | list):
                    out.append(_text(part["content"]))
        return "\n".join(o for o in out if o)
    return ""


@dataclass
class RequestShape:
    """A request body as the proxy reads it (see the module doc)."""

    model: str = ""
    stream: bool = False
    system_digest: str = ""
    message_digests: tuple[str, ...] = ()
    tool_results: tuple[str, ...] = ()
    previous_response_id: str | None = None
    prompt: str = ""  # the last user message's text (kept only with keep_content)
    input_chars: int = 0  # every message's text: an input estimate when the server reports no usage
    unread: str | None = None  # why the body could not be read, or None
    extra: dict[str, Any] = field(default_factory=dict)


def read_request(
    body: bytes, api: str, max_bytes: int = json_guard.MAX_BYTES, content_encoding: str | None = None
) -> RequestShape:
    """The shape of a request body of ``api`` ("chat.completions", "responses", "messages"), read through
    a decoded copy when the client compressed it (``Content-Encoding``): the upstream gets its bytes as sent."""
    if not body:
        return RequestShape(unread="the request had no body")
    if content_encoding:
        decoder = BodyDecoder(content_encoding)
        body = decoder.feed(body)
        if decoder.error is not None:
            return RequestShape(unread=decoder.error)
    try:
        doc = json_guard.loads(body, "the request body", max_bytes=max_bytes)
    except ValueError as exc:  # JsonRefused (too large, too deep, not JSON), or not UTF-8
        return RequestShape(unread=str(exc)[:200])
    if not isinstance(doc, dict):
        return RequestShape(unread="the request body is not a JSON object")
    model = doc.get("model")
    shape = RequestShape(
        model=model[:200] if isinstance(model, str) else "",
        stream=doc.get("stream") is True,
    )
    try:
        if api == "messages":
            _messages(doc, shape)
        elif api == "responses":
            _responses(doc, shape)
        else:
            _chat(doc, shape)
    except (AttributeError, TypeError, KeyError, ValueError):
        shape.unread = "the request's messages are not of this API's shape"
    return shape


def _listed(shape: RequestShape, system: str, digests: list[str], results: list[str], prompt: str, chars: int) -> None:
    """What each API's reader found of the conversation, set on the shape."""
    shape.system_digest = system
    shape.message_digests = tuple(digests)
    shape.tool_results = tuple(results)
    shape.prompt = prompt
    shape.input_chars = chars


def _chat(doc: dict[str, Any], shape: RequestShape) -> None:
    system: list[Any] = []
    digests: list[str] = []
    results: list[str] = []
    last_user = ""
    chars = 0
    for m in doc.get("messages") or ():
        if not isinstance(m, dict):
            continue
        role = _role(m.get("role"))
        content = m.get("content")
        text = _text(content)
        chars += len(text)
        if role in ("system", "developer"):
            system.append(content)
            continue
        # An assistant message's tool calls are part of what it said: two answers differing only there differ.
        digests.append(digest(role, [content, m.get("tool_calls")] if m.get("tool_calls") else content))
        if role == "tool" and (cid := _id(m.get("tool_call_id"))):
            results.append(cid)
        if role == "user":
            last_user = text
    _listed(shape, digest("system", system) if system else "", digests, results, last_user, chars)


def _messages(doc: dict[str, Any], shape: RequestShape) -> None:
    system = doc.get("system")
    digests: list[str] = []
    results: list[str] = []
    last_user = ""
    chars = len(_text(system))
    for m in doc.get("messages") or ():
        if not isinstance(m, dict):
            continue
        role = _role(m.get("role"))
        content = m.get("content")
        text = _text(content)
        chars += len(text)
        digests.append(digest(role, content))
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                if cid := _id(block.get("tool_use_id")):
                    results.append(cid)
        if role == "user" and text:
            last_user = text
    _listed(shape, digest("system", system) if system else "", digests, results, last_user, chars)


def _responses(doc: dict[str, Any], shape: RequestShape) -> None:
    instructions = doc.get("instructions")
    shape.system_digest = digest("system", instructions) if instructions else ""
    shape.previous_response_id = _id(doc.get("previous_response_id"))
    items = doc.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    digests: list[str] = []
    results: list[str] = []
    last_user = ""
    chars = len(_text(instructions))
    for item in items or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        role = _role(item.get("role")) or _role(kind)
        content = item.get("content", item.get("output", item.get("arguments")))
        text = _text(content)
        chars += len(text)
        if role in ("system", "developer"):
            shape.system_digest = digest("system", [instructions, content])
            continue
        digests.append(digest(role, {k: v for k, v in item.items() if k != "id"}))
        if kind == "function_call_output" and (cid := _id(item.get("call_id"))):
            results.append(cid)
        if role == "user" and text:
            last_user = text
    _listed(shape, shape.system_digest, digests, results, last_user, chars)
