"""One proxied call in words: its status, its tokens and the cells of its row, as the line-per-call
output and the live view both show them.

Every field that came from outside (a model name, an error's words, a client) is masked and has its
control characters made visible before it reaches a terminal; the client is the User-Agent's first
product, token characters only (``backends.proxy.routing.client_name``).
"""

from __future__ import annotations

from ...backends.proxy.server import ProxiedCall
from ...telemetry.cost import fmt_usd
from ...telemetry.duration import DASH, fmt_ms
from ...telemetry.log.secrets import mask
from ...telemetry.proxy.summary import cache_share
from ...telemetry.record import TurnRecord
from ..format import fmt_num, visible_controls

CLIENT_WIDTH, MODEL_WIDTH = 22, 26


def shown(text: str) -> str:
    """Text from outside, fit for a terminal: secrets masked, control characters visible."""
    return visible_controls(mask(text))


def cut(text: str, width: int) -> str:
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


def tokens_text(rec: TurnRecord) -> str:
    t = rec.tokens
    share = cache_share(t)
    cached = f" ({share:.0%} cached)" if share else ""
    return f"in {fmt_num(t.input)}{cached} out {fmt_num(t.output)}"


def client_of(call: ProxiedCall) -> str:
    return call.shape.client or "-"


def model_of(call: ProxiedCall) -> str:
    return call.record.model or call.shape.model or "-"


def row_cells(call: ProxiedCall, when: str) -> tuple[str, ...]:
    """The live view's row: when, client, model, status, TTFT, TPOT, tokens in and out, cache share, cost."""
    rec, m = call.record, call.record.metrics
    share = cache_share(rec.tokens)
    # only the client, the model and the error's kind came from outside: the rest are ttft's own figures
    # (masking costs ~25 µs a cell, and a new filter can make 2,000 rows at once)
    return (
        when,
        shown(cut(client_of(call), CLIENT_WIDTH)),
        shown(cut(model_of(call), MODEL_WIDTH)),
        shown(status_text(call)),
        fmt_ms(m.ttft_ms, digits=None),
        fmt_ms(m.tpot_ms, digits=None),
        f"{fmt_num(rec.tokens.input)} → {fmt_num(rec.tokens.output)}",
        f"{share:.0%}" if share is not None else DASH,
        fmt_usd(rec.cost.total_usd) if rec.cost is not None else DASH,
    )
