"""Per-level figures of a load run, from its typed requests (pure: no I/O, no drawing).

A bench run sends N requests at each level (a closed-loop concurrency, an open-loop Poisson
rate, or a trace at a speedup). This module turns the requests of one level
(``telemetry.bench.requests.BenchTurn``) into the numbers the metrics reference names (throughput,
TTFT/TTFVT/TPOT/ITL/E2E percentiles, per-user speed, goodput under SLOs, the wait's parts, the
server's own timings, and what the workload shapes: lengths, the prefix cache, cost by turn,
arrivals: ``telemetry.bench.workload.figures``; tool-using turns: ``telemetry.bench.agent``) and the
vLLM bench summary keys.
``telemetry.bench.conclusion`` says what they mean across levels; ``telemetry.bench.summary``
writes them.

Timing across requests uses ``BenchInfo.sent_at_ms`` (see ``telemetry.bench.requests``), so
throughput = output tokens / (last response - first send).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from ..cost import sum_costs
from ..metrics import NS_PER_MS, percentiles
from ..record import TurnRecord
from ..server.timings import server_timings
from ..wire import KEYS as WAIT_KEYS
from ..wire import WaitSplit
from .agent import agent_figures, model_tpots, step_gaps_ms
from .probe import probe_figures
from .requests import BenchTurn, measured, span_ms
from .slo import SLO
from .ttft_split import ttft_split
from .workload.figures import workload_figures

# The client is said to distort what it measures past these (one process).
CLIENT_LAG_P99_MS = 5.0
CLIENT_CPU_PERCENT = 90.0


def chunk_gaps_ms(rec: TurnRecord) -> list[float]:
    """Gaps between consecutive token-bearing chunks (the ITL samples of one request)."""
    # Each stamp back in ms before subtracting: the logged ms, exactly, so the figures match the log's.
    return [b - a for a, b in pairwise(c.t_ns / NS_PER_MS for c in rec.chunks)]


def _std(values: Sequence[float]) -> float | None:
    return float(np.std(values)) if values else None


def client_bottleneck(client: dict[str, Any] | None) -> str | None:
    """A plain sentence when the load generator was too busy, or starved, to time the server faithfully.

    Lag with a busy client process means the client is the bottleneck; lag while this process
    is mostly idle and the whole machine is busy means other programs took the CPU from it.
    Either way every timestamp can be late by about the lag.
    """
    if not client:
        return None
    lag = (client.get("loop_lag_ms") or {}).get("p99")
    cpu = client.get("cpu_percent_max_process")
    if cpu is None:
        cpu = client.get("cpu_percent")
    host = client.get("host_cpu_percent")
    lagging = lag is not None and lag > CLIENT_LAG_P99_MS
    busy = cpu is not None and cpu > CLIENT_CPU_PERCENT
    if not lagging and not busy:
        return None
    parts = []
    if lagging:
        parts.append(f"event-loop lag p99 {lag:.1f} ms > {CLIENT_LAG_P99_MS:g} ms")
    if cpu is not None:
        parts.append(f"client CPU {cpu:.0f}% of a core")
    if lagging and not busy and host is not None and host > CLIENT_CPU_PERCENT:
        return (
            "host-bound: " + "; ".join(parts) + f" while the machine is {host:.0f}% busy: other programs delay "
            "the client, so timings can be late by about the lag"
        )
    return "client-bound: " + "; ".join(parts) + " (timings include client delay; add --workers or lower the load)"


def aggregate_level(
    turns: Sequence[BenchTurn],
    *,
    level: float | None = None,
    mode: str = "concurrency",
    slo: SLO | None = None,
    client: dict[str, Any] | None = None,
    probe_rate: float | None = None,
) -> dict[str, Any]:
    """All figures for one level. Warm-up requests are ignored; the probe user's (``--probe-rate``) are
    not the load's: they are summarised apart, as ``probe`` (with ``probe_rate``, or the rate their
    tags carry), and no other figure counts them."""
    every = measured(turns)
    reqs = [t for t in every if not t.bench.probe]
    probes = [t for t in every if t.bench.probe]
    recs = [t.record for t in reqs]
    ok = [r for r in recs if r.status == "ok"]
    failed = len(recs) - len(ok)
    span = span_ms(reqs)
    duration_s = (span[1] - span[0]) / 1000 if span else 0.0

    out_tokens = sum(r.tokens.output or 0 for r in ok)
    in_tokens = sum(r.tokens.input or 0 for r in ok)

    ttft = [v for r in ok if (v := r.metrics.ttft_ms) is not None]
    ttfvt = [v for r in ok if (v := r.metrics.ttfvt_ms) is not None]
    tpot = [v for r in ok for v in model_tpots(r)]  # a tool-using turn's: each model step's own
    e2e = [v for r in ok if (v := r.metrics.e2e_ms) is not None]
    itl = [g for r in ok for g in step_gaps_ms(r, chunk_gaps_ms(r))]  # never across a turn's tools
    per_user = [1000.0 / t for t in tpot if t > 0]
    sources = sorted({r.tokens.source or "?" for r in ok})

    good = sum(1 for r in recs if slo.met(r)) if slo else None

    def rate(n: float) -> float | None:
        return n / duration_s if duration_s > 0 else None

    out: dict[str, Any] = {
        "mode": mode,
        "level": level,
        "requests": len(recs),
        "completed": len(ok),
        "failed": failed,
        "errors": _error_counts(recs),
        "duration_s": duration_s,
        "request_throughput": rate(len(ok)),
        "output_throughput": rate(out_tokens),  # completed requests' tokens, as vLLM counts them
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "token_source": ",".join(sources),
        "token_note": token_note(ok),  # when the tokens/s rest on estimates, or on counts the text cannot hold
        "ttft_ms": {**percentiles(ttft).to_dict(), "std": _std(ttft)},
        "ttfvt_ms": {**percentiles(ttfvt).to_dict(), "std": _std(ttfvt)},
        "tpot_ms": {**percentiles(tpot).to_dict(), "std": _std(tpot)},
        "itl_ms": {**percentiles(itl).to_dict(), "std": _std(itl)},
        "e2e_ms": {**percentiles(e2e).to_dict(), "std": _std(e2e)},
        "per_user_tokens_per_s": percentiles(per_user).to_dict(),
        "slo": slo.to_dict() if slo else None,
        "good": good,
        "goodput": rate(good) if good is not None else None,
        "goodput_fraction": (good / len(recs)) if good is not None and recs else None,
        "client": client,
        "client_bottleneck": client_bottleneck(client),
        # What the level's requests cost (failed ones' billed tokens too; telemetry.cost): a sum of the
        # priced ones, with how many were not priced.
        "cost_usd": sum_costs(r.cost for r in recs).to_dict(),
        "server": _server_summary(ok),
        "wait_ms": split_summary(ok),  # telemetry.wire: the wait's parts per request, summarised
        "ttft_split": ttft_split(ok),  # queue / prefill / rest shares of TTFT, by the server's own figures
    }
    if (agent := agent_figures(recs)) is not None:  # tool-using turns (--tool-latency, --mcp)
        out["agent"] = agent
    out.update(workload_figures(reqs, ok))  # lengths, prefix cache, by turn, arrivals: where the level has them
    if probes or probe_rate:
        tagged = next((t.bench.probe_rate for t in probes if t.bench.probe_rate), None)
        users = len({(t.bench.run_id, t.bench.worker) for t in probes}) or 1
        out["probe"] = probe_figures([t.record for t in probes], probe_rate or tagged, users)
    out["vllm"] = vllm_summary(out, mode=mode, level=level)
    return out


# A token stands for at least one byte of its text; a server may count a few beyond the text it streams
# (an end-of-sequence token, a template's), allowed for here.
UNSTREAMED_TOKENS = 8


def token_note(ok: Sequence[TurnRecord]) -> str | None:
    """Why the level's tokens/s cannot be taken at face value, or None: counts estimated from characters
    (the server sent no usage), or a server's usage claiming more output tokens than the text it streamed
    could hold (reasoning it counted but did not stream aside). A throughput is never printed on such
    counts without this sentence beside it."""
    estimated = sum(1 for r in ok if r.tokens.source == "estimated")
    beyond = [
        r
        for r in ok
        if r.tokens.source == "usage"
        and (r.tokens.output or 0) - (r.tokens.reasoning or 0) > _streamed_bytes(r) + UNSTREAMED_TOKENS
    ]
    notes = []
    if beyond:
        r = beyond[0]
        notes.append(
            f"the server's usage claims more output tokens than its text holds on {len(beyond)} of {len(ok)} "
            f"requests (e.g. {r.tokens.output:,} tokens for {_streamed_bytes(r):,} bytes streamed): the tokens/s "
            "rest on its counts, not on what arrived"
        )
    if estimated:
        notes.append(
            f"{estimated} of {len(ok)} requests' tokens are estimated (the server sent no usage; 4 characters a "
            "token): the tokens/s rest on the estimate"
        )
    return "; ".join(notes) or None


def _streamed_bytes(r: TurnRecord) -> int:
    return len(r.answer.encode()) + len(r.reasoning.encode()) + sum(len(c.get("arguments", "")) for c in r.tool_calls)


def split_summary(records: Sequence[TurnRecord]) -> dict[str, Any] | None:
    """Per-level wait parts of completed requests: p50/p90/p99 of each key and of the network and
    server parts, and how many records had a split; None when none had one.

    Under load, a ``server`` part growing from level to level is the server's queue; a
    ``pool`` part growing is this client's own connection limit.
    """
    splits: list[WaitSplit] = [w for r in records if (w := r.metrics.wait_ms) is not None]
    if not splits:
        return None

    def pct(values: list[float]) -> dict[str, float | None]:
        p = percentiles(values)
        return {"p50": p.p50, "p90": p.p90, "p99": p.p99}

    out: dict[str, Any] = {"requests": len(splits)}
    for key in WAIT_KEYS:
        out[key] = pct([getattr(w, key) for w in splits])
    out["network"] = pct([w.network_ms for w in splits])
    out["server_part"] = pct([w.server_ms for w in splits])
    return out


def _error_counts(recs: Iterable[TurnRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in recs:
        if r.status == "ok":
            continue
        kind = (r.error.type if r.error else None) or r.status or "error"
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _server_summary(ok: Sequence[TurnRecord]) -> dict[str, Any] | None:
    """The server's own per-request timings (``telemetry.server.timings``), kept apart from the
    client's: prefill ms, and decode ms per token over answers of more than one token (under
    llama-server's names, which older summaries used)."""
    prompt_ms: list[float] = []
    per_token_ms: list[float] = []
    for r in ok:
        if not r.server:
            continue
        for st in server_timings(r.server):
            if st.prefill_ms is not None:
                prompt_ms.append(st.prefill_ms)
            n, t = st.decode_tokens, st.decode_ms
            if n and t is not None and n > 1:
                per_token_ms.append(t / n)
    if not prompt_ms and not per_token_ms:
        return None
    return {
        "prompt_ms": percentiles(prompt_ms).to_dict(),
        "predicted_ms_per_token": percentiles(per_token_ms).to_dict(),
    }


