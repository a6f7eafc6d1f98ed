"""Tools on each wire: offered, called (ids kept), and their results sent back in each API's own form,
through the lean readers and the real ``openai``/``anthropic`` SDKs alike, against a loopback model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ttft.backends.agent.consent import Consent
from ttft.backends.agent.loop import AgentTurn
from ttft.backends.base import build_request
from ttft.backends.providers.registry import create_backend
from ttft.telemetry.record import TurnRecord

from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.tool_host import FakeHost, FakeTool

SCRIPT = [
    Step(calls=(Call("search", {"q": "tokyo"}), Call("clock", {"q": "utc"})), first_ms=10),
    Step(text="It is noon in Tokyo.", first_ms=10),
]
APIS = [("compat:m", "chat"), ("openai-responses:m", "responses"), ("anthropic:m", "messages")]


@pytest.fixture(scope="module")
def srv():
    with AgentServer(SCRIPT) as s:
        yield s


def _turn(srv: AgentServer, spec: str, lean: bool, host: FakeHost) -> TurnRecord:
    base = srv.url if spec.startswith("anthropic") else srv.base_url
    backend = create_backend(spec, base_url=base, api_key="k", lean=lean)
    agent = AgentTurn(
        backend,
        build_request("what time is it in Tokyo?", system="be brief"),
        host,
        Consent(allow_all=True),
        session_id="s",
        turn_index=0,
    )

    async def go() -> TurnRecord:
        try:
            return await agent.run()
        finally:
            await backend.aclose()

    return asyncio.run(go())


def _tools_offered(kind: str, body: dict[str, Any]) -> list[str]:
    tools = body["tools"]
    if kind == "chat":
        assert all(t["type"] == "function" and "parameters" in t["function"] for t in tools)
        return [t["function"]["name"] for t in tools]
    if kind == "responses":
        assert all(t["type"] == "function" and "parameters" in t for t in tools)
        return [t["name"] for t in tools]
    assert all("input_schema" in t for t in tools)
    return [t["name"] for t in tools]


def _results_sent(kind: str, body: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(call id of the call, call id of its result, result text) for each result sent back."""
    if kind == "chat":
        msgs = body["messages"]
        asked = next(m for m in msgs if m.get("tool_calls"))
        ids = [c["id"] for c in asked["tool_calls"]]
        assert asked["tool_calls"][0]["function"]["name"] == "search"
        results = [m for m in msgs if m["role"] == "tool"]
        assert msgs.index(asked) < msgs.index(results[0])
        return [(i, r["tool_call_id"], r["content"]) for i, r in zip(ids, results, strict=True)]
    if kind == "responses":
        items = body["input"]
        calls = [i for i in items if i.get("type") == "function_call"]
        outs = [i for i in items if i.get("type") == "function_call_output"]
        assert json.loads(calls[0]["arguments"]) == {"q": "tokyo"}
        return [(c["call_id"], o["call_id"], o["output"]) for c, o in zip(calls, outs, strict=True)]
    msgs = body["messages"]
    asked = next(m for m in msgs if m["role"] == "assistant")
    uses = [b for b in asked["content"] if b["type"] == "tool_use"]
    assert uses[0]["input"] == {"q": "tokyo"}
    answer = msgs[msgs.index(asked) + 1]
    assert answer["role"] == "user" and all(b["type"] == "tool_result" for b in answer["content"])
    assert [b["is_error"] for b in answer["content"]] == [False, True]
    return [(u["id"], b["tool_use_id"], b["content"]) for u, b in zip(uses, answer["content"], strict=True)]


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk"])
@pytest.mark.parametrize(("spec", "kind"), APIS, ids=[k for _, k in APIS])
def test_tools_go_out_and_results_come_back_in_each_apis_form(srv: AgentServer, spec: str, kind: str, lean: bool):
    host = FakeHost(FakeTool("search", "Tokyo: 12:00", server="web"), FakeTool("clock", "no clock", is_error=True))
    n = len(srv.requests)
    rec = _turn(srv, spec, lean, host)
    first, second = srv.requests[n], srv.requests[n + 1]
    assert len(srv.requests) == n + 2
    assert _tools_offered(kind, first) == ["search", "clock"]
    sent = _results_sent(kind, second)
    assert [a == b != "" for a, b, _ in sent] == [True, True]  # each result under its call's id
    assert [text for _, _, text in sent] == (
        ["Tokyo: 12:00", "no clock"] if kind == "messages" else ["Tokyo: 12:00", "Error: no clock"]
    )
    assert sorted(host.calls) == [("clock", {"q": "utc"}), ("search", {"q": "tokyo"})]
    assert rec.status == "ok" and rec.answer.strip() == "It is noon in Tokyo."
    assert [s.kind for s in rec.steps] == ["model", "tool", "tool", "model"]
    assert [(s.name, s.status) for s in rec.steps if s.kind == "tool"] in (
        [("search", "ok"), ("clock", "error")],
        [("clock", "error"), ("search", "ok")],
    )
    assert [c["name"] for c in rec.tool_calls] == ["search", "clock"]
