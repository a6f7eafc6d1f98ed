"""What ``ttft proxy`` prints: the lines to set, one line per call as it ends, and the run's summary.

Every field that came from outside (a model name, an error's words, a session's summary) is masked and
has its control characters made visible before it reaches a terminal; the client is the User-Agent's
first product, token characters only (``backends.proxy.routing.client_name``).
"""

from __future__ import annotations

import shlex
import statistics
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from backends.proxy.server import ProxiedCall
from telemetry.cost import fmt_usd
from telemetry.duration import DASH, fmt_ms
from telemetry.log.secrets import mask
from telemetry.proxy.sessions import ProxySession
from telemetry.record import TurnRecord
from tui.format import fmt_num, visible_controls

CLIENT_WIDTH, MODEL_WIDTH = 22, 26


def shown(text: str) -> str:
    """Text from outside, fit for a terminal: secrets masked, control characters visible."""
    return visible_controls(mask(text))


def export_lines(env: dict[str, str]) -> list[str]:
    """``export NAME=VALUE`` per variable, quoted for a POSIX shell (``eval "$(ttft proxy --print-env)"``)."""
    return [f"export {name}={shlex.quote(value)}" for name, value in sorted(env.items())]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def status_text(call: ProxiedCall) -> str:
    """The upstream's HTTP status, and the error's kind when the call failed (the kind alone when no answer
    came: ``connection_refused``)."""
    rec = call.record
    code = str(call.shape.status) if call.shape.status is not None else ""
    if rec.status == "ok":
        return code or "-"
    kind = str(rec.error.type) if rec.error is not None else rec.status
    return f"{code} {kind}".strip()


def cache_share(rec: TurnRecord) -> float | None:
    """The share of the call's input read from the provider's prompt cache; None when not said."""
    t = rec.tokens
    if not t.input or t.cached_input is None:
        return None
    return t.cached_input / t.input


def tokens_text(rec: TurnRecord) -> str:
    t = rec.tokens
    share = cache_share(rec)
    cached = f" ({share:.0%} cached)" if share else ""
    return f"in {fmt_num(t.input)}{cached} out {fmt_num(t.output)}"


def call_line(call: ProxiedCall) -> str:
    """One call as it ends: when, client, model, status, TTFT, TPOT, tokens, cache share and cost."""
    rec, m = call.record, call.record.metrics
    client = _cut(call.shape.client or "-", CLIENT_WIDTH)
    model = _cut(rec.model or call.shape.model or "-", MODEL_WIDTH)
    cost = fmt_usd(rec.cost.total_usd) if rec.cost is not None else DASH
    line = (
        f"{datetime.now().strftime('%H:%M:%S')}  {client:<{CLIENT_WIDTH}}  {model:<{MODEL_WIDTH}}  "
        f"{status_text(call):<4}  TTFT {fmt_ms(m.ttft_ms, digits=None):>8}  TPOT {fmt_ms(m.tpot_ms, digits=None):>8}  "
        f"{tokens_text(rec)}  {cost}"
    )
    return shown(line)


def _p50(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def summary_lines(calls: Sequence[ProxiedCall], sessions: Sequence[ProxySession]) -> list[str]:
    """The run in a few lines: calls by client and model, TTFT and TPOT p50, tokens with the cache's
    share, cost, errors and retries, then each rebuilt session's own line."""
    if not calls:
        return ["ttft proxy: no LLM calls came through"]
    records = [c.record for c in calls]
    by_who = Counter((c.shape.client or "-", c.record.model or c.shape.model or "-") for c in calls)
    who = ", ".join(f"{client} {model} ×{n}" for (client, model), n in by_who.most_common())
    n = len(calls)
    out = [f"ttft proxy: {n} call{'s' if n != 1 else ''}: {who}"]
    ttft = _p50([r.metrics.ttft_ms for r in records])
    tpot = _p50([r.metrics.tpot_ms for r in records])
    inp = sum(r.tokens.input or 0 for r in records)
    cached = sum(r.tokens.cached_input or 0 for r in records)
    outp = sum(r.tokens.output or 0 for r in records)
    share = f" ({cached / inp:.0%} read from cache)" if inp and cached else ""
    figures = f"  TTFT p50 {fmt_ms(ttft, digits=None)} · TPOT p50 {fmt_ms(tpot, digits=None)}"
    figures += f" · tokens in {inp:,}{share}, out {outp:,}"
    priced = [r.cost.total_usd for r in records if r.cost is not None]
    if priced:
        unpriced = n - len(priced)
        figures += f" · cost {fmt_usd(sum(priced))}" + (f" ({unpriced} not priced)" if unpriced else "")
    out.append(figures)
    failed = Counter(status_text(c) for c in calls if c.record.status != "ok")
    retries = sum(c.shape.retry_count > 0 for c in calls)
    if failed or retries:
        errors = ", ".join(f"{what} ×{k}" for what, k in failed.most_common()) or "none"
        out.append(f"  errors: {errors} · retries: {retries}")
    for s in sessions:
        out.append(f"  session {_cut(s.client or '-', CLIENT_WIDTH)}: {s.summary}")
    return [shown(line) for line in out]
