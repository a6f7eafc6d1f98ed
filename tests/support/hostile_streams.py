"""Hostile streams for the stream readers: a loopback server that sends any bytes, each API's backend
on it (through its SDK and through its lean reader), hypothesis strategies for hostile bodies, and
what of a record must not depend on the reader.

Shared by the fuzz tests (``tests/cli/test_hostile_input.py``, deterministic under the ``ci`` profile)
and the wide random fuzz (``tests/benchmarks/fuzz_readers.py``).
"""

from __future__ import annotations

import http.server
import json
import re
import socketserver
import threading
from typing import Any

from hypothesis import strategies as st
from ttft.backends.base import Backend
from ttft.backends.providers.anthropic_messages import AnthropicMessagesBackend
from ttft.backends.providers.lean.chat import LeanChatBackend
from ttft.backends.providers.lean.messages import LeanMessagesBackend
from ttft.backends.providers.lean.responses import LeanResponsesBackend
from ttft.backends.providers.openai_chat import OpenAIChatBackend
from ttft.backends.providers.openai_responses import OpenAIResponsesBackend

from tests.support.backend_util import one_turn

HI_CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'


class RawServer:
    """A loopback HTTP server answering every POST with 200, a content type and a body written in
    the given pieces (each flushed on its own): bytes no JSON-speaking fake can send."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.content_type = "text/event-stream"
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes: no framing to get wrong

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", owner.content_type)
                self.end_headers()
                try:
                    for piece in owner.pieces:
                        self.wfile.write(piece)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):  # the reader stopped at an error: its right
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


ALL_APIS = ["sdk", "lean", "responses", "messages", "lean-responses", "lean-messages"]


def backend(api: str, url: str) -> Backend:
    """``api``'s backend (one of :data:`ALL_APIS`) on the server at ``url``."""
    if api == "sdk":
        return OpenAIChatBackend("m", provider="compat", base_url=url + "/v1", compat=True)
    if api == "lean":
        return LeanChatBackend("m", provider="compat", base_url=url + "/v1", compat=True)
    if api == "responses":
        return OpenAIResponsesBackend("m", base_url=url + "/v1", api_key="k")
    if api == "lean-responses":
        return LeanResponsesBackend("m", base_url=url + "/v1", api_key="k")
    if api == "lean-messages":
        return LeanMessagesBackend("m", base_url=url, api_key="k")
    return AnthropicMessagesBackend("m", base_url=url, api_key="k")


PAIRS = [("sdk", "lean"), ("responses", "lean-responses"), ("messages", "lean-messages")]  # (SDK path, lean reader)


FIRST: dict[str, bytes] = {  # one well-formed text delta, so a partial answer exists before the hostile bytes
    "sdk": HI_CHUNK,
    "lean": HI_CHUNK,
    "responses": b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"i",'
    b'"output_index":0,"content_index":0,"delta":"Hi","sequence_number":1}\n\n',
    "messages": b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
    b'"role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hi"}}\n\n',
}
EVENT_TYPES = {  # the shapes each reader looks at, so the fuzz gets past "unknown event, skipped"
    "sdk": [None],
    "lean": [None],
    "responses": [
        "response.output_text.delta",
        "response.completed",
        "response.failed",
        "error",
        "response.output_item.added",
        "response.reasoning_summary_text.delta",
    ],
    "messages": [
        "content_block_delta",
        "content_block_start",
        "message_delta",
        "message_stop",
        "message_start",
        "error",
    ],
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FIELDS = [
    "choices",
    "delta",
    "content",
    "usage",
    "finish_reason",
    "type",
    "text",
    "message",
    "response",
    "content_block",
    "item",
    "error",
    "index",
    "reasoning_content",
    "tool_calls",
    "output",
]
shaped = st.recursive(  # dicts with the keys the readers look up, holding any JSON value
    json_values,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(FIELDS), inner, max_size=4),
    max_leaves=10,
)


