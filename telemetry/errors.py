"""The error vocabulary: every kind of failure a turn or a command can end with, and ttft's own exceptions' root.

A turn that fails carries one :class:`ErrorKind` (the stream's ``Failed.error_type``, the record's
``error.type``, a ``ProviderError``'s ``kind``), so the exit code, the bench's error counts and a
reader of the log name the same failure the same way. A kind is a ``StrEnum``: it is its value
wherever a string is expected, and the log and every export write that value.

A kind is always one of these, but for one case: an exception ttft did not expect (a bug) is
reported under its class name (``RuntimeError``), so the log says what broke. A record read from
a log may hold any string a newer or older writer put there; :func:`kind_of` gives back the member
for a known one. ``docs/errors.md`` says what each kind means and what to try.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    # Before anything is sent: the command line, the config file, the key, the address.
    BAD_SPEC = "bad_spec"  # -m PROVIDER:MODEL (or --base-url) is incomplete or names nothing known
    CONFIG_ERROR = "config_error"  # config.toml does not read or does not check
    BAD_URL = "bad_url"  # the base URL is not an http:// or https:// address
    MISSING_KEY = "missing_key"  # the provider needs a key and its variable is not set
    BAD_KEY = "bad_key"  # the key holds a line break or a control character
    PROVIDER_ERROR = "provider_error"  # the backend could not be made, for another reason
    LOCAL_UNAVAILABLE = "local_unavailable"  # this install cannot run local models
    # The server answered with an HTTP error status.
    BAD_REQUEST = "bad_request"  # 400
    AUTH = "auth"  # 401
    PERMISSION_DENIED = "permission_denied"  # 403
    NOT_FOUND = "not_found"  # 404
    TOO_LARGE = "too_large"  # 413
    RATE_LIMITED = "rate_limited"  # 429
    OVERLOADED = "overloaded"  # 529
    SERVER_ERROR = "server_error"  # any other 5xx
    HTTP_ERROR = "http_error"  # any other status
    # The connection, and the turn's clocks.
    CONNECT_TIMEOUT = "connect_timeout"
    CONNECTION_REFUSED = "connection_refused"
    CONNECT_ERROR = "connect_error"
    CONNECTION_DROPPED = "connection_dropped"
    TIMEOUT = "timeout"  # no byte (or no new token) for the read timeout; also HTTP 408
    DEADLINE = "deadline"  # the whole turn passed --deadline
    # The answer itself.
    API_ERROR = "api_error"  # the API reported an error outside any stream (a 200 with an error body)
    STREAM_ERROR = "stream_error"  # the server reported an error in the middle of the answer
    INCOMPLETE_STREAM = "incomplete_stream"  # the stream ended without the API's end marker
    MALFORMED_STREAM = "malformed_stream"  # what came back is not this API's stream
    # The local engine (llama.cpp, in its own process).
    ENGINE_CRASHED = "engine_crashed"
    LLAMA_CPP_MISSING = "llama_cpp_missing"
    MODEL_MISSING = "model_missing"
    MODEL_NOT_FOUND = "model_not_found"
    MODEL_UNREADABLE = "model_unreadable"
    MODEL_CORRUPT = "model_corrupt"
    MODEL_TOO_LARGE = "model_too_large"
    MODEL_LOAD_FAILED = "model_load_failed"
    CONTEXT_OVERFLOW = "context_overflow"
    BAD_SETTING = "bad_setting"
    BAD_CHAT_FORMAT = "bad_chat_format"
    CLUSTER = "cluster"  # the distributed engine cannot run the bench: unreachable, no room, a driver that fails
    UNSUPPORTED_ATTACHMENT = "unsupported_attachment"  # a file this engine cannot take (an image, locally)
    # The agent loop.
    TOOL_NOT_ALLOWED = "tool_not_allowed"  # the model called a tool that no --allow-tool(s) allowed


# Kinds that mean the command line or the config file was wrong, not a server: exit code 2.
USAGE_KINDS = frozenset({ErrorKind.BAD_SPEC, ErrorKind.CONFIG_ERROR, ErrorKind.BAD_URL})

_BY_VALUE = {k.value: k for k in ErrorKind}


def kind_of(value: str) -> ErrorKind | str:
    """The member for a known kind's value; any other string (a class name, a newer writer's kind) as it is."""
    return _BY_VALUE.get(value, value)


class TtftError(Exception):
    """The root of ttft's own exceptions: a message fit to show as it is, and, for those that end a
    turn or a command, the kind of failure and what to try.

    A subclass keeps the standard base its callers catch (``LogWriteError`` is an ``OSError`` too,
    ``RecordError`` a ``ValueError``). ``kind`` None: not a failure of a kind of its own (an internal
    signal, a refused merge); if one ever ends a turn it is reported under its class name.
    """

    kind: ErrorKind | None = None
    hint: str | None = None

    def __init__(self, *args: object, kind: ErrorKind | None = None, hint: str | None = None) -> None:
        super().__init__(*args)
        if kind is not None:
            self.kind = kind
        if hint is not None:
            self.hint = hint

    @property
    def message(self) -> str:
        return str(self)


def describe(exc: BaseException) -> tuple[ErrorKind | str, str, str | None]:
    """``(kind, message, hint)`` for an exception that no provider's table knows: one of ttft's own
    with a kind gives its own; any other, its class name and text (a bug, said as one)."""
    if isinstance(exc, TtftError) and exc.kind is not None:
        return exc.kind, str(exc) or type(exc).__name__, exc.hint
    return type(exc).__name__, str(exc) or repr(exc), None
