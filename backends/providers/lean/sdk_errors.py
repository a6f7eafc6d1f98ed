"""The OpenAI SDK's exception classes, rebuilt for the lean Chat Completions reader.

:mod:`backends.providers.errors` classifies a failure by its class name and attributes (``status_code``,
``body``, ``message``, ``response``), read from each SDK module this process has imported; these
carry the SDK's names, hierarchy and attributes, so a lean turn's Failed event (type, message,
hint) is the one the SDK path records, without importing ``openai``.
"""

from __future__ import annotations

import json

import httpx2


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
        self.request_id = response.headers.get("x-request-id")


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
        body = json.loads(text)
    except ValueError:
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
