"""The chat's backend process sends the events ready together, in order and with their own stamps, and
reads Chat Completions with the lean reader unless asked for the SDK: the same record either way."""

from __future__ import annotations

from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from ttft.backends.ask.isolated import ProcessBackend
from ttft.backends.base import ChatRequest, Message
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry import events as ev

from tests.fakes import FakeServer, Schedule


@pytest.fixture
def srv():
    with FakeServer(Schedule(first_token_ms=5, token_ms=0.2, visible_tokens=600, input_tokens=7)) as s:
        yield s


async def _turn(backend: ProcessBackend) -> list[ev.Event]:
    request = ChatRequest((Message("user", "go"),))
    return [e async for e in backend.stream(request)]


def _from_the_gauges(e: ev.Event) -> bool:
    return isinstance(e, ev.ServerTimings) or (isinstance(e, ev.Notice) and e.key == "server_gauges")


async def test_events_cross_in_batches_in_order_with_their_own_stamps(
    srv: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    messages: list[int] = []
    recv = Connection.recv

    def counting(self: Connection) -> object:
        msg = recv(self)
        if isinstance(msg, tuple) and msg and msg[0] == "events":
            messages.append(len(msg[1]))
        return msg

    monkeypatch.setattr(Connection, "recv", counting)
    backend = ProcessBackend("compat:fake-model", srv.openai_base_url)
    try:
        events = await _turn(backend)
    finally:
        await backend.aclose()
    texts = [e for e in events if isinstance(e, ev.TextDelta)]
    assert "".join(e.text for e in texts) == Schedule(visible_tokens=600).visible_text()  # all, in order
    # The server's gauges (or the notice that it has none), read on a thread beside the stream, carry the time
    # that read ended and are handed on with the stream's next event: the stream's own events keep their order.
    stamps = [e.t_ns for e in events if not _from_the_gauges(e)]
    assert stamps == sorted(stamps) and len(set(t.t_ns for t in texts)) > 1  # each keeps the stamp of its read
    assert sum(messages) == len(events)
    assert len(messages) < len(events) / 2, messages  # several events a message at 5,000 tokens/s


async def test_the_lean_reader_and_the_sdk_give_the_same_record(
    srv: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    records = []
    for lean in (True, False):
        backend = ProcessBackend("compat:fake-model", srv.openai_base_url, lean=lean)
        request = ChatRequest((Message("user", "go"),))
        try:
            rec = new_recorder(backend, request, session_id="s", turn_index=0)
            records.append(await run_turn(backend, request, rec))
        finally:
            await backend.aclose()
    lean_rec, sdk_rec = records
    assert lean_rec.status == sdk_rec.status == "ok"
    assert lean_rec.answer == sdk_rec.answer and lean_rec.tokens == sdk_rec.tokens
    assert len(lean_rec.chunks) == len(sdk_rec.chunks) == 600


async def test_the_terminals_signals_leave_the_child_to_the_parent(
    srv: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A closed terminal sends SIGHUP (Ctrl-C with signals on: SIGINT) to the whole process group: the
    child must not die of it mid-turn (the turn would read as an engine crash); the parent decides."""
    import os
    import signal

    from ttft.telemetry.log.secrets import KNOWN

    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("TTFT_TEST_CHILD_KEY", "sk-child-only-key-8841")
    (tmp_path / "config.toml").write_text(
        f'[providers.keyed]\nkind = "compat"\nbase_url = "{srv.openai_base_url}"\napi_key_env = "TTFT_TEST_CHILD_KEY"\n'
    )
    srv.schedule = Schedule(first_token_ms=5, token_ms=20, visible_tokens=40)
    backend = ProcessBackend("keyed:fake-model")
    try:
        assert "sk-child-only-key-8841" in KNOWN  # the child's key, learnt for masking what is typed here
        request = ChatRequest((Message("user", "go"),))
        events = []
        async for e in backend.stream(request):
            events.append(e)
            if sum(isinstance(x, ev.TextDelta) for x in events) == 3:
                assert backend.pid is not None
                os.kill(backend.pid, signal.SIGHUP)
                os.kill(backend.pid, signal.SIGINT)
    finally:
        await backend.aclose()
    assert not any(isinstance(e, ev.Failed) for e in events), [e for e in events if isinstance(e, ev.Failed)]
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == Schedule(visible_tokens=40).visible_text()


@pytest.mark.parametrize("proxy", [False, True])
async def test_the_lean_reader_streams_over_the_protocol_transport_unless_a_proxy_is_set(
    srv: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, proxy: bool
) -> None:
    """The child reads a lean stream over the Protocol + httptools transport (it asks for the body as sent,
    ``identity``; httpx2 asks for gzip), with the same record and wait phases as httpx2. That transport
    speaks no proxy: with ``HTTP_PROXY`` set, the chat reaches the server through it, over httpx2."""
    from tests.fakes.forward_proxy import ForwardProxy

    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path))
    for k in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(k, raising=False)
    with ForwardProxy() as fwd:
        if proxy:
            monkeypatch.setenv("HTTP_PROXY", fwd.url)
        backend = ProcessBackend("compat:fake-model", srv.openai_base_url)  # the child reads the environment
        request = ChatRequest((Message("user", "go"),))
        try:
            recs = []
            for i in range(2):  # a new connection, then the kept-alive one
                recs.append(
                    await run_turn(backend, request, new_recorder(backend, request, session_id="s", turn_index=i))
                )
        finally:
            await backend.aclose()
    # the turns' requests (the server's gauges are read beside them, by their own client)
    encodings = [r.headers.get("accept-encoding", "") for r in srv.requests if r.path.endswith("/chat/completions")]
    streamed_via_proxy = [r for r in fwd.requests if r.endswith("/chat/completions")]
    if proxy:
        assert len(streamed_via_proxy) == 2 and len(encodings) == 2 and all("gzip" in e for e in encodings)
    else:
        assert fwd.requests == [] and encodings == ["identity", "identity"]
    for rec in recs:
        assert rec.status == "ok" and rec.answer == Schedule(visible_tokens=600).visible_text()
        assert len(rec.chunks) == 600
    first, second = (rec.to_dict() for rec in recs)
    assert first["http"]["connection"] == "new" and first["metrics"]["wait_ms"]["connect"] > 0
    if not proxy:  # the proxy closes each connection it forwards
        assert second["http"]["connection"] == "reused" and not second["metrics"]["wait_ms"].get("connect")
    for d in (first, second):  # the phases tile the wait, as on httpx2
        assert sum(d["metrics"]["wait_ms"].values()) == pytest.approx(d["metrics"]["ttft_ms"], abs=0.01)


def test_which_client_the_chat_streams_with() -> None:
    from ttft.backends.providers.lean.transport import chat_transport, proto_available

    assert proto_available()  # a core dependency: the chat's cheaper stream
    assert chat_transport("compat:m", "http://127.0.0.1:9/v1", lean=True) == "proto"
    assert chat_transport("compat:m", "http://127.0.0.1:9/v1", lean=False) == "httpx2"  # --sdk
    assert chat_transport("local", None, lean=True) == "none"  # the in-process engine has no wire
