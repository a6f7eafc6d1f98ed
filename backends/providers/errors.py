"""Turn any SDK / HTTP / decoding exception into one plain ``Failed`` event, through one table.

:data:`EXCEPTIONS` maps each exception (by its class, read from httpx2's tree and each SDK's, the
way httpx maps httpcore's) to its kind (``telemetry.errors.ErrorKind``), one sentence that says
what happened (with the HTTP status and the provider's own words) and a hint that says what to
try; an HTTP error status goes through :data:`STATUSES`, the same way. Never a traceback, never a
secret: every sentence is masked with the turn's known secret values (``telemetry.log.secrets``).

A backend (the SDK ones, the lean readers) calls :func:`failed_from_exception` for whatever its
stream raised, and :func:`error_answer` for a body that was one JSON error object in place of a
stream. Whatever the server said is put into words by one function, :func:`error_message` (and
:func:`wire_text` for a single value), read from the parsed body, never from an SDK's own text, so
every path (each SDK at any version, each lean reader) words the same error the same way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2

from backends.providers.fields import field as read_field
from backends.transport.http import Probe
from telemetry import events as ev
from telemetry import json_guard
from telemetry.errors import ErrorKind, TtftError, describe
from telemetry.json_guard import JsonRefused
from telemetry.log.crashes import BUG_HINT, report_once
from telemetry.log.secrets import Secrets, mask

SDKS = ("openai", "anthropic", "backends.providers.lean.sdk_errors")  # the lean path mirrors the SDK's error classes

Translate = Callable[[Any, Any, int, Any], Iterable[ev.Event]]


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


class MalformedStream(TtftError):
    """A stream that is not this API's (a chunk of the wrong shape, an HTML page): a clear message,
    reported as ``malformed_stream`` rather than as a bug in ttft."""

    kind = ErrorKind.MALFORMED_STREAM


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
    return _kept(wire_text(value))


def error_message(body: object) -> str | None:
    """The provider's own words in an error body, read alike by every path: ``error.message``, a string
    ``error``, the top-level ``message`` (in that order; a message that is not a string is written as
    its JSON), else the whole body as text (a text body, or JSON without a message). None when the body
    says nothing (absent, ``null``, empty). The body may be a JSON dict or an SDK's model of one."""
    if body is None:
        return None
    if isinstance(body, dict) or hasattr(body, "model_extra"):
        inner = read_field(body, "error")
        inner = body if inner is None else inner
        nested = isinstance(inner, dict) or hasattr(inner, "model_extra")
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
        return ErrorAnswer(_kept(inner))
    if not isinstance(inner, dict):
        if doc.get("object") != "error":
            return None
        inner = doc
    etype, code = label(inner.get("type")), label(inner.get("code"))
    return ErrorAnswer(error_message(inner) or "no message", error_type=etype, code=code if code != etype else None)


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


@dataclass
class ErrorContext:
    """What a failure's words need of its turn: where it went, the key's variable, the read timeout, the
    values to mask, and whether the answer had begun."""

    provider: str
    base_url: str | None
    key_env: str | None = None  # the variable the key came from, for the hint
    timeout_s: float | None = None
    secrets: Secrets = field(default_factory=Secrets)  # the values this backend sends: masked in every sentence
    streaming_started: bool = False  # a 200 came back and tokens may have arrived

    @property
    def where(self) -> str:
        return self.base_url or f"the {self.provider} API"

    @property
    def phase(self) -> str:
        return "in the middle of the answer" if self.streaming_started else "before the answer started"


def _kept(message: str) -> str:
    """A server's message as the record keeps it: whole up to ``MESSAGE_MAX`` characters. Known secrets
    are masked before the cut, which could leave a key's first characters where masking no longer sees it."""
    if len(message) <= MESSAGE_MAX:
        return message
    message = mask(message)
    if len(message) <= MESSAGE_MAX:
        return message
    return f"{message[:MESSAGE_MAX]}… ({len(message) - MESSAGE_MAX:,} more characters not kept)"


def _body(exc: BaseException) -> object:
    """An exception's error body as ttft reads it, whichever path parsed it: through the guard, parts
    nested past its depth left out. The lean path keeps such a body as its text, an SDK parses it (to
    Python's recursion limit): both become the same pruned document."""
    body = getattr(exc, "body", None)
    if isinstance(body, str):
        if body.lstrip().startswith("{") and (doc := error_document(body)) is not None:
            return doc
        return body
    if isinstance(body, dict | list):
        try:
            text = json.dumps(body)
        except (TypeError, ValueError, RecursionError):
            return body
        if json_guard.depth_bound(text) > json_guard.MAX_DEPTH:
            return error_document(text)
    return body


