"""The SDKs' exception classes, rebuilt for the lean readers.

:mod:`backends.providers.errors` classifies a failure by its class name and attributes (``status_code``,
``body``, ``message``, ``response``), read from each SDK module this process has imported; these
carry the SDKs' names, hierarchy and attributes, so a lean turn's Failed event (type, message,
hint) is the one the SDK path records, without importing ``openai`` or ``anthropic``.

Both SDKs share the class names; they differ in what a status error holds, so each has its own
constructor here: :func:`status_error` (OpenAI: the ``error`` object as ``body``, only its message
in the text) and :func:`anthropic_status_error` (Anthropic: the whole body, and the body in the text).
"""

from __future__ import annotations

import httpx2

from ....telemetry import json_guard
from ..answers.error_body import ERROR_BODY_MAX


class OpenAIError(Exception):
    pass


class APIError(OpenAIError):
    def __init__(self, message: str, request: httpx2.Request | None, *, body: object | None) -> None:
        super().__init__(message)
        self.message = message
        self.request = request
        self.body = body
        inner = body if isinstance(body, dict) else {}
        self.code = inner.get("code")
        self.param = inner.get("param")
        self.type = inner.get("type")


class APIStatusError(APIError):
    def __init__(self, message: str, *, response: httpx2.Response, body: object | None) -> None:
        super().__init__(message, response.request, body=body)
        self.response = response
        self.status_code = response.status_code
        # OpenAI's header, then Anthropic's
        self.request_id = response.headers.get("x-request-id") or response.headers.get("request-id")


class APIConnectionError(APIError):
    def __init__(self, *, message: str = "Connection error.", request: httpx2.Request | None) -> None:
        super().__init__(message, request, body=None)


class APITimeoutError(APIConnectionError):
    def __init__(self, request: httpx2.Request | None) -> None:
        super().__init__(message="Request timed out.", request=request)


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


class ConflictError(APIStatusError):
    pass


class UnprocessableEntityError(APIStatusError):
    pass


class RateLimitError(APIStatusError):
    pass


class InternalServerError(APIStatusError):
    pass


class OverloadedError(InternalServerError):
    """Anthropic's 529."""


# HTTP status -> the class the SDK raises for it (>= 500: InternalServerError; others: APIStatusError).
STATUS_ERRORS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def status_error(response: httpx2.Response) -> APIStatusError:
    """The SDK's error for a non-2xx response whose body has been read: the provider's message
    in the exception text, the ``error`` object (or the whole body) as ``body``."""
    text = response.text.strip()
    body: object = text
    msg = f"Error code: {response.status_code}"
    try:
        body = json_guard.loads(text, "the error body", max_bytes=ERROR_BODY_MAX)
    except ValueError:  # not JSON, or past the guard (the SDK keeps such a body as its text too)
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str) and message:
            msg += f" - {message}"
    data = body.get("error", body) if isinstance(body, dict) else body
    status = response.status_code
    cls = STATUS_ERRORS.get(status) or (InternalServerError if status >= 500 else APIStatusError)
    return cls(msg, response=response, body=data)


def _anthropic_class(status: int) -> type[APIStatusError]:
    return STATUS_ERRORS.get(status) or (
        OverloadedError if status == 529 else InternalServerError if status >= 500 else APIStatusError
    )


def anthropic_status_error(response: httpx2.Response) -> APIStatusError:
    """The Anthropic SDK's error for a non-2xx response whose body has been read (its
    ``_make_status_error_from_response``): the whole parsed body as ``body``, and as the text
    ``Error code: N - {body}`` (the raw text when it is not JSON)."""
    text = response.text.strip()
    body: object = text
    try:
        body = json_guard.loads(text, "the error body", max_bytes=ERROR_BODY_MAX)
    except ValueError:  # not JSON, or past the guard (the SDK keeps such a body as its text too)
        msg = text or f"Error code: {response.status_code}"
    else:
        msg = f"Error code: {response.status_code} - {body}"
    return _anthropic_class(response.status_code)(msg, response=response, body=body)


def anthropic_stream_error(response: httpx2.Response, data: bytes) -> APIStatusError:
    """An ``event: error`` in an Anthropic stream, raised as the SDK raises it: a status error of the
    stream's own status (200), its body the event's JSON (or its text), its message that body."""
    text = data.decode("utf-8")  # strict, as the SDK's decoder reads every line
    body: object = text
    try:
        body = json_guard.loads(text, "the error body", max_bytes=ERROR_BODY_MAX)
    except ValueError:  # not JSON, or past the guard (the SDK keeps such a body as its text too)
        msg = text or f"Error code: {response.status_code}"
    else:
        msg = f"{body}"
    return _anthropic_class(response.status_code)(msg, response=response, body=body)
