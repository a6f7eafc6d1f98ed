"""A server's error body put into words: whatever the server said is read from the parsed body, never from an
SDK's own text, so every path (each SDK at any version, each lean reader) words the same error the same way.

:func:`error_message` reads the provider's own words from a body (:func:`wire_text` writes a single value),
:func:`error_answer` the error a whole answer states in place of a stream, :func:`body_of` an exception's
body whichever path parsed it. What is kept of a message is cut at ``MESSAGE_MAX`` characters, masked first.
"""

from __future__ import annotations

import json
from typing import Any

from ....telemetry import json_guard
from ....telemetry.errors import ErrorKind, TtftError
from ....telemetry.json_guard import JsonRefused
from ....telemetry.log.secrets import mask
from ..fields import field as read_field


class ErrorAnswer(TtftError):
    """An answer whose whole body is the API's error object (``{"error": {...}}``) where a stream or
    a completion was expected, sent with HTTP 200: the server's own words, kept."""

    kind = ErrorKind.API_ERROR
    status_code = 200  # what the answer's status said, and what the record keeps

    def __init__(self, message: str, *, error_type: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.code = code


ERROR_ANSWER_MAX = 16_384  # a body longer than this is no error object: never parsed as one (but see ``cut``)
ERROR_BODY_MAX = 1024 * 1024  # an error body read whole for its message; a longer one, by its first bytes
MESSAGE_MAX = 2_000  # characters of a server's message kept in the record; the rest is said, not kept


def _plain(value: object) -> object:
    """An SDK model (built without validation) as the JSON dict it was built from: its fields as sent."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        try:
            return to_dict(warnings=False)
        except Exception:  # a model too broken to dump is quoted as Python writes it
            return repr(value)
    return repr(value)


def wire_text(value: object) -> str:
    """One value a server sent (an error's message, type or code, a chunk), as text that does not depend
    on which path read it: a string as itself, anything else as compact JSON with sorted keys (``null``,
    ``true``, an integer at full size, an SDK's model as the fields it was sent), never Python's repr."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=_plain)
    except (TypeError, ValueError, RecursionError):  # keys of mixed types, a cycle, a depth past the stack
        return repr(value)


def words(value: object) -> str | None:
    """One value a server sent as its :func:`wire_text` (kept up to ``MESSAGE_MAX`` characters), or None
    when it says nothing (absent, ``null``, an empty or blank string)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return kept(wire_text(value))


def error_message(body: object) -> str | None:
    """The provider's own words in an error body, read alike by every path: ``error.message``, a string
    ``error``, the top-level ``message`` (in that order; a message that is not a string is written as
    its JSON), else the whole body as text (a text body, or JSON without a message). A string ``error``
    beside a top-level ``message`` (``{"error": "Bad Request", "message": "key ... is not valid"}``, as
    gateways and NestJS write it) is the status's name: both are said, the message after it. None when
    the body says nothing (absent, ``null``, empty). The body may be a JSON dict or an SDK's model of one."""
    if body is None:
        return None
    if isinstance(body, dict) or hasattr(body, "model_extra"):
        inner = read_field(body, "error")
        inner = body if inner is None else inner
        nested = isinstance(inner, dict) or hasattr(inner, "model_extra")
        if not nested and (name := words(inner)) is not None and (message := words(read_field(body, "message"))):
            return message if message == name else kept(f"{name}: {message}")
        for said in (read_field(inner, "message") if nested else inner, read_field(body, "message")):
            if (text := words(said)) is not None:
                return text
    return words(body)


def label(value: object) -> str | None:
    """An error's type or code as a label: the :func:`words` of a truthy value, else None."""
    return words(value) if value else None


def error_document(text: str | bytes) -> Any:
    """A server's error body as JSON, read through the guard (``telemetry.json_guard``): parts nested
    past its depth left out, so the message beside them is kept; a body past ``ERROR_BODY_MAX``, by
    its first bytes (:func:`~telemetry.json_guard.salvage`). None when it is not JSON."""
    try:
        return json_guard.loads_pruned(text, "the error body", max_bytes=ERROR_BODY_MAX)[0]
    except JsonRefused as exc:
        if exc.reason != "too_large":
            return None
    return json_guard.salvage(text[:ERROR_ANSWER_MAX])


def error_answer(body: bytes, *, cut: bool = False) -> ErrorAnswer | None:
    """The error a whole response body states, when it is one JSON object holding an error:
    ``{"error": {"message", "type", "code"}}`` (OpenAI, and the proxies that copy it),
    ``{"type": "error", "error": {...}}`` (Anthropic), ``{"error": "text"}``, or vLLM's
    ``{"object": "error", "message", "type", "code"}``. None for anything else (a stream, a completion).

    ``cut``: ``body`` is only the first bytes of a longer one (a body nested 100,000 deep beside its
    message): what of it reads, with its cut end closed (:func:`~telemetry.json_guard.salvage`)."""
    text = body.strip()
    if not text.startswith(b"{") or len(text) > ERROR_ANSWER_MAX:
        return None
    doc = json_guard.salvage(text) if cut else error_document(text)
    if not isinstance(doc, dict):
        return None
    inner = doc.get("error")
    if isinstance(inner, str) and inner.strip():
        return ErrorAnswer(error_message(doc) or kept(inner))  # with a top-level message beside it
    if not isinstance(inner, dict):
        if doc.get("object") != "error":
            return None
        inner = doc
    etype, code = label(inner.get("type")), label(inner.get("code"))
    return ErrorAnswer(error_message(inner) or "no message", error_type=etype, code=code if code != etype else None)


def kept(message: str) -> str:
    """A server's message as the record keeps it: whole up to ``MESSAGE_MAX`` characters. Known secrets
    are masked before the cut, which could leave a key's first characters where masking no longer sees it."""
    if len(message) <= MESSAGE_MAX:
        return message
    message = mask(message)
    if len(message) <= MESSAGE_MAX:
        return message
    return f"{message[:MESSAGE_MAX]}… ({len(message) - MESSAGE_MAX:,} more characters not kept)"


def _whole_body(exc: BaseException, error: str) -> dict[str, Any] | None:
    """The response's whole JSON body where the SDK kept only its string ``error`` member (OpenAI's SDK,
    and the lean path that mirrors it, keep ``body["error"]``) and a top-level ``message`` stood beside
    it: ``{"error": "Bad Request", "message": "key ... is not valid"}`` would otherwise say only "Bad
    Request". None when there is no such body (not read, not JSON, no message)."""
    try:
        text = exc.response.text  # type: ignore[attr-defined]  # read already: the SDK read it for its message
    except Exception:  # no response, or one not read
        return None
    if not isinstance(text, str) or not text.lstrip().startswith("{"):
        return None
    doc = error_document(text)
    if isinstance(doc, dict) and doc.get("error") == error and doc.get("message") is not None:
        return doc
    return None


def body_of(exc: BaseException) -> object:
    """An exception's error body as ttft reads it, whichever path parsed it: through the guard, parts
    nested past its depth left out. The lean path keeps such a body as its text, an SDK parses it (to
    Python's recursion limit): both become the same pruned document."""
    body = getattr(exc, "body", None)
    if isinstance(body, str):
        if body.lstrip().startswith("{") and (doc := error_document(body)) is not None:
            return doc
        return _whole_body(exc, body) or body
    if isinstance(body, dict | list):
        try:
            text = json.dumps(body)
        except (TypeError, ValueError, RecursionError):
            return body
        if json_guard.depth_bound(text) > json_guard.MAX_DEPTH:
            return error_document(text)
    return body