def provider_message(exc: BaseException) -> str:
    """The provider's own error message (:func:`error_message` of the body the SDK kept), never the SDK's
    own wording of it (``Error code: ... - {...}``, which differs between SDKs and their versions). An
    error with no body from a server (a connection error) is said in its own words.

    A body the SDK could not parse (nested past Python's recursion limit, the SDK keeps it as its
    text) is read through the guard, so the message beside a hostile part survives on every path."""
    body = _body(exc)
    if body is not None or isinstance(exc, sdk_errors("APIStatusError")):
        return error_message(body) or "no message"
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return _kept(str(msg))


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


def _body_type(exc: BaseException) -> str | None:
    body = _body(exc)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return label(inner.get("type") or inner.get("code"))
    return None


# --- HTTP error statuses: kind, what happened, what to try ({key}: the key's variable) ----------
STATUSES: dict[int, tuple[ErrorKind, str, str]] = {
    400: (
        ErrorKind.BAD_REQUEST,
        "The server rejected the request",
        "Check the options this model supports (reasoning effort, thinking budget, max output tokens, temperature).",
    ),
    401: (
        ErrorKind.AUTH,
        "The server did not accept the API key",
        "Check {key}; the key may be wrong, expired or for another provider.",
    ),
    403: (
        ErrorKind.PERMISSION_DENIED,
        "The API key is not allowed to do this",
        "Check that the key's project or organization has access to this model.",
    ),
    404: (
        ErrorKind.NOT_FOUND,
        "The server does not know this model or endpoint",
        "Check the model name (ttft models -m PROVIDER --base-url URL) and the base URL.",
    ),
    408: (ErrorKind.TIMEOUT, "The server timed out the request", "Retry; raise --max-retries to retry automatically."),
    413: (ErrorKind.TOO_LARGE, "The request is too large for the server", "Shorten the prompt or the conversation."),
    429: (
        ErrorKind.RATE_LIMITED,
        "The server is rate limiting requests",
        "Wait a little and retry, raise --max-retries, or lower the request rate.",
    ),
    529: (
        ErrorKind.OVERLOADED,
        "The provider is overloaded",
        "Retry in a little while; raise --max-retries to retry automatically.",
    ),
}
SERVER_ERROR = (ErrorKind.SERVER_ERROR, "The server failed", "Retry later; raise --max-retries to retry automatically.")
OTHER_STATUS = (ErrorKind.HTTP_ERROR, "The request failed", "Check the request options and the base URL.")


def status_terms(status: int) -> tuple[ErrorKind, str, str]:
    """(kind, what happened, hint) for an HTTP error status."""
    return STATUSES.get(status) or (SERVER_ERROR if status >= 500 else OTHER_STATUS)


# --- the exception table ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Seen:
    """One exception as the table reads it: itself, the transport error under an SDK's connection
    wrapper (``inner``; the exception itself when there is none), and the turn's context."""

    exc: BaseException
    inner: BaseException
    ctx: ErrorContext
    attempts: int

    @property
    def status(self) -> int | None:
        status = getattr(self.exc, "status_code", None)
        return status if isinstance(status, int) else None

    @property
    def detail(self) -> str:
        return str(self.inner) or type(self.inner).__name__


Words = Callable[[Seen], str]


@dataclass(frozen=True, slots=True)
class Row:
    """One line of :data:`EXCEPTIONS`: the classes it catches (a name is an SDK class, looked up in
    each imported SDK), an optional further condition, and the kind, sentence and hint it gives."""

    catches: tuple[type[BaseException] | str, ...]
    kind: ErrorKind | Callable[[Seen], ErrorKind | str]
    sentence: Words
    hint: str | Callable[[Seen], str | None] | None
    when: Callable[[Seen], bool] | None = None
    keeps_status: bool = False  # the record keeps the HTTP status

    def matches(self, seen: Seen) -> bool:
        for c in self.catches:
            classes = sdk_errors(c) if isinstance(c, str) else (c,)
            if classes and (isinstance(seen.exc, classes) or isinstance(seen.inner, classes)):
                return self.when is None or self.when(seen)
        return False


