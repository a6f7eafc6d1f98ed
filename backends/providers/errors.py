"""Turn any SDK / HTTP / decoding exception into one plain ``Failed`` event.

The message is one sentence that says what happened (with the HTTP status and the
provider's own words); the hint says what to try. Never a traceback, never a key.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2

from backends.transport.http import Probe
from telemetry import events as ev

SDKS = ("openai", "anthropic", "backends.providers.lean.sdk_errors")  # the lean path mirrors the SDK's error classes

Translate = Callable[[Any, Any, int, Any], Iterable[ev.Event]]

_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")


def sdk_errors(name: str) -> tuple[type[BaseException], ...]:
    """The SDKs' exception class ``name`` (e.g. ``APIStatusError``), from each SDK this process has imported.

    Read from ``sys.modules`` rather than imported: an OpenAI-compatible call must not pay for
    importing the Anthropic SDK (~0.7 s) just to classify errors, and an SDK that was never
    imported cannot have raised anything.
    """
    out: list[type[BaseException]] = []
    for sdk in SDKS:
        cls = getattr(sys.modules.get(sdk), name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            out.append(cls)
    return tuple(out)


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Remove anything that is, or looks like, an API key."""
    for s in sorted(secrets, key=len, reverse=True):  # "Bearer tok" before "tok": no half-masked value
        if s and len(s) >= 4:
            text = text.replace(s, "***")
    return _KEYLIKE.sub(lambda m: m.group(0)[:3] + "***", text)


def header_secrets(headers: dict[str, str]) -> tuple[str, ...]:
    """What to mask of configured headers: each value, and its last word (the token of
    ``Bearer TOKEN``), since a server may echo either. Every header, not only those named like
    auth ones: ``X-Api-Key``, ``Helicone-Auth`` or ``api-key`` cannot all be guessed."""
    out: list[str] = []
    for value in headers.values():
        out += [value, value.split()[-1] if value.split() else ""]
    return tuple(dict.fromkeys(v for v in out if v))


class MalformedStream(Exception):
    """A stream that is not this API's (a chunk of the wrong shape, an HTML page): a clear message,
    reported as ``malformed_stream`` rather than as a bug in ttft."""


_TEXT_FIELDS = {ev.TextDelta: ("text",), ev.ReasoningDelta: ("text",), ev.ToolCallDelta: ("name", "arguments")}


def _preview(item: object) -> str:
    text = repr(item)
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


@dataclass
class ErrorContext:
    provider: str
    base_url: str | None
    key_env: str | None = None  # the variable the key came from, for the hint
    timeout_s: float | None = None
    secrets: tuple[str, ...] = ()
    streaming_started: bool = False  # a 200 came back and tokens may have arrived


