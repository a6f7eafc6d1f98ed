"""Consumes one turn's events; gives a live snapshot at any moment and a record at the end.

``feed`` is cheap and does no I/O, so a backend's consumer can call it on the hot
path; ``snapshot`` is what a UI polls at its own frame rate.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any, Literal

from . import events as ev
from .cost import PriceRef, price_turn
from .diagnosis import diagnose_turn
from .metrics import (
    NS_PER_MS,
    Chunk,
    Percentiles,
    Timestamps,
    TokenCounts,
    TurnMetrics,
    compute,
    draft_stats,
    own_delay_ms,
    speculative_summary,
)
from .record import AttachmentInfo, Attempt, ErrorInfo, Status, TurnRecord
from .settings import TurnSettings
from .tokens import estimate_tokens, tokens_for_chars
from .wire import (
    ENGINE_APIS,
    PROBE,
    HttpInfo,
    ServerSplit,
    WaitModel,
    WaitSplit,
    join_server,
    live_phase,
    server_report,
    split_server_wait,
    split_wait,
)

RECENT_GAPS = 64  # gaps kept for a live sparkline
SPEED_WINDOW_NS = 1_000_000_000  # "current speed" looks at the last second
SERVER_JOIN_NOTICE = "server_timings"  # the record's notice when the server's figures exceed the client's TTFT

# Where a turn is, live: submitted but not yet sent (ttft's own time), queued in the client, a local
# model loading, waiting for the first token, reasoning, streaming the answer; then how it ended.
Phase = Literal["starting", "queued", "loading", "waiting", "reasoning", "streaming", "ok", "error", "cancelled"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    phase: Phase
    elapsed_ms: float  # since the first send (ticks while nothing arrives)
    phase_elapsed_ms: float
    ttft_ms: float | None
    ttfvt_ms: float | None
    attempt: int
    last_status: int | None
    retry_ms: float  # time lost to earlier attempts so far
    reasoning_tokens: int
    visible_tokens: int
    avg_tpot_ms: float | None
    current_tpot_ms: float | None
    tokens_per_s: float | None
    recent_gaps_ms: tuple[float, ...]
    last_chunk_ns: int | None
    chunk_count: int
    load_ms: float | None
    error: ErrorInfo | None = None
    own_delay_ms: float | None = None  # submit -> first send (so far, while not sent), less any model load
    draft: dict[str, Any] | None = None  # speculative decoding so far (metrics.draft_stats), None when none
    # While waiting: the wire phase the current attempt is in (telemetry.wire.PHASES, or "prefill" on a local
    # engine) and for how long so far; None without a wire trace or once the first token is in.
    wait_phase: str | None = None
    wait_phase_ms: float = 0.0
    # The wait split by wire phase so far (to the first token, else to now), as the record will have it.
    wait_ms: WaitSplit | None = None


@dataclass
class TurnRecorder:
    session_id: str
    turn_index: int
    provider: str
    api: str
    model: str
    base_url: str | None
    settings: TurnSettings
    prompt: str
    input_chars: int = 0  # for an input estimate when the server reports no usage
    extra: dict[str, Any] = field(default_factory=dict)
    probe: WaitModel | None = None  # this target's saved probe: splits the server's wait (telemetry.wire)
    attachments: tuple[AttachmentInfo, ...] = ()  # the files sent with the prompt, as the record lists them
    price: PriceRef | None = None  # where this turn's cost comes from (telemetry.cost); None: not priced
    branch_of: int | None = None  # the turn whose prompt this one edits (TurnRecord.branch_of)

    def __post_init__(self) -> None:
        self.wall_offset_ns = ev.wall_offset_ns()  # monotonic stamp + this = wall clock (the record's sent_at)
        wall_ns = ev.now_ns() + self.wall_offset_ns
        self.started_at = datetime.fromtimestamp(wall_ns / 1e9, UTC).isoformat(timespec="milliseconds")
        # Set by backends.finish when the turn has ended: the record as logged and sunk, and why
        # the log write failed, if it did.
        self.delivered: TurnRecord | None = None
        self.log_error: str | None = None
        self.submitted_ns: int | None = None  # the user's submit (ev.Submitted): ttft's own delay starts here
        self.mcp_start_ns: tuple[int, int] | None = None  # ev.McpStarted: the MCP servers' start, not ttft's
        # Set by a front end that watches its event loop (backends.api): the loop's lag while this turn waited.
        self.loop_lag_ms: float | None = None
        self.queued_ns: int | None = None
        self.load_start_ns: int | None = None
        self.load_end_ns: int | None = None
        self.attempts: list[Attempt] = []
        self.wire_steps: list[tuple[str, int]] = []  # the latest attempt's (phase, began_ns)
        self.http: HttpInfo | None = None  # the latest attempt's response facts
        self.chunks: list[Chunk] = []
        # Running token total after each chunk and the first visible chunk's stamp: a snapshot (taken
        # every frame, per pane) costs O(log n) in a long answer, not a pass over every chunk.
        self._cum_tokens: list[int] = []
        self._first_visible_ns: int | None = None
        self._text: list[str] = []
        self._reasoning: list[str] = []
        # Each tool call's name and the pieces of its arguments (joined on reading: no copy per piece)
        self._tool_names: list[str] = []
        self._tool_args: list[list[str]] = []
        self._tool_ids: list[str] = []  # each call's id as the API gave it ("" where none came)
        self._tool_index: int | None = None  # the latest call's index, as the API numbers it
        self.tool_pieces = 0  # tool-call deltas fed so far: a UI redraws the calls when this moves
        self.usage: ev.Usage | None = None
        self.server: dict[str, Any] = {}
        self.draft: dict[str, Any] | None = None  # the latest speculative figures, live
        self.notices: dict[str, Any] = {}
        self.end_ns: int | None = None
        self.status: Status | None = None
        self.error: ErrorInfo | None = None
        self.stop_reason: str | None = None
        self.first_ns: int | None = None  # first event of any kind
        self._reasoning_tokens = 0
        self._visible_tokens = 0
        self._record: TurnRecord | None = None

    # --- feeding -----------------------------------------------------------------
    def _add_chunk(self, c: Chunk) -> None:
        self.chunks.append(c)
        self._cum_tokens.append((self._cum_tokens[-1] if self._cum_tokens else 0) + c.tokens)
        if c.kind != "reasoning" and self._first_visible_ns is None:
            self._first_visible_ns = c.t_ns

    def feed(self, e: ev.Event) -> None:
        if self.end_ns is not None:
            return  # a terminal event closes the turn; late stragglers are ignored
        if self.first_ns is None:
            self.first_ns = e.t_ns
        if type(e) is ev.TextDelta and e.text:  # almost every event: its case below, before the match's walk
            n = e.tokens if e.tokens is not None else estimate_tokens(e.text)
            self._text.append(e.text)
            self._visible_tokens += n
            self._add_chunk(Chunk(e.t_ns, "text", n))
            return
        match e:
            case ev.ReasoningDelta():
                n = e.tokens if e.tokens is not None else estimate_tokens(e.text)
                self._reasoning.append(e.text)
                self._reasoning_tokens += n
                self._add_chunk(Chunk(e.t_ns, "reasoning", n))
            case ev.TextDelta():
                if not e.text:
                    return  # empty content is not a token
                n = e.tokens if e.tokens is not None else estimate_tokens(e.text)
                self._text.append(e.text)
                self._visible_tokens += n
                self._add_chunk(Chunk(e.t_ns, "text", n))
            case ev.ToolCallDelta():
                n = e.tokens if e.tokens is not None else estimate_tokens(e.name + e.arguments)
                self._add_tool(e)
                self._visible_tokens += n
                self._add_chunk(Chunk(e.t_ns, "tool", n))
            case ev.AttemptSent():
                self.attempts.append(Attempt(e.attempt, e.t_ns))
                self.wire_steps = []
                self.http = None
            case ev.WireStep():
                if self.attempts and e.attempt == self.attempts[-1].attempt:
                    self.wire_steps.append((e.phase, e.t_ns))
            case ev.HttpResponse():
                if self.attempts and e.attempt == self.attempts[-1].attempt:
                    self.http = e.info
            case ev.HeadersReceived():
                if self.attempts:
                    a = self.attempts[-1]
                    self.attempts[-1] = Attempt(a.attempt, a.sent_ns, e.t_ns, e.status, e.retry_after_s)
            case ev.Usage():
                self.usage = e
            case ev.ServerTimings():
                self.server[e.source] = {**self.server.get(e.source, {}), **e.data}
                if e.source == "llama-server" and "draft_n" in e.data:  # streamed with timings_per_token
                    self.draft = speculative_summary({e.source: self.server[e.source]})
            case ev.DraftProgress():
                self.draft = draft_stats(e.drafted, e.accepted, e.steps)
            case ev.Notice():
                self.notices[e.key] = e.value
            case ev.Submitted():
                self.submitted_ns = e.t_ns
            case ev.RequestQueued():
                self.queued_ns = e.t_ns
            case ev.McpStarted():
                self.mcp_start_ns = (e.start_ns, e.t_ns)
            case ev.ModelLoadStarted():
                self.load_start_ns = e.t_ns
            case ev.ModelLoadFinished():
                self.load_end_ns = e.t_ns
                if e.info:
                    self.server.setdefault("model", {}).update(e.info)
            case ev.Finished():
                self.stop_reason = e.stop_reason
                self._close(e.t_ns, "ok")
            case ev.Failed():
                self.error = ErrorInfo(e.error_type, e.message, e.status_code, e.hint)
                self._close(e.t_ns, "error")
            case ev.Cancelled():
                self._close(e.t_ns, "cancelled")

    def _close(self, t_ns: int, status: Status) -> None:
        self.end_ns = t_ns
        self.status = status

    @property
    def done(self) -> bool:
        return self.end_ns is not None

    @property
    def answer(self) -> str:
        return "".join(self._text)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    def text_parts(self, start: int = 0) -> list[str]:
        """Visible text pieces from index ``start``: lets a UI append without re-joining."""
        return self._text[start:]

    def reasoning_parts(self, start: int = 0) -> list[str]:
        return self._reasoning[start:]

    def _add_tool(self, e: ev.ToolCallDelta) -> None:
        """One piece of a tool call: a new call, or more of the latest one.

        The APIs stream a call as its name first, then its arguments in pieces, one call after the
        other. A piece continues the latest call when it carries that call's index; without an
        index (a non-streamed answer, a server that sends none), when it carries no name. A new
        name under the same index is a new call (some servers number every call 0).
        """
        self.tool_pieces += 1
        names = self._tool_names
        if names:
            last = names[-1]
            same = e.index == self._tool_index if e.index is not None else not e.name
            if same and e.name and last and e.name != last:
                same = False
            if same:
                if e.name and not last:
                    names[-1] = e.name
                if e.call_id and not self._tool_ids[-1]:
                    self._tool_ids[-1] = e.call_id
                if e.arguments:
                    self._tool_args[-1].append(e.arguments)
                return
        names.append(e.name)
        self._tool_args.append([e.arguments] if e.arguments else [])
        self._tool_ids.append(e.call_id)
        self._tool_index = e.index

    @property
    def first_visible_ns(self) -> int | None:
        """The first visible (not reasoning) chunk's stamp, None before one arrived."""
        return self._first_visible_ns

    @property
    def tool_call_count(self) -> int:
        """How many tool calls have begun (without joining their arguments)."""
        return len(self._tool_names)

    @property
    def tool_calls(self) -> list[dict[str, str]]:
        """The tool calls so far, one ``{name, arguments}`` each, the arguments as streamed (JSON text)."""
        return [{"name": n, "arguments": "".join(a)} for n, a in zip(self._tool_names, self._tool_args, strict=True)]

    @property
    def tool_call_ids(self) -> list[str]:
        """Each tool call's id, in the order of :attr:`tool_calls` ("" where the API gave none)."""
        return list(self._tool_ids)

    # --- reading -----------------------------------------------------------------
    def timestamps(self) -> Timestamps:
        first_visible = self._first_visible_ns
        return Timestamps(
            sent=self.attempts[0].sent_ns if self.attempts else None,
            final_sent=self.attempts[-1].sent_ns if self.attempts else None,
            headers=self.attempts[-1].headers_ns if self.attempts else None,
            first_token=self.chunks[0].t_ns if self.chunks else None,
            first_visible=first_visible,
            last_token=self.chunks[-1].t_ns if self.chunks else None,
            end=self.end_ns,
        )

    def token_counts(self) -> TokenCounts:
        u = self.usage
        if u is not None and u.output is not None:
            return TokenCounts(u.input, u.cached_input or 0, u.output, u.reasoning or 0, "usage", u.cache_write_input)
        return TokenCounts(
            input=tokens_for_chars(self.input_chars) if self.input_chars else None,
            cached_input=None,
            output=self._reasoning_tokens + self._visible_tokens,
            reasoning=self._reasoning_tokens,
            source="estimated",
        )

    def snapshot(self, now_ns: int | None = None) -> Snapshot:
        now = ev.now_ns() if now_ns is None else now_ns
        if self.end_ns is not None:
            now = self.end_ns
        sent = self.attempts[0].sent_ns if self.attempts else None
        first = self.chunks[0].t_ns if self.chunks else None
        first_vis = self._first_visible_ns
        phase, since = self._phase(sent, first, first_vis, now)
        gaps = [(b.t_ns - a.t_ns) / NS_PER_MS for a, b in pairwise(self.chunks[-RECENT_GAPS - 1 :])]
        n_tokens = self._reasoning_tokens + self._visible_tokens
        avg_tpot = None
        if first is not None and n_tokens > 1:
            avg_tpot = (self.chunks[-1].t_ns - first) / NS_PER_MS / (n_tokens - 1)
        # The chunks of the last SPEED_WINDOW_NS (stamps are in arrival order): tokens after the first of them.
        i = bisect.bisect_left(self.chunks, now - SPEED_WINDOW_NS, key=_stamp)
        tps = cur_tpot = None
        if len(self.chunks) - i > 1:
            span_s = (self.chunks[-1].t_ns - self.chunks[i].t_ns) / 1e9
            n = self._cum_tokens[-1] - self._cum_tokens[i]
            if span_s > 0 and n:
                tps = n / span_s
                cur_tpot = 1000 / tps
        last = self.attempts[-1] if self.attempts else None
        wire = None
        if phase == "waiting" and last is not None:
            wire = live_phase(self.wire_steps, last.headers_ns, last.status)
        if wire is None and phase == "waiting" and last is not None and self.api in ENGINE_APIS:
            wire = ("prefill", last.sent_ns)
        load = None
        if self.load_start_ns is not None:
            load = (self.load_start_ns, self.load_end_ns or now)
        return Snapshot(
            phase=phase,
            elapsed_ms=(now - sent) / NS_PER_MS if sent is not None else 0.0,
            phase_elapsed_ms=(now - since) / NS_PER_MS if since is not None else 0.0,
            ttft_ms=(first - sent) / NS_PER_MS if first is not None and sent is not None else None,
            ttfvt_ms=(first_vis - sent) / NS_PER_MS if first_vis is not None and sent is not None else None,
            attempt=last.attempt if last else 0,
            last_status=last.status if last else None,
            retry_ms=(last.sent_ns - sent) / NS_PER_MS if last and sent is not None else 0.0,
            reasoning_tokens=self._reasoning_tokens,
            visible_tokens=self._visible_tokens,
            avg_tpot_ms=avg_tpot,
            current_tpot_ms=cur_tpot,
            tokens_per_s=tps,
            recent_gaps_ms=tuple(gaps),
            last_chunk_ns=self.chunks[-1].t_ns if self.chunks else None,
            chunk_count=len(self.chunks),
            load_ms=(load[1] - load[0]) / NS_PER_MS if load is not None else None,
            error=self.error,
            own_delay_ms=own_delay_ms(self.submitted_ns, sent if sent is not None else now, load, self.mcp_start_ns),
            draft=self.draft,
            wait_phase=wire[0] if wire else None,
            wait_phase_ms=(now - wire[1]) / NS_PER_MS if wire else 0.0,
            wait_ms=split_wait(
                sent, last.sent_ns, self.wire_steps, last.headers_ns, first if first is not None else now
            )
            if last is not None and phase not in ("loading", "queued", "starting")
            else None,
        )

    def _phase(self, sent: int | None, first: int | None, first_vis: int | None, now: int) -> tuple[Phase, int | None]:
        if self.status is not None:
            return self.status, self.end_ns
        if self.load_start_ns is not None and self.load_end_ns is None:
            return "loading", self.load_start_ns
        if sent is None:
            if self.queued_ns is None and self.submitted_ns is not None:
                return "starting", self.submitted_ns  # ttft's own time: nothing has gone out yet
            return "queued", self.queued_ns or self.first_ns
        if first is None:
            return "waiting", self.attempts[-1].sent_ns
        if first_vis is None:
            return "reasoning", first
        return "streaming", first_vis

    # --- the end -----------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self._record is not None

    def finish(self, itl_ms: Percentiles | None = None) -> TurnRecord:
        """The complete record. A turn that never saw a terminal event counts as cancelled.

        ``itl_ms``: this turn's ITL percentiles when a batch already computed them
        (``backends.finish.finish_turns``); used by the first call only, as later ones return its record.
        """
        if self._record is not None:
            return self._record
        if self.end_ns is None:
            self._close(ev.now_ns(), "cancelled")
        ts = self.timestamps()
        tokens = self.token_counts()
        load = (self.load_start_ns, self.load_end_ns) if self.load_start_ns and self.load_end_ns else None
        metrics = compute(
            ts,
            self.chunks,
            tokens,
            queued_ns=self.queued_ns,
            load_ns=load,
            submitted_ns=self.submitted_ns,
            wire_steps=self.wire_steps,
            itl_ms=itl_ms,
            mcp_start_ns=self.mcp_start_ns,
            loop_lag_ms=self.loop_lag_ms,
        )
        spec = speculative_summary(self.server)
        if spec is not None:  # compute() leaves it None; a replace costs ~10 us per bench request
            metrics = replace(metrics, speculative=spec)
        extra = dict(self.extra)
        probe = self.probe if self.status == "ok" else None
        wait = getattr(metrics, "wait_ms", None)
        split = split_server_wait(wait, tokens.input, tokens.cached_input, probe) if probe else None
        if probe is not None and split is not None:
            metrics = replace(metrics, expected_prefill_ms=split.expected_prefill_ms)
            extra["probe"] = probe.reference()
        metrics = self._server_join(metrics, split)
        rec = TurnRecord(
            session_id=self.session_id,
            turn_index=self.turn_index,
            started_at=self.started_at,
            wall_offset_ns=self.wall_offset_ns,
            provider=self.provider,
            api=self.api,
            model=self.model,
            base_url=self.base_url,
            settings=self.settings,
            status=self.status or "cancelled",
            error=self.error,
            attempts=tuple(self.attempts),
            prompt=self.prompt,
            answer=self.answer,
            reasoning=self.reasoning,
            timestamps=ts,
            metrics=metrics,
            tokens=tokens,
            chunks=tuple(self.chunks),
            stop_reason=self.stop_reason,
            tool_calls=tuple(self.tool_calls),
            server=self.server or None,
            http=self.http,
            extra=extra,
            notices=dict(self.notices),
            attachments=self.attachments,
            cost=price_turn(self.price, tokens, self.started_at),
            branch_of=self.branch_of,
        )
        # The diagnosis reads the record it goes in. Set on this new record, seen by no one yet,
        # rather than through replace(), which copies every field again (~15 us per request).
        object.__setattr__(rec, "diagnosis", diagnose_turn(rec))
        self._record = rec
        return self._record

    def _server_join(self, metrics: TurnMetrics, split: ServerSplit | None) -> TurnMetrics:
        """The client's TTFT split by the server's own account (telemetry.wire.server_report): vLLM's
        per-request metrics, else llama-server's timings, else the saved probe's split."""
        report = server_report(self.server) if self.server else None
        if report is not None:
            join = join_server(metrics.ttft_ms, report.source, report.queue_ms, report.ttft_ms)
            reasoning, content = report.reasoning_ttft_ms, report.content_ttft_ms
        elif split is not None:
            join = join_server(metrics.ttft_ms, PROBE, split.server_queue_ms, split.expected_prefill_ms)
            reasoning = content = None
        else:
            return metrics
        if join.problem:
            self.notices[SERVER_JOIN_NOTICE] = join.problem
        return replace(
            metrics,
            server_queue_ms=join.queue_ms,
            server_ttft_ms=join.ttft_ms,
            server_rest_ms=join.rest_ms,
            server_timing_source=join.source,
            server_reasoning_ttft_ms=reasoning,
            server_content_ttft_ms=content,
        )


def _stamp(c: Chunk) -> int:
    return c.t_ns