def _http_sentence(s: Seen) -> str:
    status = s.status or 0
    tried = f" after {s.attempts} attempts" if s.attempts > 1 else ""
    retry = ""
    headers = getattr(getattr(s.exc, "response", None), "headers", None)
    if status == 429 and headers is not None:
        from backends.transport.http import parse_retry_after

        secs = parse_retry_after(headers)
        if secs is not None:
            retry = f"; it asked to wait {secs:g} s"
    return f"{status_terms(status)[1]}{tried} (HTTP {status}: {provider_message(s.exc)}){retry}"


def _answer_sentence(s: Seen) -> str:
    exc = s.exc
    assert isinstance(exc, ErrorAnswer)
    said = ", ".join(x for x in (exc.error_type, exc.code and f"code {exc.code}") if x)
    return f"The server answered with an error instead of an answer (HTTP 200{', ' + said if said else ''}: {exc})"


def _bug_hint(exc: BaseException) -> str:
    """A bug's hint: the turn is kept, and where its traceback is (``telemetry.log.crashes``)."""
    path = report_once(exc, "a turn")
    return f"{BUG_HINT} Its crash report: {path}" if path else BUG_HINT


def _not_utf8(s: Seen) -> str:
    exc = s.exc
    byte = f" (byte 0x{exc.object[exc.start]:02x})" if isinstance(exc, UnicodeDecodeError) else ""
    return f"The server sent bytes that are not valid UTF-8{byte}"


def _refused(s: Seen) -> bool:
    return _caused_by(s.inner, ConnectionRefusedError) or "refused" in str(s.inner).lower()


def _is_status_error(s: Seen) -> bool:
    return s.status not in (None, 200)


def _mid_stream(s: Seen) -> bool:
    return not isinstance(s.exc, sdk_errors("APIConnectionError")) and (s.ctx.streaming_started or bool(s.status))


def _not_decoding(s: Seen) -> bool:
    return not isinstance(s.exc, UnicodeError)


def _own(s: Seen) -> bool:
    return isinstance(s.exc, TtftError) and s.exc.kind is not None


NOT_THIS_API = "The server may not speak this API: check --base-url and the provider kind (-m PROVIDER:MODEL)."
KEPT_RETRY = "The partial answer is kept; retry the turn, and raise --max-retries if this keeps happening."