VLLM_METRICS = {  # vLLM's per-request metrics
    "time_to_first_token_ms": 8.5,
    "queue_time_ms": 1.0,
    "mean_itl_ms": None,
    "output_token_metrics": {"content": {"token_count": 2, "time_to_first_token_ms": 9.0}},
    "speculative_decoding": {"num_draft_tokens": 4, "num_accepted_draft_tokens": 2, "num_spec_steps": 2},
}
TEMPLATES: dict[str, list[dict[str, Any]]] = {  # well-formed events of each API, one leaf of which the fuzz replaces
    "chat": [
        {"choices": [{"index": 0, "delta": {"content": "x", "reasoning_content": "r"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2,
                                  "prompt_tokens_details": {"cached_tokens": 0},
                                  "completion_tokens_details": {"reasoning_tokens": 0}}},
        {"choices": [], "timings": {"prompt_n": 1, "predicted_n": 2}},
        {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}, "metrics": VLLM_METRICS},
        {"error": {"message": "boom", "type": "server_error"}},
    ],
    "responses": [
        {"type": "response.output_text.delta", "item_id": "i", "output_index": 0, "content_index": 0, "delta": "x"},
        {"type": "response.reasoning_summary_text.delta", "item_id": "i", "output_index": 0, "delta": "r"},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "name": "f"}},
        {"type": "response.function_call_arguments.delta", "item_id": "i", "output_index": 0, "delta": "{"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [],
                                                    "usage": {"input_tokens": 1, "output_tokens": 2,
                                                              "input_tokens_details": {"cached_tokens": 0},
                                                              "output_tokens_details": {"reasoning_tokens": 0}}}},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [],
                                                    "usage": {"input_tokens": 1, "output_tokens": 2},
                                                    "metrics": VLLM_METRICS}},
        {"type": "response.failed", "response": {"id": "r", "status": "failed", "error": {"message": "m"}}},
        {"type": "error", "message": "boom", "code": "server_error"},
    ],
    "messages": [
        {"type": "content_block_start", "index": 1, "content_block": {"type": "thinking", "thinking": "t"}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "name": "f", "id": "t"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "thinking_delta", "thinking": "t"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 3, "output_tokens_details": {"thinking_tokens": 1}}},
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                              "usage": {"input_tokens": 1, "cache_read_input_tokens": 2}}},
        {"type": "message_stop"},
        {"type": "error", "error": {"type": "overloaded_error", "message": "m"}},
    ],
}  # fmt: skip
TEMPLATES["sdk"] = TEMPLATES["lean"] = TEMPLATES.pop("chat")
for _api in ("responses", "messages"):  # each lean reader meets what its SDK path meets
    FIRST[f"lean-{_api}"], EVENT_TYPES[f"lean-{_api}"] = FIRST[_api], EVENT_TYPES[_api]
    TEMPLATES[f"lean-{_api}"] = TEMPLATES[_api]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (itself included) that the fuzz may replace."""
    out = [at]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        out += _paths(inner, (*at, key))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


@st.composite
def mutated_event(draw: st.DrawFn, api: str) -> Any:
    """An API's own event with one field (or the whole event) swapped for an arbitrary JSON value."""
    template = draw(st.sampled_from(TEMPLATES[api]))
    path = draw(st.sampled_from(_paths(template)))
    return _replaced(template, path, draw(json_values)) if draw(st.booleans()) else template


@st.composite
def hostile_body(draw: st.DrawFn, api: str, max_events: int = 3) -> list[bytes]:
    """The first text delta, then up to ``max_events`` arbitrary bytes or arbitrary JSON events, cut at
    random byte offsets."""
    tail = b""
    for _ in range(draw(st.integers(1, max_events))):
        kind = draw(st.sampled_from(["bytes", "json", "shaped", "mutated", "mutated"]))
        if kind == "bytes":
            tail += draw(st.binary(max_size=40))
            continue
        strategy = {"json": json_values, "shaped": shaped, "mutated": mutated_event(api)}[kind]
        value = draw(strategy)
        etype = draw(st.sampled_from(EVENT_TYPES[api]))
        if etype is not None and isinstance(value, dict) and draw(st.booleans()):
            value = {**value, "type": etype}
        event = f"event: {etype}\n".encode() if etype else b""
        tail += event + b"data: " + json.dumps(value).encode() + b"\n\n"
    body = FIRST[api] + tail
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(body) - 1)), max_size=4)))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


def outcome(rec: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the reader: the record less its times (and the loopback port). The error's
    words are whole: every path quotes a chunk and words a server's error through one function
    (``backends.providers.answers.error_body.wire_text``)."""
    err = rec.get("error") or {}
    message = re.sub(r"127\.0\.0\.1:\d+", "HOST", err.get("message") or "")
    return {
        "status": rec["status"],
        "answer": rec["answer"],
        "reasoning": rec["reasoning"],
        "stop_reason": rec["stop_reason"],
        "tokens": rec["tokens"],
        "tool_calls": rec["tool_calls"],
        "chunks": [{k: v for k, v in c.items() if k != "t_ms"} for c in rec["chunks"]],
        "error": (err.get("type"), message, err.get("hint")),
        "server": (rec["server"], rec["notices"].get("server_metrics")),  # a server's metrics, read alike
    }


async def outcomes(backends: tuple[Backend, ...], raw: RawServer, pieces: list[bytes]) -> list[dict[str, Any]]:
    """The same pieces sent through each backend in turn: each path's :func:`outcome`."""
    raw.content_type = "text/event-stream"
    raw.pieces = pieces
    return [outcome(await one_turn(b, max_retries=0)) for b in backends]
