"""A streamed answer checked for its shape: a chunk that is not this API's, a text field that is not a string,
or an HTML page where a stream was expected, each a :class:`MalformedStream` naming what came (never a bug
in ttft); and a token count read only when it is one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ....telemetry import events as ev
from ....telemetry.errors import ErrorKind, TtftError
from .error_body import wire_text

Translate = Callable[[Any, Any, int, Any], Iterable[ev.Event]]


class MalformedStream(TtftError):
    """A stream that is not this API's (a chunk of the wrong shape, an HTML page): a clear message,
    reported as ``malformed_stream`` rather than as a bug in ttft."""

    kind = ErrorKind.MALFORMED_STREAM


_TEXT_FIELDS = {ev.TextDelta: ("text",), ev.ReasoningDelta: ("text",), ev.ToolCallDelta: ("name", "arguments")}


def _preview(item: object) -> str:
    """A chunk quoted in a message: its JSON (an SDK's model as the fields it was sent), cut to 80 characters."""
    text = wire_text(item)
    return text if len(text) <= 80 else text[:77] + "..."


def shape_checked(api: str) -> Callable[[Translate], Translate]:
    """Wrap a backend's chunk translation: a chunk of the wrong shape (``[1,2,3]``, ``null``,
    ``{"choices": "x"}``; the SDKs build their models without validating) fails the lookups
    with AttributeError/TypeError/KeyError, and a text field that is not a string would break
    the record later: both become MalformedStream, naming the chunk."""

    def wrap(translate: Translate) -> Translate:
        def checked(self: Any, item: Any, t: int, state: Any) -> Iterator[ev.Event]:
            try:
                for e in translate(self, item, t, state):
                    for name in _TEXT_FIELDS.get(type(e), ()):
                        if not isinstance(getattr(e, name), str):
                            raise MalformedStream(f"a chunk whose {name} is not a string ({api}): {_preview(item)}")
                    yield e
                stop = getattr(state, "stop_reason", None)  # set on the state, not an event: checked here
                if stop is not None and not isinstance(stop, str):
                    raise MalformedStream(f"a chunk whose stop reason is not a string ({api}): {_preview(item)}")
            except (AttributeError, TypeError, KeyError, IndexError) as exc:
                raise MalformedStream(f"a chunk that is not a {api} event: {_preview(item)}") from exc

        return checked

    return wrap


def check_content_type(response: Any) -> None:
    """An HTML page with HTTP 200 (a web UI, a captive portal, a wrong path) is not an API answer;
    without this it reads as a stream that ended early."""
    headers = getattr(response, "headers", None)
    ctype = str(headers.get("content-type", "")) if headers is not None else ""
    if "html" in ctype.lower():
        raise MalformedStream("The server answered with an HTML page, not an API response")


async def check_stream(out: Any) -> None:
    """:func:`check_content_type` on an SDK stream's response, closing the stream when it fails
    (the caller never gets it to close)."""
    response = getattr(out, "response", None)  # a complete (non-streamed) answer has none
    if response is None:
        return
    try:
        check_content_type(response)
    except MalformedStream:
        await out.close()
        raise


def count(value: object) -> int | None:
    """A token count from the server's usage: an int, else None (a string or a float is not one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