# First match wins. Each row catches the exception itself or the httpx2 error an SDK wraps.
EXCEPTIONS: tuple[Row, ...] = (
    Row(
        ("APIStatusError",),
        kind=lambda s: status_terms(s.status or 0)[0],
        sentence=_http_sentence,
        hint=lambda s: status_terms(s.status or 0)[2].format(key=s.ctx.key_env or "the API key variable"),
        when=_is_status_error,
        keeps_status=True,
    ),
    Row(
        ("APIError",),
        kind=ErrorKind.STREAM_ERROR,
        sentence=lambda s: (
            "The server reported an error in the middle of the answer "
            f"({_body_type(s.exc) or 'error'}: {provider_message(s.exc)})"
        ),
        hint=KEPT_RETRY,
        when=_mid_stream,
    ),
    Row(
        (httpx2.ReadTimeout, httpx2.WriteTimeout, httpx2.PoolTimeout, "APITimeoutError"),
        kind=ErrorKind.TIMEOUT,
        sentence=lambda s: (
            f"The server sent nothing for "
            f"{f'{s.ctx.timeout_s:g} s' if s.ctx.timeout_s else 'the read timeout'} {s.ctx.phase} "
            f"(read timeout after {s.attempts} attempt(s))"
        ),
        hint="The server stalled or is overloaded; retry, or allow more time with --timeout SECONDS.",
    ),
    Row(
        (httpx2.ConnectTimeout,),
        kind=ErrorKind.CONNECT_TIMEOUT,
        sentence=lambda s: f"Connecting to {s.ctx.where} timed out",
        hint="Check --base-url and that the server is reachable from here.",
    ),
    Row(
        (httpx2.ConnectError,),
        kind=ErrorKind.CONNECTION_REFUSED,
        sentence=lambda s: f"Could not connect to {s.ctx.where} (connection refused)",
        hint="Is the server running? Check --base-url (and the port).",
        when=_refused,
    ),
    Row(
        (httpx2.ConnectError,),
        kind=ErrorKind.CONNECT_ERROR,
        sentence=lambda s: f"Could not connect to {s.ctx.where} ({str(s.inner) or 'connect error'})",
        hint="Is the server running? Check --base-url (and the port).",
    ),
    Row(
        (httpx2.UnsupportedProtocol, httpx2.InvalidURL),
        kind=ErrorKind.BAD_URL,
        sentence=lambda s: f"{s.ctx.where} is not an address this client can reach ({s.detail})",
        hint="Use an http:// or https:// address with a host, e.g. --base-url http://127.0.0.1:8080/v1.",
    ),
    Row(
        (httpx2.LocalProtocolError,),
        kind=ErrorKind.BAD_REQUEST,
        sentence=lambda s: f"The request could not be sent ({s.detail})",
        hint="A header value or the address holds a character HTTP does not allow: "
        "check the key's variable, the configured headers and --base-url.",
    ),
    Row(
        (httpx2.RemoteProtocolError, httpx2.ReadError, "APIConnectionError"),
        kind=ErrorKind.CONNECTION_DROPPED,
        sentence=lambda s: f"The connection to {s.ctx.where} closed {s.ctx.phase} ({s.detail})",
        hint="The partial answer is kept; retry the turn, and check any proxy or load-balancer timeouts.",
    ),
    Row(
        (ErrorAnswer,),
        kind=ErrorKind.API_ERROR,
        sentence=_answer_sentence,
        hint="That is the server's own message: check the model name, the key and the request options.",
        keeps_status=True,
    ),
    Row(
        (MalformedStream,),
        kind=ErrorKind.MALFORMED_STREAM,
        sentence=lambda s: f"The server sent {s.exc}" if str(s.exc).startswith("a ") else str(s.exc),
        hint=NOT_THIS_API,
    ),
    Row(
        (UnicodeDecodeError,),  # the stream's bytes, as the SSE decoder or JSON reads them
        kind=ErrorKind.MALFORMED_STREAM,
        sentence=_not_utf8,
        hint=NOT_THIS_API,
    ),
    Row(
        (JsonRefused,),
        kind=ErrorKind.MALFORMED_STREAM,
        sentence=lambda s: f"The server sent {s.exc}",
        hint=NOT_THIS_API,
    ),
    Row(
        (RecursionError,),  # an SDK's own parse of JSON nested past Python's recursion limit
        kind=ErrorKind.MALFORMED_STREAM,
        sentence=lambda s: "The server sent JSON nested too deep to read (past Python's recursion limit)",
        hint=NOT_THIS_API,
        when=lambda s: "JSON" in str(s.exc),
    ),
    Row(
        (json.JSONDecodeError, ValueError),
        kind=ErrorKind.MALFORMED_STREAM,
        sentence=lambda s: f"The server sent data that is not valid JSON ({s.exc})",
        hint=NOT_THIS_API,
        when=_not_decoding,
    ),
    Row(
        ("APIError",),
        kind=ErrorKind.API_ERROR,
        sentence=lambda s: f"The {s.ctx.provider} API failed: {provider_message(s.exc)}",
        hint="Retry the turn; if it persists, check the provider's status page.",
        keeps_status=True,
    ),
    Row(
        (TtftError,),
        kind=lambda s: describe(s.exc)[0],
        sentence=lambda s: describe(s.exc)[1],
        hint=lambda s: describe(s.exc)[2],
        when=_own,
    ),
    Row(
        (BaseException,),
        kind=lambda s: type(s.exc).__name__,  # a bug: its class name says what broke
        sentence=lambda s: f"The turn failed unexpectedly: {s.exc or type(s.exc).__name__}",
        hint=lambda s: _bug_hint(s.exc),
    ),
)


@dataclass(frozen=True, slots=True)
class Described:
    """What :data:`EXCEPTIONS` says of one exception."""

    kind: ErrorKind | str
    sentence: str  # one sentence, masked
    hint: str | None
    status: int | None


def describe_exception(exc: BaseException, ctx: ErrorContext, attempts: int = 0) -> Described:
    """The first row of :data:`EXCEPTIONS` that catches ``exc``, read for it."""
    seen = Seen(exc, _unwrap(exc), ctx, attempts)
    row = next(r for r in EXCEPTIONS if r.matches(seen))  # the last row catches everything
    kind = row.kind(seen) if callable(row.kind) else row.kind
    hint = row.hint(seen) if callable(row.hint) else row.hint
    sentence = ctx.secrets.mask(_sentence(row.sentence(seen)))
    return Described(kind, sentence, hint, seen.status if row.keeps_status else None)


def failed_from_exception(exc: BaseException, ctx: ErrorContext, probe: Probe | None = None) -> ev.Failed:
    """The turn's ``Failed`` event for what its stream raised."""
    t = ev.now_ns()
    d = describe_exception(exc, ctx, probe.attempt if probe else 0)
    return ev.Failed(t, d.kind, d.sentence, d.status, d.hint)
