"""Where the wait went: the split of waiting (send -> first token) into wire phases, and the ``http`` facts.

A backend stamps, per HTTP attempt, the moment each phase of getting a response *began*
(:class:`telemetry.events.WireStep`): ``pool`` (at the attempt's send), ``dns``, ``connect``,
``tls``, ``send``, ``server`` (the request is written) and ``first_token`` (the response
headers are in). A phase lasts until the next one begins, so the phases tile the final
attempt's wait exactly; time between one step's end and the next one's start (a few us of
glue) counts to the earlier phase. Earlier attempts and their backoff are ``retries``. So::

    retries + pool + dns + connect + tls + send + server + first_token == ttft_ms

to float rounding. A phase that did not happen on the final attempt is 0 (a reused
connection has no dns/connect/tls).

A local engine has no wire: everything from its generate call to the first token is its
prefill, the ``server`` part. A hosted attempt whose HTTP layer gave no trace (a custom
transport) puts send -> headers in ``server`` too: there is nothing to split it by.

The server's part can be split further: by a model of the server (a saved probe,
:func:`split_server_wait`), or by the server's own account of the request (vLLM's per-request
metrics, llama-server's ``timings``: :func:`server_report`), joined with the client's TTFT into
queue, server TTFT and the rest (:func:`join_server`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from .typed_read import build

NS_PER_MS = 1_000_000

# The phases of one attempt, in the order they happen.
PHASES = ("pool", "dns", "connect", "tls", "send", "server", "first_token")
NETWORK = ("dns", "connect", "tls", "send")
# ``client_lag``: no wire phase but this process's own: the event loop's lag while the turn waited, taken
# out of the server's part when it was a large share of the wait (:func:`with_client_lag`).
KEYS = ("retries", *PHASES, "client_lag")
# When the loop's lag counts as ttft's own in the split (and the diagnosis): at least this share of
# the TTFT and at least this many ms; below, it is the loop's ordinary jitter, left where it fell.
LAG_SHARE = 0.25
LAG_MIN_MS = 10.0
_UNPRINTABLE = re.compile(r"[^\x21-\x7e]")  # the rule backends.transport.meta applies to the headers it reads


def _clean(value: str | None, limit: int) -> str | None:
    return (_UNPRINTABLE.sub("", value[: limit * 4])[:limit] or None) if value else None


# What the live waiting line says in each phase ("server" adds its running time).
LIVE_LABEL = {
    "pool": "waiting for a free connection",
    "dns": "resolving the host name",
    "connect": "connecting",
    "tls": "TLS",
    "send": "sending the request",
    "server": "sent, server working",
    "first_token": "headers in, waiting for the first token",
    "prefill": "prefill (the engine's server part)",  # a local engine: no wire, its wait is its prefill
    "backoff": "error response, waiting to retry",  # an error status in, the next attempt not sent yet
}
ENGINE_APIS = ("llama.cpp",)  # in-process engines: the live phase of their wait is "prefill"


@dataclass(frozen=True, slots=True)
class WaitSplit:
    """``metrics.wait_ms``: the wait (first send -> first token) in ms, by phase."""

    retries: float = 0.0
    pool: float = 0.0
    dns: float = 0.0
    connect: float = 0.0
    tls: float = 0.0
    send: float = 0.0
    server: float = 0.0
    first_token: float = 0.0
    client_lag: float = 0.0  # this process's event loop was busy: ttft's own, not the server's

    @property
    def network_ms(self) -> float:
        """dns + connect + tls + send: what the network and this client's connection cost."""
        return self.dns + self.connect + self.tls + self.send

    @property
    def server_ms(self) -> float:
        """server + first_token: the server's part (some send headers at once, some at the first token)."""
        return self.server + self.first_token

    @property
    def total_ms(self) -> float:
        return self.retries + self.pool + self.network_ms + self.server_ms + self.client_lag

    def to_dict(self) -> dict[str, float]:
        return {k: round(getattr(self, k), 3) for k in KEYS}  # KEYS: its fields, in order (not asdict: per record)

    @classmethod
    def from_dict(cls, d: object) -> WaitSplit | None:
        """From a record's ``metrics.wait_ms`` (untrusted: an old or hand-edited log); None when unusable."""
        if not isinstance(d, dict):
            return None
        vals: dict[str, float] = {}
        for k in KEYS:
            v = d.get(k, 0.0)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                return None
            vals[k] = float(v)
        return cls(**vals)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """What the server said is left of its rate limits (None: it did not say)."""

    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests: str | None = None  # as the server wrote it: "1s", "6m0s", an RFC 3339 time
    reset_tokens: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class HttpInfo:
    """The record's ``http`` object: facts about the final attempt's connection and response headers."""

    connection: str | None = None  # "new" | "reused"; None when the HTTP layer gave no trace
    http_version: str | None = None  # "HTTP/1.1", "HTTP/2"
    request_id: str | None = None  # x-request-id / request-id: what a support ticket quotes
    server_processing_ms: float | None = None  # openai-processing-ms
    ratelimit: RateLimit | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HttpInfo:
        """From a record's ``http`` (untrusted: an old or hand-edited log), each field read by its type
        and its text cleaned as the headers were when captured (the pane shows it on a terminal)."""
        info = build(cls, d, "http")
        rl = info.ratelimit
        if rl is not None:
            rl = replace(rl, reset_requests=_clean(rl.reset_requests, 64), reset_tokens=_clean(rl.reset_tokens, 64))
        return replace(
            info,
            connection=_clean(info.connection, 16),
            http_version=_clean(info.http_version, 16),
            request_id=_clean(info.request_id, 128),
            ratelimit=rl,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "connection": self.connection,
            "http_version": self.http_version,
            "request_id": self.request_id,
            "server_processing_ms": self.server_processing_ms,
            "ratelimit": self.ratelimit.to_dict() if self.ratelimit else None,
        }


