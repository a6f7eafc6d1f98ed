"""The SDKs' retry policies, for the lean readers: which answers to retry, how long to wait.

Both SDKs retry 408/409/429/5xx (or ``x-should-retry: true``) and connection errors, sleeping
0.5 s * 2^n (at most 8 s, less 0-25 % jitter) unless the server says how long with
``retry-after-ms`` / ``retry-after``. They differ on a long wait:

- OpenAI (openai 3.57, ``_base_client``) honours a wait of 0-120 s and does not retry past a longer one;
- Anthropic (anthropic 2.15) honours any positive wait (at most 4,294,967 s, the sleep's limit) and
  never refuses to retry for it.

A record's attempts and retry time must not depend on the reader, so each lean reader follows the
policy of the SDK it stands in for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx2

from ...transport.http import parse_retry_after

INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
MAX_RETRY_AFTER_S = 120.0  # OpenAI: a server asking for longer is not retried
MAX_SLEEP_S = 4_294_967.0  # Anthropic: the longest sleep a platform allows (2**32 ms)
RETRY_STATUSES = frozenset({408, 409, 429})  # and every status >= 500


def retry_after_s(headers: httpx2.Headers) -> float | None:
    """``retry-after-ms`` / ``retry-after`` in seconds, read as the SDKs read them (numbers first;
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


@dataclass(frozen=True)
class RetryPolicy:
    """One SDK's answer to "retry this, and after how long?" (see the module doc)."""

    max_retry_after_s: float | None  # a longer retry-after is not retried; None: every one is honoured

    def should_retry(self, response: httpx2.Response) -> bool:
        if self.max_retry_after_s is not None:
            ra = retry_after_s(response.headers)
            if ra is not None and ra > self.max_retry_after_s:
                return False
        hint = response.headers.get("x-should-retry")
        if hint in ("true", "false"):
            return hint == "true"
        return response.status_code in RETRY_STATUSES or response.status_code >= 500

    def delay_s(self, retries_taken: int, headers: httpx2.Headers | None) -> float:
        ra = retry_after_s(headers) if headers is not None else None
        if ra is not None and ra > 0:
            if self.max_retry_after_s is None:
                return min(ra, MAX_SLEEP_S)
            if ra <= self.max_retry_after_s:
                return ra
        base = min(INITIAL_RETRY_DELAY_S * 2.0 ** min(retries_taken, 1000), MAX_RETRY_DELAY_S)
        return base * (1 - 0.25 * random.random())


OPENAI = RetryPolicy(max_retry_after_s=MAX_RETRY_AFTER_S)
ANTHROPIC = RetryPolicy(max_retry_after_s=None)

# The OpenAI policy's two questions, by their own names (the Chat Completions reader's first API).
should_retry = OPENAI.should_retry
retry_delay_s = OPENAI.delay_s
