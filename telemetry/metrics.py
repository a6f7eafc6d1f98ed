"""Turn metrics, exactly as ``shared/reference/metrics.md`` defines them.

All inputs are monotonic nanosecond stamps; all outputs are milliseconds.
TTFT and the waiting phase start at the *first* attempt's send: time lost to
retries is part of the wait a user sees, and is reported on its own as
``retry_ms`` so it is never silently inside TTFT. What comes *before* the first
send (the user's submit -> send: ttft's own delay) is ``own_delay_ms``, also never
inside TTFT.

Speculative decoding's figures, normalised from the three sources that report them, are at the end
(``draft_stats``, ``speculative_summary``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

from .plain import as_dict, field_names, json_copy
from .wire import WaitSplit, split_wait, with_client_lag

NS_PER_MS = 1_000_000
PERCENTILES = (50, 90, 95, 99)
# ttft's own delay below this is noise nobody can feel; front ends show it from here on.
OWN_DELAY_SHOWN_MS = 5.0


def ms(a_ns: int | None, b_ns: int | None) -> float | None:
    """b - a in ms, or None when either end did not happen."""
    if a_ns is None or b_ns is None:
        return None
    return (b_ns - a_ns) / NS_PER_MS


@dataclass(frozen=True, slots=True)
class Percentiles:
    """A sample's p50/p90/p95/p99 (linear interpolation, numpy's default), mean, min and max; all None
    for an empty sample. Its JSON form (:meth:`to_dict`) keeps this order, the one summaries write."""

    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    min: float | None = None
    max: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return {
            "p50": self.p50,
            "p90": self.p90,
            "p95": self.p95,
            "p99": self.p99,
            "mean": self.mean,
            "min": self.min,
            "max": self.max,
        }


def percentiles(values: Sequence[float]) -> Percentiles:
    """The sample's :class:`Percentiles`."""
    import numpy as np  # here, not at the top: `ttft ask` then imports it after its request is out (~80 ms)

    if not values:
        return Percentiles()
    arr = np.asarray(values, dtype=float)
    p50, p90, p95, p99 = np.percentile(arr, PERCENTILES).tolist()  # tolist(): Python floats, as float() gives
    return Percentiles(p50, p90, p95, p99, float(arr.mean()), float(arr.min()), float(arr.max()))


def percentiles_many(rows: Sequence[Sequence[float]]) -> list[Percentiles]:
    """``[percentiles(r) for r in rows]``, bit for bit, at a few numpy calls per distinct row length.

    A call of ``percentiles`` is mostly numpy's per-call overhead (~70 us on ~30 values), so a
    batch of records (a bench's finisher) groups its rows by length and asks numpy once per group,
    along axis 1 of a 2-D array.
    """
    import numpy as np  # imported late, as in percentiles()

    by_len: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        by_len.setdefault(len(row), []).append(i)
    out: list[Percentiles] = [Percentiles()] * len(rows)
    for n, idx in by_len.items():
        if n == 0:
            continue  # an empty row's percentiles are all None, as out holds them
        # np.asarray of equal-length lists is C-contiguous, so each row is reduced along its own
        # contiguous axis with the same pairwise summation as the 1-D mean: the sums, hence the
        # means, are the 1-D ones bit for bit (tests/backends/test_finish_batch.py holds that with ==).
        arr = np.asarray([rows[i] for i in idx], dtype=float)
        qs = np.percentile(arr, PERCENTILES, axis=1).T.tolist()  # tolist(): Python floats, as float() gives
        means, lows, highs = arr.mean(axis=1).tolist(), arr.min(axis=1).tolist(), arr.max(axis=1).tolist()
        for i, q, mean, low, high in zip(idx, qs, means, lows, highs, strict=True):
            out[i] = Percentiles(q[0], q[1], q[2], q[3], mean, low, high)
    return out


def itl_gaps(chunks: Sequence[Chunk]) -> list[float]:
    """The inter-token gaps (ms) between consecutive token-bearing chunks: what ``itl_ms`` summarises."""
    return [(b.t_ns - a.t_ns) / NS_PER_MS for a, b in pairwise(chunks)]