def split_wait(
    first_sent_ns: int | None,
    final_sent_ns: int | None,
    steps: Sequence[tuple[str, int]],
    headers_ns: int | None,
    first_token_ns: int | None,
) -> WaitSplit | None:
    """The split of one turn's wait; None when no token came (there is no TTFT to split).

    ``steps`` are the final attempt's ``(phase, began_ns)`` in arrival order; ``pool`` always
    begins at ``final_sent_ns`` and ``first_token`` at ``headers_ns`` (steps of those names are
    ignored). No steps and no headers: a local engine, whose whole wait is ``server``. Each
    boundary is clamped between its neighbours, so a stamp out of order (clock reads on two
    threads) shortens a phase to 0 rather than making one negative or breaking the sum.
    """
    if first_sent_ns is None or first_token_ns is None:
        return None
    final = final_sent_ns if final_sent_ns is not None else first_sent_ns
    final = min(max(final, first_sent_ns), first_token_ns)
    marks: list[tuple[str, int]] = [("pool", final)]
    traced = [(name, t) for name, t in steps if name in PHASES and name not in ("pool", "first_token")]
    if headers_ns is None and not traced:
        marks = [("server", final)]  # a local engine: its prefill is the server part
    else:
        marks.extend(traced)
        if not traced:
            marks.append(("server", final))  # untraced HTTP: nothing to split send -> headers by
        if headers_ns is not None:
            marks.append(("first_token", headers_ns))
    out = dict.fromkeys(PHASES, 0.0)
    prev = final
    bounded: list[tuple[str, int]] = []
    for name, t in marks:
        prev = min(max(t, prev), first_token_ns)
        bounded.append((name, prev))
    for (name, t), (_, nxt) in zip(bounded, [*bounded[1:], ("end", first_token_ns)], strict=True):
        out[name] += (nxt - t) / NS_PER_MS
    return WaitSplit(retries=(final - first_sent_ns) / NS_PER_MS, **out)


def lag_dominates(loop_lag_ms: float | None, ttft_ms: float | None) -> bool:
    """Whether the event loop's lag during a wait was a large part of it (:data:`LAG_SHARE`, :data:`LAG_MIN_MS`)."""
    if loop_lag_ms is None or ttft_ms is None or ttft_ms <= 0:
        return False
    return loop_lag_ms >= LAG_MIN_MS and loop_lag_ms >= LAG_SHARE * ttft_ms


def with_client_lag(split: WaitSplit | None, loop_lag_ms: float | None) -> WaitSplit | None:
    """``split`` with the loop's lag moved out of the server's part into ``client_lag`` when it dominates.

    A token that arrived while the loop was busy is read (and stamped) late, so the lag lands at the
    end of the wait: it is taken from ``first_token``, then ``server``, never more than they hold, and
    the split still sums to the TTFT. Lag below the rule stays where it fell."""
    if split is None or not lag_dominates(loop_lag_ms, split.total_ms):
        return split
    assert loop_lag_ms is not None
    take_first = min(loop_lag_ms, split.first_token)
    take_server = min(loop_lag_ms - take_first, split.server)
    return replace(
        split,
        first_token=split.first_token - take_first,
        server=split.server - take_server,
        client_lag=split.client_lag + take_first + take_server,
    )


def live_phase(
    steps: Sequence[tuple[str, int]], headers_ns: int | None, status: int | None = None
) -> tuple[str, int] | None:
    """The phase the current attempt is in and when it began, for the live waiting line."""
    if headers_ns is not None:
        return ("backoff" if status is not None and status >= 400 else "first_token"), headers_ns
    if steps:
        return steps[-1]
    return None  # no wire trace (a local engine): the front end says "waiting for the first token"


# --- the server's part of the wait, split by a model of the server (a saved ``ttft probe``) ----------
SERVER_PHASES = ("server", "first_token")


class PrefillModel(Protocol):
    """What an idle server takes to its first token for this much uncached input (a probe's fit)."""

    def prefill_at(self, fresh_input_tokens: float) -> float | None: ...