VLLM_METRICS = (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2el", "e2e_ms"))


def vllm_summary(agg: dict[str, Any], *, mode: str, level: float | None) -> dict[str, Any]:
    """The level under vLLM ``bench serve`` result names, so existing tooling reads it."""
    dur = agg["duration_s"]
    s: dict[str, Any] = {
        "duration": dur,
        "completed": agg["completed"],
        "failed": agg["failed"],
        "total_input_tokens": agg["total_input_tokens"],
        "total_output_tokens": agg["total_output_tokens"],
        "request_throughput": agg["request_throughput"],
        "output_throughput": agg["output_throughput"],
        "total_token_throughput": ((agg["total_input_tokens"] + agg["total_output_tokens"]) / dur if dur > 0 else None),
        "max_concurrency": int(level) if mode == "concurrency" and level is not None else None,
        # as vLLM writes an unbounded rate; a trace's rate is its own (none is offered by the bench)
        "request_rate": level if mode == "rate" else None if mode == "trace" else "inf",
    }
    if agg.get("goodput") is not None:
        s["request_goodput"] = agg["goodput"]
    for short, key in VLLM_METRICS:
        p = agg[key]
        s[f"mean_{short}_ms"] = p["mean"]
        s[f"median_{short}_ms"] = p["p50"]
        s[f"std_{short}_ms"] = p["std"]
        s[f"p90_{short}_ms"] = p["p90"]
        s[f"p99_{short}_ms"] = p["p99"]
    return s
