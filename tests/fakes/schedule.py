"""What a fake server is told to do (``Schedule``: timing, reasoning shape, failures, scripted text)
and what it saw (``RecordedRequest``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Schedule:
    first_token_ms: float = 20.0  # T: first token-bearing chunk after the request arrived
    token_ms: float = 5.0  # D: per token
    reasoning_tokens: int = 0
    visible_tokens: int = 8
    tokens_per_chunk: int = 1
    headers_ms: float = 0.0  # delay before the response headers
    # Chat Completions reasoning shape: "reasoning_content" | "reasoning" | "think" | "hidden".
    # Responses: anything but "hidden" streams reasoning_summary_text deltas.
    # Anthropic: "thinking" | "hidden"/"omitted" (signature only) | "redacted"; a request with
    # thinking.display == "omitted" is always answered as omitted.
    reasoning: str = "reasoning_content"
    think_tag_split: bool = False  # cut "</think>" across two chunks
    input_tokens: int = 12
    cached_tokens: int = 0
    cache_write_tokens: int = 0  # Anthropic's cache_creation_input_tokens (outside input_tokens, as it sends them)
    usage: bool = True  # send usage (Chat Completions: only when include_usage is asked)
    claimed_output_tokens: int | None = None  # usage's output count when it lies about what was streamed
    timings: str | None = None  # "llama" (llama-server timings) | "ollama" (durations) on the last chunk
    timings_per_chunk: bool = False  # llama timings on every token chunk too (llama-server's timings_per_token)
    draft: tuple[int, int] | None = None  # llama timings' (draft_n, draft_n_accepted): speculative decoding
    stop_reason: str | None = None  # default per API: stop / completed / end_turn
    # failure injection
    fail_status: int | None = None
    fail_times: int = 1 << 30  # first K attempts fail (default: all)
    fail_message: str = "Injected failure"
    fail_type: str | None = None  # provider error type; a sensible default per status
    retry_after: float | None = None
    # Answer every generation request with HTTP 200 and the provider-shaped error body (fail_message,
    # fail_type) as one JSON document, as some proxies and gateways refuse a streamed request.
    error_as_200: bool = False
    # The error's whole body as sent, in place of the provider-shaped one (hostile bodies: nested
    # 100,000 deep, megabytes long); with fail_status or error_as_200.
    fail_body: str | None = None
    error_after: int | None = None  # mid-stream error event after N token chunks
    error_message: str = "The server had an error while processing your request."
    drop_after: int | None = None  # close the connection after N token chunks
    malformed_after: int | None = None  # emit a broken JSON line after N token chunks
    stall_after: int | None = None  # stop sending after N token chunks ...
    stall_s: float = 30.0  # ... for this long
    no_done: bool = False
    reject_stream_options: bool = False
    models: tuple[str, ...] = ("fake-model", "fake-reasoner")
    # Scripted text: each token-bearing chunk's text in order (reasoning first) instead of "r07 " / "w07 ".
    # JSON-escaped on the wire, so a lone surrogate goes out as "\ud800", as an ASCII-escaping server sends it.
    texts: tuple[str, ...] | None = None
    # A streamed answer's body, sent verbatim after the headers (any API): wire content no schedule makes.
    raw_sse: str | None = None
    # Keepalives: these bytes every ``keepalive_s`` while the open stream waits (for a token, a stall,
    # the end), as a proxy or a server's heartbeat sends them; they carry no event.
    keepalive_s: float | None = None
    keepalive: str = ": ping\n\n"
    # Tool calls, (name, arguments JSON) each, streamed after the text in the API's own shape: the name
    # first, then the arguments in pieces of ``tool_piece_chars``, one token slot each.
    tool_calls: tuple[tuple[str, str], ...] = ()
    tool_piece_chars: int = 8
    # vLLM's per-request metrics (--enable-per-request-metrics): a ``metrics`` object on the usage chunk
    # (Chat Completions, when usage is asked for), in ``response.completed`` (Responses), at the top of a
    # non-streamed answer; queue and TTFT as the fake measured them on its own clock (``RecordedRequest.
    # server_metrics`` keeps what it sent). ``output_token_metrics`` adds the reasoning / content blocks,
    # ``spec_decode`` (drafted, accepted, verification steps) the speculative_decoding block.
    vllm_metrics: bool = False
    output_token_metrics: bool = False
    spec_decode: tuple[int, int, int] | None = None
    # The scheduler: at most ``slots`` requests generate at once (the server's own, across every request
    # with a slot count), a later one waits for a free slot; ``queue_hold_ms`` holds every request in the
    # queue this long first (the held-queue knob: the truth of its queue time). Timing after the queue
    # (headers_ms, first_token_ms, ...) counts from the moment the request is scheduled.
    slots: int | None = None
    queue_hold_ms: float = 0.0
    # Sent verbatim as the ``metrics`` value (JSON text: hostile shapes, NaN, deep nesting) instead of the
    # measured object.
    metrics_json: str | None = None

    def chunks(self, reasoning_visible: bool = True) -> list[tuple[float, str, str]]:
        """``(at_ms, kind, text)`` for every token-bearing chunk, reasoning first.

        Hidden reasoning keeps its time slots but yields no chunk.
        """
        out: list[tuple[float, str, str]] = []
        c = max(1, self.tokens_per_chunk)
        j = 0
        for kind, n, prefix in (("reasoning", self.reasoning_tokens, "r"), ("text", self.visible_tokens, "w")):
            for start in range(0, n, c):
                text = "".join(f"{prefix}{i % 100:02d} " for i in range(start, min(n, start + c)))
                if self.texts is not None and j < len(self.texts):
                    text = self.texts[j]
                if kind == "text" or reasoning_visible:
                    out.append((self.first_token_ms + j * c * self.token_ms, kind, text))
                j += 1
        return out

    def tool_chunks(self) -> list[tuple[float, int, str, str]]:
        """``(at_ms, call, name, arguments piece)`` for every tool-call chunk: a call's first chunk has
        its name and no arguments, the others a piece of its arguments and no name."""
        c = max(1, self.tokens_per_chunk)
        j = math.ceil(self.reasoning_tokens / c) + math.ceil(self.visible_tokens / c)
        out: list[tuple[float, int, str, str]] = []
        for i, (name, args) in enumerate(self.tool_calls):
            pieces = [args[k : k + self.tool_piece_chars] for k in range(0, len(args), self.tool_piece_chars)]
            for name_part, piece in [(name, ""), *(("", p) for p in pieces)]:
                out.append((self.first_token_ms + j * c * self.token_ms, i, name_part, piece))
                j += 1
        return out

    @property
    def tool_tokens(self) -> int:
        return len(self.tool_chunks())

    def expected_ttfvt_ms(self) -> float:
        c = max(1, self.tokens_per_chunk)
        return self.first_token_ms + math.ceil(self.reasoning_tokens / c) * c * self.token_ms

    def end_ms(self) -> float:
        c = max(1, self.tokens_per_chunk)
        n = math.ceil(self.reasoning_tokens / c) + math.ceil(self.visible_tokens / c) + self.tool_tokens
        return self.first_token_ms + max(0, n - 1) * c * self.token_ms

    @property
    def output_tokens(self) -> int:
        return self.reasoning_tokens + self.visible_tokens + self.tool_tokens

    def reasoning_text(self) -> str:
        if self.texts is not None:
            return "".join(t for _, kind, t in self.chunks() if kind == "reasoning")
        return "".join(f"r{i % 100:02d} " for i in range(self.reasoning_tokens))

    def visible_text(self) -> str:
        if self.texts is not None:
            return "".join(t for _, kind, t in self.chunks() if kind == "text")
        return "".join(f"w{i % 100:02d} " for i in range(self.visible_tokens))


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_ns: int
    attempt: int  # per server (or per model schedule) since the schedule was last set
    status: int | None = None
    completed: bool = False  # the whole body went out
    disconnected: bool = False  # the client went away before the end
    disconnect_ns: int | None = None
    chunks_sent: int = 0
    query: dict[str, str] = field(default_factory=dict)  # the URL's query parameters, as they arrived
    peer: str | None = None  # the client's "host:port": one per TCP connection (counts a client's pool)
    server_metrics: dict[str, Any] | None = None  # the vLLM per-request metrics object it sent