class WaitModel(PrefillModel, Protocol):
    """A prefill model a turn's record can name: a saved probe (:class:`telemetry.probe.saved.SavedProbe`)."""

    def reference(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ServerSplit:
    expected_prefill_ms: float
    server_queue_ms: float


def _as_mapping(wait: object) -> Mapping[str, Any] | None:
    if isinstance(wait, Mapping):
        return wait
    if dataclasses.is_dataclass(wait) and not isinstance(wait, type):
        return dataclasses.asdict(wait)
    return None


def server_wait_ms(wait_ms: object) -> float | None:
    """``server + first_token`` of a turn's ``wait_ms``; None when the turn has no such split."""
    wait = _as_mapping(wait_ms)
    if not wait:
        return None
    parts = [wait.get(k) for k in SERVER_PHASES]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in parts):
        return None
    return float(sum(parts))  # type: ignore[arg-type]


def split_server_wait(
    wait_ms: object, input_tokens: int | None, cached_tokens: int | None, model: PrefillModel
) -> ServerSplit | None:
    """The server's part of this turn's wait as (expected prefill, the rest); the two sum to that part.

    The expected prefill is capped at the part itself (a server faster than at the probe
    had no queue), and is never below 0 (a fit's negative intercept is no negative time).
    """
    server = server_wait_ms(wait_ms)
    if server is None or input_tokens is None:
        return None
    expected = model.prefill_at(max(input_tokens - (cached_tokens or 0), 0))
    if expected is None:
        return None
    expected = min(max(expected, 0.0), max(server, 0.0))
    return ServerSplit(round(expected, 3), round(max(server - expected, 0.0), 3))


# --- the server's own account of the wait: vLLM's per-request metrics, llama-server's timings ------
# Where a turn's ``server_queue_ms`` / ``server_ttft_ms`` came from (``metrics.server_timing_source``).
VLLM, LLAMA_SERVER, PROBE = "vllm", "llama-server", "probe"


@dataclass(frozen=True, slots=True)
class ServerReport:
    """What the server said of this request's wait, from a record's ``server`` (untrusted).

    ``ttft_ms`` is the server's own time to the first token from when it *scheduled* the request
    (vLLM's ``time_to_first_token_ms``: the prefill and its first step), or llama-server's
    ``prompt_ms`` (its prompt processing; llama-server reports no queue, so a wait for a slot is
    not in it). The category TTFTs (vLLM's ``output_token_metrics``) share that origin.
    """

    source: str
    queue_ms: float | None
    ttft_ms: float | None
    reasoning_ttft_ms: float | None = None
    content_ttft_ms: float | None = None


def _server_ms(d: object, key: str) -> float | None:
    v = d.get(key) if isinstance(d, Mapping) else None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def server_report(server: object) -> ServerReport | None:
    """The server's per-request figures of a record's ``server``: vLLM's first, else llama-server's."""
    if not isinstance(server, Mapping):
        return None
    v = server.get(VLLM)
    if isinstance(v, Mapping):
        queue, ttft = _server_ms(v, "queue_time_ms"), _server_ms(v, "time_to_first_token_ms")
        if queue is not None or ttft is not None:
            otm = v.get("output_token_metrics")
            otm = otm if isinstance(otm, Mapping) else {}
            return ServerReport(
                VLLM,
                queue,
                ttft,
                _server_ms(otm.get("reasoning"), "time_to_first_token_ms"),
                _server_ms(otm.get("content"), "time_to_first_token_ms"),
            )
    t = server.get(LLAMA_SERVER)
    if (prompt := _server_ms(t, "prompt_ms")) is not None:
        return ServerReport(LLAMA_SERVER, None, prompt)
    return None


@dataclass(frozen=True, slots=True)
class ServerJoin:
    """The client's TTFT split by the server's own figures: its queue, its TTFT from scheduling, and the
    rest (network, HTTP, the server's front end and tokenizer, ttft's reader). ``rest_ms`` is None when
    the server's figures add up to more than the client measured (``problem`` says so)."""

    source: str
    queue_ms: float | None
    ttft_ms: float | None
    rest_ms: float | None
    problem: str | None = None


def join_server(client_ttft_ms: float | None, source: str, queue_ms: float | None, ttft_ms: float | None) -> ServerJoin:
    """The rest of the client's TTFT once the server's queue and TTFT are taken out."""
    if client_ttft_ms is None or (queue_ms is None and ttft_ms is None):
        return ServerJoin(source, queue_ms, ttft_ms, None)
    server = (queue_ms or 0.0) + (ttft_ms or 0.0)
    rest = client_ttft_ms - server
    if rest < 0:
        return ServerJoin(
            source,
            queue_ms,
            ttft_ms,
            None,
            f"the server's queue and TTFT ({server:.1f} ms, {source}) exceed the client's TTFT"
            f" ({client_ttft_ms:.1f} ms): its figures or its clock are off, so no rest is given",
        )
    return ServerJoin(source, queue_ms, ttft_ms, round(rest, 3))
