"""What ``ttft proxy`` prints: the lines to set, one line per call as it ends, and the run's summary (with
``--otlp``, what the app's own telemetry held).

Every field that came from outside (a model name, an error's words, a session's summary) is masked and
has its control characters made visible before it reaches a terminal (``tui.proxy.cells``, which the
live view shares).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from datetime import datetime

from ....backends.proxy.run import ProxyRun
from ....backends.proxy.server import ProxiedCall
from ....telemetry.cost import fmt_usd
from ....telemetry.duration import DASH, fmt_ms
from ....telemetry.proxy.sessions import ProxySession
from ....telemetry.proxy.summary import summarize
from ...proxy.cells import CLIENT_WIDTH, MODEL_WIDTH, cut, shown, status_text, tokens_text


def note(text: str) -> None:
    """A note or an error on stderr, ``ttft proxy: ...``, fit for a terminal."""
    print(shown(f"ttft proxy: {text}"), file=sys.stderr, flush=True)


def print_out(line: str) -> bool:
    """``line`` on stdout, at once; False once its reader has gone (``ttft proxy | head -3``): stdout is
    then pointed at the null device, so the calls still pass and are logged, and the exit's flush is quiet."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return False
    return True


def export_lines(env: dict[str, str]) -> list[str]:
    """``export NAME=VALUE`` per variable, quoted for a POSIX shell (``eval "$(ttft proxy --print-env)"``)."""
    return [f"export {name}={shlex.quote(value)}" for name, value in sorted(env.items())]


def call_line(call: ProxiedCall, when: datetime | None = None) -> str:
    """One call as it ends (``when``, now unless given: a watch gives the time it ended): when, client,
    model, status, TTFT, TPOT, tokens, cache share and cost."""
    rec, m = call.record, call.record.metrics
    client = cut(call.shape.client or "-", CLIENT_WIDTH)
    model = cut(rec.model or call.shape.model or "-", MODEL_WIDTH)
    cost = fmt_usd(rec.cost.total_usd) if rec.cost is not None else DASH
    line = (
        f"{(when or datetime.now()).strftime('%H:%M:%S')}  {client:<{CLIENT_WIDTH}}  {model:<{MODEL_WIDTH}}  "
        f"{status_text(call):<4}  TTFT {fmt_ms(m.ttft_ms, digits=None):>8}  TPOT {fmt_ms(m.tpot_ms, digits=None):>8}  "
        f"{tokens_text(rec)}  {cost}"
    )
    return shown(line)


def summary_lines(calls: Sequence[ProxiedCall], sessions: Sequence[ProxySession]) -> list[str]:
    """The run in a few lines (its figures: :func:`telemetry.proxy.summary.summarize`): calls by client and
    model, TTFT and TPOT p50, tokens with the cache's share, cost, errors and retries, then each rebuilt
    session's own line."""
    if not calls:
        return ["ttft proxy: no LLM calls came through"]
    f = summarize([(c.record, c.shape) for c in calls])
    who = ", ".join(f"{client} {model} ×{n}" for client, model, n in f.by_client_model)
    out = [f"ttft proxy: {f.calls} call{'s' if f.calls != 1 else ''}: {who}"]
    inp, cached = f.input_tokens, f.cached_input_tokens
    share = f" ({cached / inp:.0%} read from cache)" if inp and cached else ""
    figures = f"  TTFT p50 {fmt_ms(f.ttft_p50_ms, digits=None)} · TPOT p50 {fmt_ms(f.tpot_p50_ms, digits=None)}"
    figures += f" · tokens in {inp:,}{share}, out {f.output_tokens:,}"
    if f.cost_usd is not None:
        figures += f" · cost {fmt_usd(f.cost_usd)}" + (f" ({f.unpriced} not priced)" if f.unpriced else "")
    out.append(figures)
    if f.failed or f.retries:
        errors = ", ".join(f"{'' if code is None else f'{code} '}{kind} ×{k}" for code, kind, k in f.failed) or "none"
        out.append(f"  errors: {errors} · retries: {f.retries}")
    for s in sessions:
        out.append(f"  session {cut(s.client or '-', CLIENT_WIDTH)}: {s.summary}")
    return [shown(line) for line in out]


def app_telemetry_line(result: ProxyRun) -> str | None:
    """With ``--otlp``: what came from the app's own telemetry and how many tool steps it timed, or what
    to set where nothing came (None without ``--otlp``)."""
    got = result.otlp
    if got is None:
        return None
    if not got.requests and not got.refused:
        line = (
            f"ttft proxy: --otlp: nothing came to {result.otlp_endpoint} (Claude Code sends its tool events "
            "with CLAUDE_CODE_ENABLE_TELEMETRY=1 and OTEL_LOGS_EXPORTER=otlp; see docs/proxy.md)"
        )
        return shown(line)
    n, k = got.tool_spans, got.requests
    line = f"  app telemetry: {n} tool span{'' if n == 1 else 's'} in {k} export{'' if k == 1 else 's'}"
    line += f", {result.timed_by_app} timing a tool step"
    if got.refused:
        line += f" · {got.refused} refused"
    if got.dropped:
        line += f" · {got.dropped} past the limit, not kept"
    return shown(line)