# What a token-bearing chunk carried: reasoning text, visible text, or a tool call's delta.
ChunkKind = Literal["reasoning", "text", "tool"]
# Where a record's token counts came from: the server's usage, or ttft's estimate from the text.
# "" only on a record whose writer did not say.
TokenSource = Literal["usage", "estimated", ""]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One token-bearing chunk: when it arrived, what it carried, how many tokens."""

    t_ns: int
    kind: ChunkKind
    tokens: int


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """A turn's tokens. ``input`` is everything the model read: ``cached_input`` of it came from the
    provider's prompt cache, ``cache_write_input`` of it was written to that cache (Anthropic's
    ``cache_creation_input_tokens``, priced above plain input); None where the server did not say
    (every record logged before the field). ``output`` includes ``reasoning``."""

    input: int | None
    cached_input: int | None
    output: int | None
    reasoning: int | None
    source: TokenSource
    cache_write_input: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self, _TOKEN_FIELDS)


@dataclass(frozen=True, slots=True)
class Timestamps:
    """The reference's named events for one turn (ns, None when they did not happen)."""

    sent: int | None = None  # first attempt
    final_sent: int | None = None  # the attempt that produced the answer
    headers: int | None = None  # headers of the final attempt
    first_token: int | None = None
    first_visible: int | None = None
    last_token: int | None = None
    end: int | None = None

    def relative_ms(self) -> dict[str, float | None]:
        origin = self.sent
        return {
            "sent": 0.0 if origin is not None else None,
            "headers": ms(origin, self.headers),
            "first_token": ms(origin, self.first_token),
            "first_visible": ms(origin, self.first_visible),
            "last_token": ms(origin, self.last_token),
            "end": ms(origin, self.end),
        }


@dataclass(frozen=True, slots=True)
class TurnMetrics:
    ttft_ms: float | None = None
    ttfvt_ms: float | None = None
    reasoning_delay_ms: float | None = None
    reasoning_delay_estimated: bool = False
    tpot_ms: float | None = None
    itl_ms: Percentiles = field(default_factory=Percentiles)  # the record keeps p50-p99 and max
    e2e_ms: float | None = None  # last token - sent
    total_ms: float | None = None  # end of stream - sent
    output_tokens_per_s: float | None = None  # output tokens / E2E: includes the wait
    decode_tokens_per_s: float | None = None  # 1 / TPOT: per-user speed
    retry_ms: float = 0.0
    queue_ms: float | None = None
    load_ms: float | None = None
    own_delay_ms: float | None = None  # submit -> first send, less any model load or MCP start: ttft's own time
    # ``ttft ask --mcp``, headless compare: the MCP servers' start (spawn, initialize, list tools) inside the
    # submit -> send span; the servers' time, so outside ttft's own delay.
    mcp_start_ms: float | None = None
    # This process's event-loop lag while the turn waited (send -> first token): the time the loop woke
    # late, as the bench's lag watcher reads it (backends.load.watch); None: not watched. When it is a large
    # part of the wait (telemetry.wire.lag_dominates) the split moves it to ``wait_ms.client_lag``.
    loop_lag_ms: float | None = None
    phases_ms: dict[str, float] = field(default_factory=dict)
    speculative: dict[str, Any] | None = None  # speculative_summary: drafted, accepted, rate, tokens/step
    wait_ms: WaitSplit | None = None  # telemetry.wire: the wait (== ttft_ms) by phase; None without a first token
    # With a saved probe (telemetry.probe.saved): the server's part of the wait (wait_ms.server +
    # first_token) as the prefill expected for this prompt's uncached input.
    expected_prefill_ms: float | None = None
    # The wait by the server's own account (telemetry.wire.server_report), ``server_timing_source`` saying
    # whose: "vllm" (its per-request metrics: queue, TTFT from scheduling), "llama-server" (its timings'
    # prompt_ms as the TTFT; no queue) or "probe" (the saved probe's split: the rest of the server's part
    # as its queue, the expected prefill as its TTFT). ``server_rest_ms``: client TTFT - queue - server
    # TTFT (network, HTTP, the server's front end and tokenizer, ttft's reader).
    server_queue_ms: float | None = None
    server_ttft_ms: float | None = None
    server_rest_ms: float | None = None
    server_timing_source: str | None = None
    # vLLM's output_token_metrics: the first reasoning and content token, from the same scheduling origin
    # (their difference is the server's reasoning delay, beside the client's reasoning_delay_ms).
    server_reasoning_ttft_ms: float | None = None
    server_content_ttft_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        # itl_ms and wait_ms (the dataclass fields) are written below, in their places: not
        # copied first (asdict's walk of wait_ms was a third of this)
        d = {name: json_copy(getattr(self, name)) if name not in _OWN else None for name in _METRIC_FIELDS}
        itl = self.itl_ms
        d["itl_ms"] = {"p50": itl.p50, "p90": itl.p90, "p95": itl.p95, "p99": itl.p99, "max": itl.max}
        d["wait_ms"] = self.wait_ms.to_dict() if self.wait_ms is not None else None
        return d


