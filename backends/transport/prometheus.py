"""A server's Prometheus ``/metrics`` endpoint, read over HTTP: one bounded GET, a reading or a reason.

:class:`MetricsEndpoint` finds which server it is talking to (``telemetry.server.gauges``'s dialects)
on its first read and then reads its gauges on demand: the bench's scraper every 250 ms during a
level (``backends.load.scrape``), the chat once as a turn leaves (``backends.providers.gauged``).

The GET is blocking (``urllib``), for callers that run it in a thread: a slow endpoint never holds
up an event loop that is timing streams. It follows no redirect, sends no API key (vLLM, SGLang,
llama-server and TGI serve ``/metrics`` without one), honours the same proxy variables as the other
clients, and reads at most ``MAX_BYTES``. What the server sends is untrusted: a body that is not
Prometheus text, or holds none of the mapped names, is a reason, never an exception to the user.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

from ...telemetry import events as ev
from ...telemetry.errors import TtftError
from ...telemetry.log.urls import redact_url
from ...telemetry.server import gauges
from ...telemetry.server import histograms as server_histograms

TIMEOUT_S = 2.0
MAX_BYTES = 8 << 20  # a vLLM endpoint with many models and histograms is a few hundred KB


class MetricsUnavailable(TtftError):
    """No gauges from this endpoint: the message says why, in words fit to print (the URL redacted)."""


def metrics_url(base_url: str) -> str:
    """The ``/metrics`` beside an OpenAI-compatible API: ``http://host:8000/v1`` -> ``http://host:8000/metrics``.

    A path before ``/v1`` is kept (a server mounted under a prefix); the query and any credentials are
    not sent (the endpoint needs neither, and a query may hold a key)."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    path = path.removesuffix("/v1")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, f"{path}/metrics", "", ""))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a 3xx is then an HTTPError: said, not followed to another host


_OPENER = urllib.request.build_opener(_NoRedirect())


def fetch_text(url: str, timeout_s: float = TIMEOUT_S) -> str:
    """The endpoint's body as text; :class:`MetricsUnavailable` with the reason when there is none."""
    shown = redact_url(url)
    req = urllib.request.Request(url, headers={"Accept": "text/plain", "User-Agent": "ttft"})
    try:
        with _OPENER.open(req, timeout=timeout_s) as resp:
            body: bytes = resp.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise MetricsUnavailable(f"{shown} answered HTTP {exc.code}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        why = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
        raise MetricsUnavailable(f"{shown} could not be reached ({why})") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:  # a timeout, a reset, a malformed answer
        raise MetricsUnavailable(f"{shown} could not be read ({type(exc).__name__})") from None
    if len(body) > MAX_BYTES:
        raise MetricsUnavailable(f"{shown} sent more than {MAX_BYTES >> 20} MiB")
    return body.decode("utf-8", "replace")


class MetricsEndpoint:
    """One server's ``/metrics``: which server it is (learnt on the first read), then readings."""

    def __init__(self, url: str, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.dialect: gauges.Dialect | None = None

    @property
    def shown_url(self) -> str:
        return redact_url(self.url) or ""

    def probe(self, histograms: bool = False) -> gauges.Scrape:
        """The first read: finds the dialect, or raises :class:`MetricsUnavailable` saying why there is none."""
        t = ev.now_ns()
        text = fetch_text(self.url, self.timeout_s)
        try:
            samples = gauges.parse(text)
            if not samples:
                gauges.check_text(text)
        except gauges.NotPrometheus as exc:
            raise MetricsUnavailable(f"{self.shown_url} is not a Prometheus endpoint: {exc}") from None
        d = gauges.dialect_of(samples)
        if d is None:
            raise MetricsUnavailable(
                f"{self.shown_url} has none of the gauges ttft reads (vLLM, SGLang, llama-server, TGI)"
            )
        self.dialect = d
        snap = server_histograms.snapshot(text, d.name, d.rank_labels) if histograms else None
        return gauges.Scrape(t, gauges.reading(samples, d), gauges.flat(samples), snap)

    def read(self, histograms: bool = False) -> gauges.Scrape:
        """One reading, stamped when it was asked for; :class:`MetricsUnavailable` when this read failed.
        With ``histograms``, the server's latency histograms too (a level's first and last reads)."""
        if self.dialect is None:
            return self.probe(histograms)
        t = ev.now_ns()
        text = fetch_text(self.url, self.timeout_s)
        try:
            return gauges.scrape(text, t, self.dialect, histograms)
        except gauges.NotPrometheus as exc:
            raise MetricsUnavailable(f"{self.shown_url}: {exc}") from None
