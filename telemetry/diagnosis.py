"""One actionable sentence per turn and per session: where the time went.

Works on typed ``TurnRecord``s; a logged turn is re-diagnosed through ``TurnRecord.from_dict``.
Rules follow the physics in the metrics reference: a long silence is prefill,
queueing, retries or hidden reasoning (a shorter prompt helps only the first);
a slow trickle is decode (fewer output tokens is the strong lever). UX anchors:
0.1 s feels instant, 1 s keeps the flow, 10 s loses attention; TTFT 200-500 ms is good.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import datetime

from .cost import fmt_usd, sum_costs
from .duration import fmt_ms as _s  # the one duration formatter, short in these sentences
from .record import TurnRecord
from .wire import LLAMA_SERVER, VLLM, HttpInfo, WaitSplit, lag_dominates

GOOD_TTFT_MS = 500.0
FLOW_MS = 1_000.0
ATTENTION_MS = 10_000.0
READING_TPOT_MS = 100.0  # slower than ~10 tokens/s trails a reader
STALL_FACTOR = 10.0
NEW_CONNECTION_MS = 100.0  # a connection set-up worth naming (and at least this share of the wait:)
NEW_CONNECTION_SHARE = 0.3


def diagnose_turn(rec: TurnRecord) -> str:
    m = rec.metrics
    status = rec.status
    err = rec.error
    phases = m.phases_ms
    ttft, ttfvt, e2e, tpot = m.ttft_ms, m.ttfvt_ms, m.e2e_ms, m.tpot_ms
    retry = m.retry_ms
    attempts = len(rec.attempts)

    if status == "error":
        where = "before the first token" if ttft is None else f"after {_s(e2e or ttft)} of output"
        code = f" (HTTP {err.status_code})" if err and err.status_code else ""
        hint = f" {err.hint}" if err and err.hint else ""
        message = ((err.message if err else "") or "unknown error").rstrip(". ")
        return f"The request failed {where}{code}: {message}.{hint}".strip()
    if status == "cancelled":
        got = m.e2e_ms or m.total_ms or 0.0
        if ttft is None:
            return f"Cancelled after {_s(m.total_ms or 0.0)} with no token yet: all of it was waiting."
        return f"Cancelled {_s(got)} in, after the first token at {_s(ttft)}; the partial answer is kept."
    if ttft is None:
        return "The stream ended without a single token: check the model name and max output tokens."
    if lag_dominates(m.loop_lag_ms, ttft):  # ttft's own time: never handed to the server
        return (
            f"ttft's own event loop was busy for {_s(m.loop_lag_ms or 0.0)} of the {_s(ttft)} wait, not the "
            "server: too many turns set up or read at once in this process (share one event loop and "
            "client, as api.arun_turn does, or spread the work)."
        )
    split = _split_layers(rec.server)
    if split:
        return split

    if attempts > 1 and retry >= 0.3 * ttft:
        return (
            f"{attempts - 1} retr{'y' if attempts == 2 else 'ies'} cost {_s(retry)} of the {_s(ttft)} wait: "
            "the provider was rate-limiting or overloaded; slow down or raise the limit."
        )
    wait = m.wait_ms if rec.http is not None else None
    setup = _new_connection(wait, rec.http, ttft)
    if setup:
        return setup
    delay = m.reasoning_delay_ms
    if delay and ttfvt and delay >= 0.5 * ttfvt and ttfvt >= FLOW_MS:
        est = " (estimated from reasoning tokens)" if m.reasoning_delay_estimated else ""
        return (
            f"Reasoning took {_s(delay)}{est} of the {_s(ttfvt)} before the first visible word: "
            "lower the reasoning effort or thinking budget for faster answers."
        )
    n_out = rec.tokens.output or 0
    if e2e and tpot and phases.get("streaming", 0) + phases.get("reasoning", 0) >= 0.6 * e2e and e2e >= ATTENTION_MS:
        return (
            f"The answer was long: {n_out} tokens at {tpot:.0f} ms each took {_s(e2e)}; "
            "asking for fewer tokens is the strongest lever."
        )
    told = _server_sentence(rec, ttft)
    if told:
        return told
    probed = _probe_sentence(rec, ttft)
    if probed:
        return probed
    if e2e and ttft >= FLOW_MS and phases.get("waiting", 0) >= 0.5 * e2e:
        share = 100 * phases["waiting"] / e2e
        if wait is not None:
            return _wait_split(wait, ttft)
        return (
            f"{share:.0f}% of the time came before the first token ({_s(ttft)}): "
            "shorten the prompt, reuse a cached prefix, or check the server's queue."
        )
    # A single stall inflates the mean TPOT; name it before blaming decode speed.
    gap_max, gap_p50 = m.itl_ms.max, m.itl_ms.p50
    if gap_max and gap_p50 and gap_max >= STALL_FACTOR * gap_p50 and gap_max >= FLOW_MS:
        return f"The stream stalled for {_s(gap_max)} mid-answer (median gap {gap_p50:.0f} ms): a server hiccup."
    if tpot and tpot >= READING_TPOT_MS:
        return (
            f"Decode is slow: {tpot:.0f} ms per token ({1000 / tpot:.1f} tokens/s), slower than reading; "
            "the server is busy or the model too big for its hardware."
        )
    if ttft > GOOD_TTFT_MS:
        speed = f", then {1000 / tpot:.0f} tokens/s" if tpot else ""
        return (
            f"First token in {_s(ttft)}{speed}: above the 200-500 ms that feels immediate, "
            "within the 1 s that keeps the flow."
            if ttft < FLOW_MS
            else f"First token in {_s(ttft)}{speed}: past the 1 s that keeps the flow; "
            "a shorter prompt or a closer server would help."
        )
    speed = f", then {1000 / tpot:.0f} tokens/s" if tpot else ""
    return f"Responsive: first token in {_s(ttft)}{speed}; nothing to fix."


def _engine_facts(server: object) -> dict[str, object]:
    """The in-process engine's load facts: the load turn's ``model`` entry, else those every turn repeats."""
    if not isinstance(server, Mapping):
        return {}
    out: dict[str, object] = {}
    for source in ("llama.cpp", "model"):
        facts = server.get(source)
        if isinstance(facts, Mapping):
            out.update(facts)
    return out


def _split_layers(server: object) -> str:
    """The layers ran on a GPU but part of each of them did not (``layers_split``): said on every turn,
    since every turn pays for it. Forced flash attention on a device without its kernels is the usual cause
    (llama.cpp's auto would have checked and turned it off)."""
    d = _engine_facts(server)
    if d.get("layers_split") is not True:
        return ""
    where = str(d.get("backend") or "the GPU")[:20]
    off = d.get("layers_offloaded")
    splits = d.get("graph_splits")
    cut = f" (its graph was cut into {splits} pieces)" if isinstance(splits, int) else ""
    layers = f"{off} layers" if isinstance(off, int) else "the layers"
    if d.get("flash_attn") is True and d.get("flash_attn_requested") == "on":
        return (
            f"Attention ran on the CPU while {layers} ran on {where}{cut}: flash attention was forced on and this"
            " build has no flash-attention kernel for the device; use --flash-attn auto (or off)."
        )
    return (
        f"Part of every layer ran on the CPU while {layers} ran on {where}{cut}: this build lacks a kernel for"
        " one of the model's operations on the device; try --flash-attn off, or a newer llama.cpp build."
    )


def _new_connection(wait: WaitSplit | None, http: HttpInfo | None, ttft: float) -> str:
    """A fresh connection's set-up (dns + connect + tls) that took a visible share of the wait."""
    if wait is None or http is None or http.connection != "new":
        return ""
    setup = wait.dns + wait.connect + wait.tls
    if setup < NEW_CONNECTION_MS or setup < NEW_CONNECTION_SHARE * ttft:
        return ""
    what = "A new TLS connection" if wait.tls > 0 else "A new connection"
    return f"{what} cost {_s(setup)} of the {_s(ttft)} wait; later turns reuse it while it stays open."


def _wait_split(wait: WaitSplit, ttft: float) -> str:
    """A long wait, said by the part of it that dominated (the wire split)."""
    net = wait.network_ms
    if net >= 0.5 * ttft:
        return (
            f"The network took {_s(net)} of the {_s(ttft)} wait (dns {_s(wait.dns)}, connect {_s(wait.connect)}, "
            f"TLS {_s(wait.tls)}, send {_s(wait.send)}): a closer server or a kept-alive connection would help."
        )
    if wait.server >= 0.5 * ttft:
        return (
            f"The server took {_s(wait.server)} after the request arrived, before its headers: "
            f"a queue or a long prefill, not the network ({_s(net)})."
        )
    if wait.first_token >= 0.5 * ttft:
        return (
            f"The server sent its headers, then its first token {_s(wait.first_token)} later: "
            f"a queue or a long prefill, not the network ({_s(net)})."
        )
    if wait.server_ms >= 0.5 * ttft:
        return (
            f"The server took {_s(wait.server_ms)} of the {_s(ttft)} wait ({_s(wait.server)} before its headers, "
            f"{_s(wait.first_token)} after): a queue or a long prefill, not the network ({_s(net)})."
        )
    return (
        f"The {_s(ttft)} wait was split: network {_s(net)}, server {_s(wait.server_ms)}, "
        f"earlier attempts and the pool {_s(wait.retries + wait.pool)}."
    )


def _waiting(server: object) -> str:
    """`` (4 waiting)`` from the server's queue gauge as the request left (``server["gauges"]``), else ""."""
    g = server.get("gauges") if isinstance(server, dict) else None
    n = g.get("waiting") if isinstance(g, dict) else None
    if isinstance(n, bool) or not isinstance(n, int | float) or not 0 <= n < 1e9:
        return ""
    return f" ({round(n)} waiting)"


def _server_sentence(rec: TurnRecord, ttft: float) -> str:
    """With the server's own per-request figures (vLLM's metrics, llama-server's timings): the slow wait
    split into its queue, its prefill and the rest (the network and the client)."""
    m = rec.metrics
    source, queue, prefill, rest = m.server_timing_source, m.server_queue_ms, m.server_ttft_ms, m.server_rest_ms
    if source not in (VLLM, LLAMA_SERVER) or prefill is None or rest is None or ttft <= GOOD_TTFT_MS:
        return ""
    if source == LLAMA_SERVER:
        head = (
            f"TTFT {_s(ttft)}: {_s(prefill)} prompt processing on llama-server, "
            f"{_s(rest)} network, client and any wait for a slot"
        )
        parts = {"prefill": prefill, "rest": rest}
    else:
        q = queue or 0.0
        head = (
            f"TTFT {_s(ttft)}: {_s(q)} queued on the server{_waiting(rec.server)}, {_s(prefill)} prefill, "
            f"{_s(rest)} network and client"
        )
        parts = {"queue": q, "prefill": prefill, "rest": rest}
    top = max(parts, key=lambda k: parts[k])
    lever = {
        "queue": "the server's queue, not the prompt: fewer requests at once or more replicas would help.",
        "prefill": "the prompt's prefill: shorten it or reuse a cached prefix.",
        "rest": "not the server: the network, a proxy or the client took most of it.",
    }[top]
    if top == "rest" and source == LLAMA_SERVER:
        lever = "outside the prompt's processing: a wait for a free slot, the network or the client."
    return f"{head}; most of it was {lever}"


def _k_tokens(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else f"{n:.0f}"


def _probe_sentence(rec: TurnRecord, ttft: float) -> str:
    """With a saved probe: whether the prompt's prefill or the server's queue made a slow wait."""
    expected, queue = rec.metrics.expected_prefill_ms, rec.metrics.server_queue_ms
    if expected is None or queue is None or ttft <= GOOD_TTFT_MS:
        return ""
    if expected + queue < 0.5 * ttft:
        return ""  # the network or retries took most of it: other rules speak to those
    fresh = (rec.tokens.input or 0) - (rec.tokens.cached_input or 0)
    probe = rec.extra.get("probe")
    date = probe.get("date") if isinstance(probe, dict) else None
    day = probe_day(date if isinstance(date, str) else None)
    head = f"{_k_tokens(fresh)} input tokens should prefill in about {_s(expected)} on this model (probe of {day})"
    if queue >= expected:
        return f"{head}; the other {_s(queue)} was the server's queue."
    return (
        f"{head}, most of the {_s(ttft)} wait: the prompt's length, not a queue; shorten it or reuse a cached prefix."
    )


def _session_wait(ok: Sequence[TurnRecord]) -> str:
    """Which part of the session's waits dominated, when the turns were split on the wire (else "")."""
    splits = [r.metrics.wait_ms for r in ok if r.http is not None and r.metrics.wait_ms is not None]
    total = sum(w.total_ms for w in splits)
    if not splits or total <= 0:
        return ""
    server, net = sum(w.server_ms for w in splits), sum(w.network_ms for w in splits)
    if server >= 0.7 * total:
        return f"the server's part ({100 * server / total:.0f}% of it): prompt length or its queue, not the network."
    if net >= 0.5 * total:
        return f"the network's part ({100 * net / total:.0f}% of it): new connections or a distant server."
    return ""


def _median(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def session_cost(records: Sequence[TurnRecord]) -> str:
    """`` Cost $0.0042 over 3 turns.`` (with how many more were not priced); empty when none was."""
    total = sum_costs(r.cost for r in records)
    if not total.priced:
        return ""
    turns = f"{total.priced} turn" + ("" if total.priced == 1 else "s")
    unpriced = f"; {total.unpriced} more not priced" if total.unpriced else ""
    return f" Cost {fmt_usd(total.total_usd, 3)} over {turns}{unpriced}."


def diagnose_session(records: Sequence[TurnRecord]) -> str:
    """The session summary: where the time went across its turns, and what they cost."""
    return _session_time(records) + session_cost(records)


def _session_time(records: Sequence[TurnRecord]) -> str:
    if not records:
        return "No turns yet."
    ok = [r for r in records if r.status == "ok"]
    failed = sum(1 for r in records if r.status == "error")
    fail_note = f" {failed} of {len(records)} turns failed." if failed else ""
    if not ok:
        return f"No turn completed.{fail_note}".strip()
    ms_ = [r.metrics for r in ok]
    ttft = _median([m.ttft_ms for m in ms_])
    tpot = _median([m.tpot_ms for m in ms_])
    e2e_total = sum(m.e2e_ms or 0.0 for m in ms_)
    wait_total = sum(m.phases_ms.get("waiting", 0.0) for m in ms_)
    think_total = sum(m.phases_ms.get("reasoning", 0.0) for m in ms_)
    out = _median([r.tokens.output for r in ok])
    turns = f"{len(ok)} turn" + ("" if len(ok) == 1 else "s")
    head = f"Across {turns}: median TTFT {_s(ttft or 0)}" + (f", TPOT {tpot:.0f} ms" if tpot else "")
    if e2e_total <= 0:
        return head + "." + fail_note
    if think_total >= 0.4 * e2e_total:
        verdict = (
            f"reasoning took {100 * think_total / e2e_total:.0f}% of the time: lower the effort when speed matters."
        )
    elif wait_total >= 0.5 * e2e_total:
        verdict = f"{100 * wait_total / e2e_total:.0f}% of the time was spent before the first token: " + (
            _session_wait(ok) or "prompt length, queueing or retries dominate, not decode."
        )
    elif tpot and out:
        verdict = (
            f"most time went to decoding answers of about {out:.0f} tokens: "
            "shorter answers (max output tokens) cut latency the most."
        )
    else:
        verdict = "the time is split between waiting and decoding."
    return f"{head}; {verdict}{fail_note}"


def probe_day(date: str | None) -> str:
    """``2026-12-02T...`` as ``2 Dec`` for a sentence; the text itself (printable, bounded) when it is no date.

    The date comes from a saved probe file or an old log's ``extra.probe``, so it is untrusted:
    the diagnosis sentence it lands in is printed by ``ttft ask`` and drawn in the pane.
    """
    if not date:
        return "an earlier probe"
    try:
        d = datetime.fromisoformat(date)
    except ValueError:
        return "".join(ch for ch in date[:32] if ch.isprintable()) or "an earlier probe"
    return f"{d.day} {d:%b}"
