"""The live telemetry pane: what is happening now, the last turn's figures, timelines, history.

Everything shown comes from a recorder ``Snapshot``, a typed ``TurnRecord`` (a compat server's own queue
and KV use as the request left among its server figures), the render-lag summary or
``telemetry.diagnosis``: the pane formats, it never computes a metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Sparkline, Static

from ...backends.attachments import fmt_size
from ...telemetry.cost import fmt_usd
from ...telemetry.duration import DASH, fmt_ms
from ...telemetry.log.secrets import mask
from ...telemetry.metrics import OWN_DELAY_SHOWN_MS, TurnMetrics
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import Snapshot
from ...telemetry.server.gauges import turn_gauges
from ...telemetry.server.prompt_share import attachment_cost
from ...telemetry.server.timings import ServerTimings, load_import_ms, server_timings
from ...telemetry.steps import RUNNING, ApprovalStepRecord, ModelStepRecord, StepRecord, ToolStepRecord, step_count
from ...telemetry.view.timeline import Timeline
from ...telemetry.wire import LIVE_LABEL, LLAMA_SERVER, PROBE, HttpInfo, WaitSplit
from ..format import PHASE_COLOR, fmt_num, short_model, short_spec, turn_label
from ..terminal import visible_text
from .branches import BranchView
from .history import HistoryPanel
from .timeline import TimelineView

LABEL_W = 15
HEADER_MODEL_W = 40  # the turn header's provider · model: one line of the 64-column pane
ATTACHMENT_NAME_W = 24  # one attachment's name in the "attached" row
LIVE_ROOM = 9  # the lines of a streaming turn's live block (phase, elapsed, TTFT, TTFVT, TPOT, speed, lag, ...)


def _row(t: Text, label: str, value: str | Text, style: str = "") -> None:
    # at least one space: a label as long as the column must not run into its value
    t.append(f"{label:<{LABEL_W}} " if len(label) >= LABEL_W else f"{label:<{LABEL_W}}", style="dim")
    t.append(value if isinstance(value, Text) else Text(value, style=style))
    t.append("\n")


def live_text(
    snap: Snapshot,
    attempts: Sequence[Any] = (),
    lag: dict[str, Any] | None = None,
    steps: Sequence[StepRecord] = (),
) -> Text:
    """The lines describing a turn in flight (``steps``: a tool-using turn's so far; the figures below
    them are its current model step's)."""
    t = Text()
    if steps:  # where the loop is: the step running now, numbered as the rows and the record's step_count count
        last = steps[-1]
        if isinstance(last, ApprovalStepRecord) and last.answer is None:
            t.append(" APPROVAL ", style="bold reverse yellow")
            t.append(f"  {_now_doing(last)}\n", style="bold")
            return t  # likewise while the person is asked
        t.append(f" STEP {step_count(steps)} ", style="bold reverse blue")
        t.append(f"  {_now_doing(last)}\n", style="bold")
        if isinstance(last, ToolStepRecord) and last.status == RUNNING:
            return t  # the model step before the call has ended: its phase and speed are not what happens now
    color = PHASE_COLOR.get(snap.phase, "")
    t.append(f" {snap.phase.upper()} ", style=f"bold reverse {color}")
    t.append("  ")
    if snap.phase == "starting":
        t.append(f"sending the request {fmt_ms(snap.phase_elapsed_ms)}", style="bold")
    elif snap.phase == "loading":
        t.append(f"loading model {fmt_ms(snap.load_ms)}", style="bold")
    elif snap.phase == "queued":
        t.append(f"queued {fmt_ms(snap.phase_elapsed_ms)}", style="bold")
    elif snap.phase == "waiting":
        if snap.wait_phase in LIVE_LABEL:  # where on the wire the wait is now
            t.append(f"{LIVE_LABEL[snap.wait_phase]} {fmt_ms(snap.wait_phase_ms)}", style="bold")
        else:
            t.append(f"waiting for the first token {fmt_ms(snap.phase_elapsed_ms)}", style="bold")
        if snap.attempt > 1:
            prev = attempts[-2].status if len(attempts) >= 2 else None
            why = f"a {prev}" if prev else "an error"
            t.append(f"\nattempt {snap.attempt} after {why}, waited {fmt_ms(snap.retry_ms)}", style="red")
    elif snap.phase == "reasoning":
        t.append(f"thinking {fmt_ms(snap.phase_elapsed_ms)} · {snap.reasoning_tokens} tokens", style="bold")
    elif snap.phase == "streaming":
        t.append(f"streaming {snap.visible_tokens} tokens", style="bold")
    t.append("\n")
    if snap.load_ms is not None and snap.phase != "loading":
        _row(t, "model load", fmt_ms(snap.load_ms))
    _own_row(t, snap.own_delay_ms)
    _row(t, "elapsed", fmt_ms(snap.elapsed_ms))
    if snap.ttft_ms is not None:
        _row(t, "TTFT", fmt_ms(snap.ttft_ms))
    if snap.ttfvt_ms is not None:
        _row(t, "TTFVT", fmt_ms(snap.ttfvt_ms))
    if snap.reasoning_tokens and snap.phase != "reasoning":
        _row(t, "reasoning", f"{snap.reasoning_tokens} tokens")
    if snap.chunk_count > 1:
        _row(
            t,
            "TPOT",
            f"{fmt_ms(snap.current_tpot_ms, digits=1)} now · {fmt_ms(snap.avg_tpot_ms, digits=1)} avg",
        )
        _row(t, "speed", fmt_num(snap.tokens_per_s, "tokens/s", 1))
    _draft_row(t, snap.draft)
    if lag and lag.get("paints"):
        _row(t, "render lag", f"p50 {fmt_ms(lag['p50_ms'])} · p95 {fmt_ms(lag['p95_ms'])}")
    return t


def _own_row(t: Text, own_ms: float | None) -> None:
    """ttft's own delay (submit -> send), once it is large enough to feel; never part of TTFT."""
    if own_ms is not None and own_ms >= OWN_DELAY_SHOWN_MS:
        _row(t, "ttft's own", f"{fmt_ms(own_ms)} before the send")


def _draft_row(t: Text, d: dict[str, Any] | None) -> None:
    """Speculative decoding (``telemetry.metrics.speculative_summary``), live or for the whole turn."""
    if d:
        per_step = f" · {d['tokens_per_step']:.1f} tok/step" if d.get("tokens_per_step") else ""
        _row(t, "draft", f"{d['acceptance_rate']:.0%} accepted ({d['accepted']}/{d['drafted']}){per_step}")


def _server_lines(t: Text, timings: Sequence[ServerTimings]) -> None:
    """Each server's own prefill/decode split (``telemetry.server.timings``), as it reported it."""
    for st in timings:
        if st.other:
            _row(t, st.source, ", ".join(f"{k} {v}" for k, v in st.other))
            continue
        reused = (
            f", {fmt_num(st.cache_reused_tokens)} reused from cache" if st.is_engine and st.cache_reused_tokens else ""
        )
        pre_rate = f" ({fmt_num(st.prefill_tokens_per_s, 'tok/s')})" if st.prefill_tokens_per_s is not None else ""
        dec_rate = f" ({fmt_num(st.decode_tokens_per_s, 'tok/s', 1)})" if st.decode_tokens_per_s is not None else ""
        prefill = f"{fmt_num(st.prefill_tokens)} tok in {fmt_ms(st.prefill_ms)}{pre_rate}{reused}"
        _row(t, f"{st.label} prefill", prefill)
        _row(t, f"{st.label} decode", f"{fmt_num(st.decode_tokens)} tok in {fmt_ms(st.decode_ms)}{dec_rate}")
        if not st.is_engine and st.cache_reused_tokens is not None:
            _row(t, "KV cache reuse", f"{fmt_num(st.cache_reused_tokens)} prompt tokens from cache")
        if st.load_ms:
            _row(t, f"{st.label} load", fmt_ms(st.load_ms))
        if st.kv_used_tokens is not None:
            size = f" = {st.kv_used_bytes / 2**20:.1f} MiB" if st.kv_used_bytes else ""
            _row(t, "KV cache", f"{fmt_num(st.kv_used_tokens)} tokens{size} of n_ctx {fmt_num(st.n_ctx)}")
        if st.draft_refused:
            _row(t, "draft", "off: batches are not bit-identical to one-token steps here", "dim")
        if st.engine:
            _row(t, "engine", st.engine)
        if st.placement:
            _row(t, "runs on", st.placement)


def _wait_rows(t: Text, wait: WaitSplit | None, http: HttpInfo | None) -> None:
    """The wait's split (``metrics.wait_ms``) and the response's facts (``http``): what a ticket quotes."""
    if wait is not None and (wait.network_ms > 0 or http is not None):
        pool = f" · pool {fmt_ms(wait.pool)}" if wait.pool >= 1 else ""  # earlier attempts: the retries row
        _row(t, "  wait", f"server {fmt_ms(wait.server)} · first token {fmt_ms(wait.first_token)}{pool}")
        parts = [(name, v) for name, v in (("dns", wait.dns), ("connect", wait.connect), ("TLS", wait.tls)) if v > 0]
        parts.append(("send", wait.send))
        _row(t, "  network", f"{fmt_ms(wait.network_ms)}: " + ", ".join(f"{n} {fmt_ms(v)}" for n, v in parts))
        conn = " · ".join(x for x in (http.connection, http.http_version) if x) if http else ""
        if conn:
            _row(t, "  connection", conn)
    if http is None:
        return
    if http.server_processing_ms is not None:
        _row(t, "  server says", f"{fmt_ms(http.server_processing_ms)} processing")
    if http.request_id:
        _row(t, "request id", http.request_id)
    rl = http.ratelimit
    if rl is not None:
        left = [
            f"{fmt_num(n)} {what}"
            for n, what in ((rl.remaining_requests, "requests"), (rl.remaining_tokens, "tokens"))
            if n is not None
        ]
        if left:
            _row(t, "rate limit", " · ".join(left) + " left")


def _server_split_row(t: Text, m: TurnMetrics) -> None:
    """The wait by the server's own account (``metrics.server_*``, ``server_timing_source`` says whose)."""
    source = m.server_timing_source
    rest = f" · rest {fmt_ms(m.server_rest_ms)}" if m.server_rest_ms is not None else ""
    if source == PROBE and m.server_ttft_ms is not None and m.server_queue_ms is not None:  # a saved ttft probe
        _row(
            t, "  server part", f"prefill {fmt_ms(m.server_ttft_ms)} expected · queue {fmt_ms(m.server_queue_ms)}{rest}"
        )
    elif source == LLAMA_SERVER:
        _row(t, "  server says", f"prompt {fmt_ms(m.server_ttft_ms)}{rest} (llama-server: no queue figure)")
    elif source is not None:
        _row(
            t,
            "  server says",
            f"queue {fmt_ms(m.server_queue_ms)} · prefill {fmt_ms(m.server_ttft_ms)}{rest} ({source})",
        )


def _attachment_rows(t: Text, rec: TurnRecord, timings: Sequence[ServerTimings]) -> None:
    """The files sent with the prompt and what they cost the turn (``telemetry.server.prompt_share``): the
    input tokens they added and, where the server or engine reported its prefill, that part of it."""
    if not rec.attachments:
        return
    _row(
        t,
        "attached",
        " · ".join(f"{short_model(a.name, ATTACHMENT_NAME_W)} {fmt_size(a.bytes)}" for a in rec.attachments),
    )
    cost = attachment_cost(rec.attachments, rec.tokens.input, timings)
    if cost is None or cost.tokens is None:
        return
    added = f"~{fmt_num(cost.tokens)} input tokens"
    if cost.share is not None:
        added += f" ({cost.share:.0%} of the input)"
    if cost.prefill_ms is not None:
        added += f" · ~{fmt_ms(cost.prefill_ms)} of the {cost.prefill_source} prefill"
    _row(t, "  they added", added)


def _cost_rows(t: Text, rec: TurnRecord) -> None:
    """The turn's price (``telemetry.cost``), when it has one: a turn not priced shows no figure."""
    c = rec.cost
    if c is None:
        return
    _row(t, "cost", f"{fmt_usd(c.total_usd, 3)} · in {fmt_usd(c.input_usd, 3)} · out {fmt_usd(c.output_usd, 3)}")
    _row(t, "  priced as", f"{c.priced_as} ({c.source})", "dim")


STEP_ROWS = 12  # a long loop's first steps shown one a row; the rest counted


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _step_value(st: StepRecord) -> tuple[str, str]:
    """One step of a tool-using turn as a row: its label and what it took, from the record's step."""
    took = fmt_ms(st.duration_ms)
    match st:
        case ModelStepRecord():
            calls = st.tool_calls
            asked = f" · {calls} call{'s' * (calls != 1)}" if calls else ""
            end = f" · {st.status}" if st.status != "ok" else ""
            return "model", f"{took} · TTFT {fmt_ms(st.ttft_ms)}{asked}{end}"
        case ToolStepRecord():
            shown = f" · {fmt_size(st.result_bytes)}" if st.status in ("ok", "error") else ""
            cut = " (cut)" if st.truncated else ""
            return "tool", f"{st.name or '?'} · {took} · {st.status or '?'}{shown}{cut}"
        case ApprovalStepRecord():
            return "asked", f"{st.name or '?'} · {took} · {st.answer or 'asking'}"


def _now_doing(st: StepRecord) -> str:
    label, value = _step_value(st)
    if isinstance(st, ApprovalStepRecord) and st.answer is None:
        return f"waiting for your approval of {st.name or '?'} ({fmt_ms(st.duration_ms)})"
    if isinstance(st, ToolStepRecord) and st.status == RUNNING:
        return f"running tool {st.name or '?'} ({fmt_ms(st.duration_ms)})"
    return f"{label}: {value}"


def steps_rows(t: Text, steps: Sequence[StepRecord]) -> None:
    """Each step of a tool-using turn as a row (the first ``STEP_ROWS``; the rest counted), numbered as
    ``step_count`` counts, so the last number is the count above them; a wait for approval is an unnumbered row."""
    n = 0
    for st in steps[:STEP_ROWS]:
        label, value = _step_value(st)
        if isinstance(st, ApprovalStepRecord):
            _row(t, f"    {label}"[:LABEL_W], value, "dim")
            continue
        n += 1
        _row(t, f"  {n} {label}"[:LABEL_W], value)
    rest = step_count(steps[STEP_ROWS:])
    if rest:
        _row(t, "", f"… {rest} more step{'s' * (rest != 1)}", "dim")


def _agent_rows(t: Text, rec: TurnRecord) -> None:
    """A tool-using turn's split and its steps, as the record has them."""
    a = rec.agent
    if a is None:
        return
    # a proxied app's session (ttft proxy): the time between its calls is the app's own, ttft did none of it
    whose, between = a.between_steps
    split = (
        f"{a.step_count} · model {fmt_ms(a.time_in_model_ms)} · tools {fmt_ms(a.time_in_tools_ms)}"
        f" · {whose} {fmt_ms(between, digits=1)}"
    )
    _row(t, "steps", split)
    if a.time_in_approval_ms is not None:
        _row(t, "  your approval", f"{fmt_ms(a.time_in_approval_ms)} ({a.approval_steps} asked)")
    steps_rows(t, rec.steps)


def record_text(rec: TurnRecord, lag: dict[str, Any] | None = None) -> Text:
    """A finished turn's figures, in the order the reference defines them."""
    m, tok, status = rec.metrics, rec.tokens, rec.status
    t = Text()
    t.append(f" {status.upper()} ", style=f"bold reverse {PHASE_COLOR.get(status, '')}")
    who = short_spec(rec.provider, rec.model, HEADER_MODEL_W, sep=" · ")
    t.append(f"  {turn_label(rec.turn_index, 'turn ')} · {who}\n", style="bold")
    _row(t, "TTFT", fmt_ms(m.ttft_ms))
    _wait_rows(t, m.wait_ms, rec.http)
    _server_split_row(t, m)
    if (g := turn_gauges(rec.server)) is not None:  # the server's own /metrics as the request left
        _row(t, "  server queue", g.describe() + (f" ({g.server})" if g.server else ""))
    _row(t, "TTFVT", fmt_ms(m.ttfvt_ms))
    if m.reasoning_delay_ms is not None:
        est = " (estimated)" if m.reasoning_delay_estimated else ""
        _row(t, "reasoning delay", fmt_ms(m.reasoning_delay_ms) + est)
    if m.server_reasoning_ttft_ms is not None or m.server_content_ttft_ms is not None:  # vLLM's own, to check it
        _row(
            t,
            "  server says",
            f"reasoning from {fmt_ms(m.server_reasoning_ttft_ms)}, answer from {fmt_ms(m.server_content_ttft_ms)}"
            " after scheduling",
        )
    speed = f" ({fmt_num(m.decode_tokens_per_s, 'tokens/s', 1)})" if m.decode_tokens_per_s else ""
    _row(t, "TPOT", fmt_ms(m.tpot_ms, digits=1) + speed if m.tpot_ms is not None else DASH)
    itl = m.itl_ms
    if itl.p50 is not None:
        _row(t, "ITL p50/95/99", " / ".join(fmt_ms(v, digits=1) for v in (itl.p50, itl.p95, itl.p99)))
    _row(t, "E2E", fmt_ms(m.e2e_ms) + (f" (stream end {fmt_ms(m.total_ms)})" if m.total_ms else ""))
    _agent_rows(t, rec)
    if m.retry_ms:
        _row(t, "retries", f"{max(len(rec.attempts), 1) - 1} ({fmt_ms(m.retry_ms)} lost)", "red")
    if m.queue_ms:
        _row(t, "queued", fmt_ms(m.queue_ms))
    if m.load_ms:
        imported = load_import_ms(rec.server)  # a GPU build starts its runtime on import: the load's time
        shown = imported is not None and imported >= OWN_DELAY_SHOWN_MS
        _row(t, "model load", fmt_ms(m.load_ms) + (f" (llama.cpp import {fmt_ms(imported)})" if shown else ""))
    _own_row(t, m.own_delay_ms)
    cached = f" (cached {tok.cached_input})" if tok.cached_input else ""
    if tok.cache_write_input:
        cached += f" (written to cache {tok.cache_write_input})"
    _row(
        t,
        "tokens",
        f"in {fmt_num(tok.input)}{cached} · reasoning {fmt_num(tok.reasoning)}"
        f" · out {fmt_num(tok.output)} [{tok.source or '?'}]",
    )
    timings = server_timings(rec.server)
    _attachment_rows(t, rec, timings)
    _cost_rows(t, rec)
    _server_lines(t, timings)
    _draft_row(t, m.speculative)  # an old record's: recovered from its server data by from_dict
    if lag and lag.get("paints"):
        _row(t, "render lag", f"p50 {fmt_ms(lag['p50_ms'])} · p95 {fmt_ms(lag['p95_ms'])}")
    if rec.diagnosis:
        t.append(rec.diagnosis, style="italic")
    return t


class TelemetryPane(VerticalScroll):
    """One pane per conversation (the chat has one; compare gives each model its own)."""

    DEFAULT_CSS = """
    TelemetryPane #live-gaps { height: 2; margin: 0 0 1 0; }
    TelemetryPane .pane-title { text-style: bold; color: $text-muted; margin: 1 0 0 0; }
    TelemetryPane .pane-title.-empty { display: none; }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text("Send a prompt: its latency appears here.", style="dim"), id="live")
        yield Sparkline([], id="live-gaps")
        yield Static("Timeline", classes="pane-title")
        yield TimelineView(id="timeline")
        yield Static("Branches", classes="pane-title -empty", id="branches-title")
        yield BranchView(id="branches")
        yield Static("History", classes="pane-title")
        yield HistoryPanel(id="history")

    def on_mount(self) -> None:
        self._live_lines = -1
        self._live_room = 0  # lines the live block keeps while a turn is in flight (it never shrinks then)
        self.query_one("#live-gaps").display = False

    def show_live(
        self,
        snap: Snapshot,
        attempts: Sequence[Any] = (),
        lag: dict[str, Any] | None = None,
        steps: Sequence[StepRecord] = (),
        *,
        graphs: bool = True,
    ) -> None:
        """A turn in flight. Its block only grows, and starts with the room a streaming turn takes, and the
        gaps' sparkline keeps its place from the first frame: a layout pass of the whole screen each time a
        row appeared cost more than all the repaints of the turn's figures. Without ``graphs`` the
        sparkline keeps what it shows (the caller redraws it less often than the figures)."""
        text = live_text(snap, attempts, lag, steps)
        lines = text.plain.count("\n")
        self._live_room = max(self._live_room, lines, LIVE_ROOM)
        text.append("\n" * (self._live_room - lines))
        self._set_live(text)
        spark = self.query_one("#live-gaps", Sparkline)
        spark.display = True
        if graphs:
            data = list(snap.recent_gaps_ms)
            if data != spark.data:
                spark.data = data

    def _set_live(self, text: Text) -> None:
        text = visible_text(text)  # model names, server figures, quoted errors: shown, never run
        # A layout pass costs far more than a repaint: only when the line count changes.
        lines = text.plain.count("\n")
        self.query_one("#live", Static).update(text, layout=lines != self._live_lines)
        self._live_lines = lines

    def show_record(self, rec: TurnRecord, lag: dict[str, Any] | None = None) -> None:
        self._live_room = 0
        self._set_live(record_text(rec, lag))
        self.query_one("#live-gaps", Sparkline).display = False

    def show_message(self, text: str) -> None:
        self._live_room = 0
        self._set_live(Text(mask(text), style="dim"))  # e.g. why a backend could not start: an error's words
        self.query_one("#live-gaps", Sparkline).display = False

    def set_timelines(self, rows: Sequence[tuple[str, Timeline]]) -> None:
        self.query_one(TimelineView).set_rows(rows)

    def set_branches(self, old: Sequence[TurnRecord], new: Sequence[TurnRecord]) -> None:
        """The two branches at an edited prompt side by side (none: the section is hidden)."""
        self.query_one(BranchView).show(old, new)
        self.query_one("#branches-title").set_class(not old or not new, "-empty")

    def set_history(self, records: Sequence[TurnRecord]) -> None:
        self.query_one(HistoryPanel).set_records(records)
