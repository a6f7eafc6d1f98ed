"""The OpenAI SDK's retry policy, for the lean Chat Completions reader: which answers to retry, how long to wait.

Retries on 408/409/429/5xx (or ``x-should-retry: true``), sleeping 0.5 s * 2^n (at most 8 s,
less 0-25 % jitter), or what ``retry-after-ms`` / ``retry-after`` asks when that is 0-120 s; no
retry past a longer one: what the SDK does, so a record's attempts do not depend on the path.
"""

from __future__ import annotations

import random

import httpx2

from backends.transport.http import parse_retry_after

INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
MAX_RETRY_AFTER_S = 120.0  # a server asking for longer is not retried (as the SDK does)
RETRY_STATUSES = frozenset({408, 409, 429})  # and every status >= 500


def retry_after_s(headers: httpx2.Headers) -> float | None:
    """``retry-after-ms`` / ``retry-after`` in seconds, read as the SDK reads them (numbers only;
    an HTTP date is read by :func:`backends.transport.http.parse_retry_after` for the record)."""
    for name, divisor in (("retry-after-ms", 1000), ("retry-after", 1)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            continue
    return parse_retry_after(headers)


def should_retry(response: httpx2.Response) -> bool:
    ra = retry_after_s(response.headers)
    if ra is not None and ra > MAX_RETRY_AFTER_S:
        return False
    hint = response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return response.status_code in RETRY_STATUSES or response.status_code >= 500


def retry_delay_s(retries_taken: int, headers: httpx2.Headers | None) -> float:
    ra = retry_after_s(headers) if headers is not None else None
    if ra is not None and 0 < ra <= MAX_RETRY_AFTER_S:
        return ra
    base = min(INITIAL_RETRY_DELAY_S * 2.0 ** min(retries_taken, 1000), MAX_RETRY_DELAY_S)
    return base * (1 - 0.25 * random.random())