_TOKEN_FIELDS = field_names(TokenCounts)
_METRIC_FIELDS = field_names(TurnMetrics)
_OWN = frozenset({"itl_ms", "wait_ms"})


def window_tokens(chunks: Sequence[Chunk], tokens: TokenCounts, reasoning_streamed: bool) -> int:
    """Tokens generated between the first and the last token-bearing chunk.

    With usage, the server's count wins; reasoning that never streamed (hidden or
    omitted thinking) was generated before the first chunk, so it is outside.
    """
    if tokens.source == "usage" and tokens.output is not None:
        n = tokens.output
        if not reasoning_streamed and tokens.reasoning:
            n -= tokens.reasoning
        return max(n, len(chunks))
    return sum(c.tokens for c in chunks)


def compute(
    ts: Timestamps,
    chunks: Sequence[Chunk],
    tokens: TokenCounts,
    *,
    queued_ns: int | None = None,
    load_ns: tuple[int, int] | None = None,
    submitted_ns: int | None = None,
    wire_steps: Sequence[tuple[str, int]] = (),
    itl_ms: Percentiles | None = None,
    mcp_start_ns: tuple[int, int] | None = None,
    loop_lag_ms: float | None = None,
) -> TurnMetrics:
    """``loop_lag_ms``: the event loop's lag while the turn waited, when it was watched.

    ``wire_steps``: the final attempt's ``(phase, began_ns)`` (``telemetry.wire``), for ``wait_ms``.

    ``itl_ms``: ``percentiles(itl_gaps(chunks))`` when the caller already has it (a batch computed
    by ``percentiles_many``); computed here otherwise.
    """
    reasoning_streamed = any(c.kind == "reasoning" for c in chunks)
    ttft = ms(ts.sent, ts.first_token)
    ttfvt = ms(ts.sent, ts.first_visible)
    e2e = ms(ts.sent, ts.last_token)
    total = ms(ts.sent, ts.end)

    if itl_ms is None:
        itl_ms = percentiles(itl_gaps(chunks))
    n = window_tokens(chunks, tokens, reasoning_streamed)
    tpot = None
    # One arrival (a non-streamed answer, even when it is a reasoning and a text chunk) shows
    # nothing of the decode: no TPOT rather than 0.
    if (
        n > 1
        and len(chunks) > 1
        and ts.first_token is not None
        and ts.last_token is not None
        and ts.last_token > ts.first_token
    ):
        tpot = (ts.last_token - ts.first_token) / NS_PER_MS / (n - 1)

    delay: float | None = None
    estimated = False
    if reasoning_streamed:
        delay = ms(ts.first_token, ts.first_visible)
    elif tokens.source == "usage" and tokens.reasoning and tpot is not None and ttft is not None:
        # Hidden reasoning decodes at roughly the visible TPOT; it cannot have taken
        # longer than the whole wait, so the estimate is capped there.
        delay = min(tokens.reasoning * tpot, ttft)
        estimated = True

    phases = _phases(ts, reasoning_streamed)
    out_tokens = tokens.output
    return TurnMetrics(
        ttft_ms=ttft,
        ttfvt_ms=ttfvt,
        reasoning_delay_ms=delay,
        reasoning_delay_estimated=estimated,
        tpot_ms=tpot,
        itl_ms=itl_ms,
        e2e_ms=e2e,
        total_ms=total,
        output_tokens_per_s=(out_tokens / (e2e / 1000)) if out_tokens and e2e else None,
        decode_tokens_per_s=(1000 / tpot) if tpot else None,
        retry_ms=ms(ts.sent, ts.final_sent) or 0.0,
        queue_ms=ms(queued_ns, ts.sent),
        load_ms=ms(*load_ns) if load_ns else None,
        own_delay_ms=own_delay_ms(submitted_ns, ts.sent, load_ns, mcp_start_ns),
        mcp_start_ms=ms(*mcp_start_ns) if mcp_start_ns else None,
        phases_ms=phases,
        loop_lag_ms=loop_lag_ms,
        wait_ms=with_client_lag(
            split_wait(ts.sent, ts.final_sent, wire_steps, ts.headers, ts.first_token), loop_lag_ms
        ),
    )


def own_delay_ms(
    submitted_ns: int | None,
    sent_ns: int | None,
    load_ns: tuple[int, int] | None,
    mcp_start_ns: tuple[int, int] | None = None,
) -> float | None:
    """Submit -> first send: the time ttft itself made the user wait.

    A model load and an MCP servers' start inside that span are phases of their own (``load_ms``,
    ``mcp_start_ms``), so they are taken out. None when the request never went out.
    """
    own = ms(submitted_ns, sent_ns)
    if own is None or submitted_ns is None:
        return own
    for span in (load_ns, mcp_start_ns):
        if span is not None and span[0] >= submitted_ns:
            own -= (span[1] - span[0]) / NS_PER_MS
    return own


