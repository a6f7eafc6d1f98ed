"""Response headers -> the record's ``http`` facts (request id, processing time, rate limits).

Headers come from the server, or from anything between it and us, so they are untrusted:
only the named headers are read (never an auth header), each value is cut to a bound,
characters outside printable ASCII are dropped (no control sequence reaches a terminal or
a log), and a number that does not parse is left out rather than guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ...telemetry.wire import HttpInfo, RateLimit

REQUEST_ID_HEADERS = ("x-request-id", "request-id")
MAX_ID_CHARS = 128
MAX_RESET_CHARS = 64
MAX_COUNT = 10**15
MAX_PROCESSING_MS = 1e8  # about a day: more is not a processing time
_UNPRINTABLE = re.compile(r"[^\x21-\x7e]")

# (remaining requests, remaining tokens, reset requests, reset tokens), per header family
_RATELIMIT = (
    (
        "x-ratelimit-remaining-requests",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
    ),
    (
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-tokens-reset",
    ),
)


def clean(value: str | None, limit: int) -> str | None:
    """Printable ASCII only, at most ``limit`` characters; None when nothing is left."""
    if not value:
        return None
    out = _UNPRINTABLE.sub("", value[: limit * 4])[:limit]
    return out or None


def _count(value: str | None) -> int | None:
    v = clean(value, 20)
    if v is None or not v.isdigit():
        return None
    n = int(v)
    return n if n < MAX_COUNT else None


def _ms(value: str | None) -> float | None:
    v = clean(value, 20)
    if v is None:
        return None
    try:
        f = float(v)
    except ValueError:
        return None
    return f if math.isfinite(f) and 0 <= f < MAX_PROCESSING_MS else None


def ratelimit(headers: Mapping[str, str]) -> RateLimit | None:
    """The first header family present (OpenAI's, then Anthropic's); None when neither is."""
    for req, tok, reset_req, reset_tok in _RATELIMIT:
        rl = RateLimit(
            remaining_requests=_count(headers.get(req)),
            remaining_tokens=_count(headers.get(tok)),
            reset_requests=clean(headers.get(reset_req), MAX_RESET_CHARS),
            reset_tokens=clean(headers.get(reset_tok), MAX_RESET_CHARS),
        )
        if rl != RateLimit():
            return rl
    return None


def http_info(headers: Mapping[str, str], *, connection: str | None, http_version: str | None) -> HttpInfo:
    """The ``http`` object of one response (``headers``: case-insensitive, as httpx2 gives them)."""
    request_id = None
    for name in REQUEST_ID_HEADERS:
        request_id = clean(headers.get(name), MAX_ID_CHARS)
        if request_id:
            break
    return HttpInfo(
        connection=connection,
        http_version=clean(http_version, 16),
        request_id=request_id,
        server_processing_ms=_ms(headers.get("openai-processing-ms")),
        ratelimit=ratelimit(headers),
    )
