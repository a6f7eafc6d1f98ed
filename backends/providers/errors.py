"""Turn any SDK / HTTP / decoding exception into one plain ``Failed`` event, through one table.

:data:`EXCEPTIONS` maps each exception (by its class, read from httpx2's tree and each SDK's, the
way httpx maps httpcore's) to its kind (``telemetry.errors.ErrorKind``), one sentence that says
what happened (with the HTTP status and the provider's own words) and a hint that says what to
try; an HTTP error status goes through :data:`STATUSES`, the same way. Never a traceback, never a
secret: every sentence is masked with the turn's known secret values (``telemetry.log.secrets``).

A backend (the SDK ones, the lean readers) calls :func:`failed_from_exception` for whatever its
stream raised, and :func:`~backends.providers.answers.error_body.error_answer` for a body that was one
JSON error object in place of a stream. Whatever the server said is put into words by
:mod:`backends.providers.answers.error_body`; a chunk of the wrong shape is caught by
:mod:`backends.providers.answers.stream_shape`. This module holds the table and what reads it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx2

from ...telemetry import events as ev
from ...telemetry.errors import ErrorKind, TtftError, describe
from ...telemetry.json_guard import JsonRefused
from ...telemetry.log.crashes import BUG_HINT, report_once
from ...telemetry.log.secrets import Secrets, mask
from ..transport.http import Probe
from .answers.error_body import ErrorAnswer, body_of, error_message, kept, label
from .answers.stream_shape import MalformedStream

SDKS = ("openai", "anthropic", f"{__package__}.lean.sdk_errors")  # the lean path mirrors the SDK's error classes


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


def provider_message(exc: BaseException) -> str:
    """The provider's own error message (:func:`~backends.providers.answers.error_body.error_message` of
    the body the SDK kept), never the SDK's own wording of it (``Error code: ... - {...}``, which differs
    between SDKs and their versions). An error with no body from a server (a connection error) is said in
    its own words.

    A body the SDK could not parse (nested past Python's recursion limit, the SDK keeps it as its
    text) is read through the guard, so the message beside a hostile part survives on every path."""
    body = body_of(exc)
    if body is not None or isinstance(exc, sdk_errors("APIStatusError")):
        return error_message(body) or "no message"
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return kept(str(msg))


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
    body = body_of(exc)
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
        from ..transport.http import parse_retry_after

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
    sentence = mask(ctx.secrets.mask(_sentence(row.sentence(seen))))  # the backend's own values, then every kind
    return Described(kind, sentence, hint, seen.status if row.keeps_status else None)


def failed_from_exception(exc: BaseException, ctx: ErrorContext, probe: Probe | None = None) -> ev.Failed:
    """The turn's ``Failed`` event for what its stream raised."""
    t = ev.now_ns()
    d = describe_exception(exc, ctx, probe.attempt if probe else 0)
    return ev.Failed(t, d.kind, d.sentence, d.status, d.hint)