def provider_message(exc: BaseException) -> str:
    """The provider's own error message, without the SDK's ``Error code: ... - {...}`` wrapper."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(msg)


def _sentence(s: str) -> str:
    s = " ".join(s.split())
    return s if s.endswith((".", "!", "?")) else s + "."


def _unwrap(exc: BaseException) -> BaseException:
    """The httpx2 error under an SDK's connection/timeout wrapper."""
    seen = 0
    while seen < 5 and isinstance(exc, sdk_errors("APIConnectionError")):
        cause = exc.__cause__ or exc.__context__
        if cause is None:
            break
        exc = cause
        seen += 1
    return exc


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, kind):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def failed_from_exception(exc: BaseException, ctx: ErrorContext, probe: Probe | None = None) -> ev.Failed:
    t = ev.now_ns()
    attempts = probe.attempt if probe else 0
    where = ctx.base_url or f"the {ctx.provider} API"
    status = getattr(exc, "status_code", None)
    is_conn = isinstance(exc, sdk_errors("APIConnectionError"))
    if isinstance(exc, sdk_errors("APIStatusError")) and status not in (None, 200):
        return _http_failure(t, exc, int(status), ctx, attempts)
    if isinstance(exc, sdk_errors("APIError")) and not is_conn and (ctx.streaming_started or status):
        msg = provider_message(exc)
        etype = _body_type(exc) or "error"
        return ev.Failed(
            t,
            "stream_error",
            scrub(_sentence(f"The server reported an error in the middle of the answer ({etype}: {msg})"), ctx.secrets),
            None,
            "The partial answer is kept; retry the turn, and raise --max-retries if this keeps happening.",
        )
    inner = _unwrap(exc)
    if isinstance(inner, (httpx2.ReadTimeout, httpx2.WriteTimeout, httpx2.PoolTimeout)) or isinstance(
        exc, sdk_errors("APITimeoutError")
    ):
        secs = f"{ctx.timeout_s:g} s" if ctx.timeout_s else "the read timeout"
        phase = "in the middle of the answer" if ctx.streaming_started else "before the answer started"
        return ev.Failed(
            t,
            "timeout",
            _sentence(f"The server sent nothing for {secs} {phase} (read timeout after {attempts} attempt(s))"),
            None,
            "The server stalled or is overloaded; retry, or allow more time with --timeout SECONDS.",
        )
    if isinstance(inner, httpx2.ConnectTimeout):
        return ev.Failed(
            t,
            "connect_timeout",
            _sentence(f"Connecting to {where} timed out"),
            None,
            "Check --base-url and that the server is reachable from here.",
        )
    if isinstance(inner, httpx2.ConnectError):
        refused = _caused_by(inner, ConnectionRefusedError) or "refused" in str(inner).lower()
        detail = "connection refused" if refused else (str(inner) or "connect error")
        return ev.Failed(
            t,
            "connection_refused" if refused else "connect_error",
            scrub(_sentence(f"Could not connect to {where} ({detail})"), ctx.secrets),
            None,
            "Is the server running? Check --base-url (and the port).",
        )
    if isinstance(inner, (httpx2.RemoteProtocolError, httpx2.ReadError)) or isinstance(
        exc, sdk_errors("APIConnectionError")
    ):
        detail = str(inner) or type(inner).__name__
        phase = "in the middle of the answer" if ctx.streaming_started else "before the answer started"
        return ev.Failed(
            t,
            "connection_dropped",
            scrub(_sentence(f"The connection to {where} closed {phase} ({detail})"), ctx.secrets),
            None,
            "The partial answer is kept; retry the turn, and check any proxy or load-balancer timeouts.",
        )
    if isinstance(exc, MalformedStream):
        return ev.Failed(
            t,
            "malformed_stream",
            scrub(_sentence(f"The server sent {exc}" if str(exc).startswith("a ") else str(exc)), ctx.secrets),
            None,
            "The server may not speak this API: check --base-url and the provider kind (-m PROVIDER:MODEL).",
        )
    if isinstance(exc, UnicodeDecodeError):  # the stream's bytes, as the SSE decoder or JSON reads them
        return ev.Failed(
            t,
            "malformed_stream",
            _sentence(f"The server sent bytes that are not valid UTF-8 (byte 0x{exc.object[exc.start]:02x})"),
            None,
            "The server may not speak this API: check --base-url and the provider kind (-m PROVIDER:MODEL).",
        )
    if isinstance(exc, json.JSONDecodeError | ValueError) and not isinstance(exc, UnicodeError):
        return ev.Failed(
            t,
            "malformed_stream",
            scrub(_sentence(f"The server sent data that is not valid JSON ({exc})"), ctx.secrets),
            None,
            "The server may not speak this API: check --base-url and the provider kind (-m PROVIDER:MODEL).",
        )
    if isinstance(exc, sdk_errors("APIError")):
        return ev.Failed(
            t,
            "api_error",
            scrub(_sentence(f"The {ctx.provider} API failed: {provider_message(exc)}"), ctx.secrets),
            status,
            "Retry the turn; if it persists, check the provider's status page.",
        )
    return ev.Failed(
        t,
        type(exc).__name__,
        scrub(_sentence(f"The turn failed unexpectedly: {exc or type(exc).__name__}"), ctx.secrets),
        None,
        "This looks like a bug in ttft; the turn and its partial answer are kept in the session log.",
    )


def _body_type(exc: BaseException) -> str | None:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            t = inner.get("type") or inner.get("code")
            return str(t) if t else None
    return None


def _http_failure(t: int, exc: BaseException, status: int, ctx: ErrorContext, attempts: int) -> ev.Failed:
    msg = provider_message(exc)
    tried = f" after {attempts} attempts" if attempts > 1 else ""
    key = ctx.key_env or "the API key variable"
    table: dict[int, tuple[str, str, str]] = {
        400: (
            "bad_request",
            "The server rejected the request",
            "Check the options this model supports "
            "(reasoning effort, thinking budget, max output tokens, temperature).",
        ),
        401: (
            "auth",
            "The server did not accept the API key",
            f"Check {key}; the key may be wrong, expired or for another provider.",
        ),
        403: (
            "permission_denied",
            "The API key is not allowed to do this",
            "Check that the key's project or organization has access to this model.",
        ),
        404: (
            "not_found",
            "The server does not know this model or endpoint",
            "Check the model name (ttft models -m PROVIDER --base-url URL) and the base URL.",
        ),
        408: ("timeout", "The server timed out the request", "Retry; raise --max-retries to retry automatically."),
        413: ("too_large", "The request is too large for the server", "Shorten the prompt or the conversation."),
        429: (
            "rate_limited",
            "The server is rate limiting requests",
            "Wait a little and retry, raise --max-retries, or lower the request rate.",
        ),
        529: (
            "overloaded",
            "The provider is overloaded",
            "Retry in a little while; raise --max-retries to retry automatically.",
        ),
    }
    if status in table:
        etype, what, hint = table[status]
    elif status >= 500:
        etype, what, hint = (
            "server_error",
            "The server failed",
            "Retry later; raise --max-retries to retry automatically.",
        )
    else:
        etype, what, hint = "http_error", "The request failed", "Check the request options and the base URL."
    ra = getattr(getattr(exc, "response", None), "headers", None)
    retry = ""
    if status == 429 and ra is not None:
        from backends.transport.http import parse_retry_after

        secs = parse_retry_after(ra)
        if secs is not None:
            retry = f"; it asked to wait {secs:g} s"
    sentence = _sentence(f"{what}{tried} (HTTP {status}: {msg}){retry}")
    return ev.Failed(t, etype, scrub(sentence, ctx.secrets), status, hint)