def _phases(ts: Timestamps, reasoning_streamed: bool) -> dict[str, float]:
    """waiting + reasoning + streaming == E2E (or the time to the end when no token came)."""
    if ts.sent is None:
        return {"waiting": 0.0, "reasoning": 0.0, "streaming": 0.0}
    if ts.first_token is None:
        stop = ts.end if ts.end is not None else ts.sent
        return {"waiting": (stop - ts.sent) / NS_PER_MS, "reasoning": 0.0, "streaming": 0.0}
    last = ts.last_token if ts.last_token is not None else ts.first_token
    waiting = (ts.first_token - ts.sent) / NS_PER_MS
    if ts.first_visible is None:
        # Only reasoning arrived (cancelled or failed mid-thought).
        return {"waiting": waiting, "reasoning": (last - ts.first_token) / NS_PER_MS, "streaming": 0.0}
    reasoning = (ts.first_visible - ts.first_token) / NS_PER_MS if reasoning_streamed else 0.0
    streaming = (last - ts.first_visible) / NS_PER_MS
    return {"waiting": waiting, "reasoning": reasoning, "streaming": streaming}


# --- speculative decoding, normalized ------------------------------------------------------------
# Speculative decoding, normalized: drafted and accepted tokens, acceptance rate, tokens per decode step.
#
# Three sources report it under their own names (kept as they are in the record's ``server``):
# - the local llama.cpp engine: ``server["llama.cpp"]["speculative"]`` (``drafted``,
#   ``accepted``) and ``decode_steps``, and live, ``events.DraftProgress``;
# - vLLM's per-request metrics (``--per-request-spec-decode-metrics``): ``metrics.speculative_decoding``
#   (``num_draft_tokens``, ``num_accepted_draft_tokens``, ``num_spec_steps``), kept under
#   ``server["vllm"]``. Its steps are its verification steps only (steps without a draft are not
#   counted), so its ``tokens_per_step`` is its ``mean_acceptance_length``;
# - llama-server: ``timings.draft_n`` and ``draft_n_accepted`` (present only when it drafted),
#   with ``predicted_n``. It does not report its steps: each decode step yields one token
#   plus the drafts it accepted, so the steps after the first token are
#   ``predicted_n - 1 - draft_n_accepted``.
#
# ``tokens_per_step`` counts every decode step, plain ones too: it is what decides the speed
# (a CPU verify batch of k costs more than one step, so it pays only when this is higher
# than that cost ratio).


def draft_stats(drafted: int, accepted: int, steps: int, source: str = "llama.cpp") -> dict[str, Any] | None:
    """The normalized figures; None when nothing was drafted (speculation off, or never a match)."""
    if drafted <= 0:
        return None
    return {
        "source": source,
        "drafted": drafted,
        "accepted": accepted,
        "acceptance_rate": round(accepted / drafted, 4),
        "steps": steps,
        # each step keeps its token plus the drafts it accepted
        "tokens_per_step": round((steps + accepted) / steps, 3) if steps > 0 else None,
    }


def _int(v: object) -> int:
    """A count from a server's JSON (untrusted): an int >= 0, else 0."""
    return v if type(v) is int and v > 0 else 0


def speculative_summary(server: dict[str, Any] | None) -> dict[str, Any] | None:
    """From a record's ``server`` dict (either source); None when no drafting was reported."""
    if not server:
        return None
    engine = server.get("llama.cpp")
    if isinstance(engine, dict) and isinstance(engine.get("speculative"), dict):
        spec = engine["speculative"]
        return draft_stats(
            int(spec.get("drafted") or 0), int(spec.get("accepted") or 0), int(engine.get("decode_steps") or 0)
        )
    vllm = server.get("vllm")
    spec = vllm.get("speculative_decoding") if isinstance(vllm, dict) else None
    if isinstance(spec, dict) and _int(spec.get("num_draft_tokens")):
        return draft_stats(
            _int(spec.get("num_draft_tokens")),
            _int(spec.get("num_accepted_draft_tokens")),
            _int(spec.get("num_spec_steps")),
            "vllm",
        )
    timings = server.get("llama-server")
    if isinstance(timings, dict) and timings.get("draft_n"):
        accepted = int(timings.get("draft_n_accepted") or 0)
        predicted = timings.get("predicted_n")
        steps = int(predicted) - 1 - accepted if isinstance(predicted, int | float) else 0
        return draft_stats(int(timings["draft_n"]), accepted, max(steps, 0), "llama-server")
    return None
