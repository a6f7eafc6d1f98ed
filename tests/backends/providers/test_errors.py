"""Every failure a hosted turn can meet: one plain sentence + hint, status error, partial answer kept, no traceback."""

from __future__ import annotations

import asyncio
import socket

import pytest
from ttft.backends.base import ChatRequest, Message
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry.settings import TurnSettings

from tests.fakes import FakeServer, Schedule, fake_server_fixture  # noqa: F401
from tests.support.backend_util import backend_for, one_turn

APIS = ["chat", "responses", "anthropic"]


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))


def _plain(d: dict) -> dict:
    err = d["error"]
    assert d["status"] == "error" and err is not None
    msg = err["message"]
    assert msg.endswith(".") and "\n" not in msg and "Traceback" not in msg
    assert err["hint"] and "Traceback" not in err["hint"]
    return err


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("status", "etype"),
    [(401, "auth"), (403, "permission_denied"), (404, "not_found"), (500, "server_error"), (529, "overloaded")],
)
async def test_http_errors(fake_server: FakeServer, api: str, status: int, etype: str) -> None:
    fake_server.schedule = Schedule(fail_status=status, fail_message=f"provider says {status}")
    b = backend_for(api, fake_server)
    d = await one_turn(b, max_retries=0)
    await b.aclose()
    err = _plain(d)
    assert err["type"] == etype and err["status_code"] == status
    assert f"HTTP {status}" in err["message"] and f"provider says {status}" in err["message"]
    assert d["attempts"] == 1 and d["attempt_log"][0]["status"] == status


@pytest.mark.parametrize("api", [*APIS, "compat"])
@pytest.mark.parametrize(("status", "etype"), [(500, "server_error"), (429, "rate_limited"), (400, "bad_request")])
async def test_http_errors_non_streamed(fake_server: FakeServer, api: str, status: int, etype: str) -> None:
    fake_server.schedule = Schedule(fail_status=status, fail_message=f"provider says {status}")
    b = backend_for(api, fake_server)
    d = await one_turn(b, stream=False, max_retries=0)
    await b.aclose()
    assert fake_server.requests[-1].body["stream"] is False
    err = _plain(d)
    assert err["type"] == etype and err["status_code"] == status
    assert f"provider says {status}" in err["message"]
    assert d["settings"]["stream"] is False and d["answer"] == "" and d["metrics"]["ttft_ms"] is None
    assert d["attempts"] == 1 and d["attempt_log"][0]["status"] == status


async def test_non_streamed_retry_then_answer(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(fail_status=529, fail_times=1, retry_after=0, visible_tokens=3)
    b = backend_for("anthropic", fake_server)
    d = await one_turn(b, stream=False, max_retries=1)
    await b.aclose()
    assert d["status"] == "ok" and d["answer"] == "w00 w01 w02 "
    assert [a["status"] for a in d["attempt_log"]] == [529, 200]


@pytest.mark.parametrize("api", APIS)
async def test_429_retry_after_counts_attempts(fake_server: FakeServer, api: str) -> None:
    fake_server.schedule = Schedule(fail_status=429, fail_times=1, retry_after=0.2, visible_tokens=3)
    b = backend_for(api, fake_server)
    d = await one_turn(b, max_retries=2)
    assert d["status"] == "ok" and d["attempts"] == 2
    assert [a["status"] for a in d["attempt_log"]] == [429, 200]
    assert d["attempt_log"][0]["retry_after_s"] == 0.2
    assert d["metrics"]["retry_ms"] >= 190  # the SDK honoured retry-after; the wait is visible, not hidden
    fake_server.schedule = Schedule(fail_status=429, retry_after=0, fail_message="slow down")
    d = await one_turn(b, max_retries=1)
    await b.aclose()
    err = _plain(d)
    assert err["type"] == "rate_limited" and "after 2 attempts" in err["message"] and "slow down" in err["message"]
    assert d["attempts"] == 2


@pytest.mark.parametrize("api", APIS)
async def test_mid_stream_error_keeps_partial(fake_server: FakeServer, api: str) -> None:
    fake_server.schedule = Schedule(error_after=3, visible_tokens=10, error_message="Overloaded now")
    b = backend_for(api, fake_server)
    d = await one_turn(b)
    await b.aclose()
    err = _plain(d)
    assert err["type"] == "stream_error" and "Overloaded now" in err["message"]
    assert d["answer"] == "w00 w01 w02 " and d["metrics"]["ttft_ms"] is not None


@pytest.mark.parametrize("api", APIS)
async def test_dropped_connection_keeps_partial(fake_server: FakeServer, api: str) -> None:
    fake_server.schedule = Schedule(drop_after=2, visible_tokens=10)
    b = backend_for(api, fake_server)
    d = await one_turn(b, max_retries=0)
    await b.aclose()
    err = _plain(d)
    assert err["type"] == "connection_dropped" and "middle of the answer" in err["message"]
    assert d["answer"] == "w00 w01 "


@pytest.mark.parametrize("api", APIS)
async def test_end_without_done(fake_server: FakeServer, api: str) -> None:
    fake_server.schedule = Schedule(no_done=True, visible_tokens=4)
    b = backend_for(api, fake_server)
    d = await one_turn(b)
    await b.aclose()
    err = _plain(d)
    assert err["type"] == "incomplete_stream" and d["answer"] == "w00 w01 w02 w03 "


@pytest.mark.parametrize("api", APIS)
async def test_malformed_json(fake_server: FakeServer, api: str) -> None:
    fake_server.schedule = Schedule(malformed_after=2, visible_tokens=5)
    b = backend_for(api, fake_server)
    d = await one_turn(b)
    await b.aclose()
    err = _plain(d)
    assert err["type"] == "malformed_stream" and d["answer"] == "w00 w01 "


@pytest.mark.parametrize("api", APIS)
async def test_stall_past_read_timeout(fake_server: FakeServer, api: str) -> None:
    fake_server.schedule = Schedule(stall_after=2, stall_s=5, visible_tokens=5)
    b = backend_for(api, fake_server, timeout_s=0.5)
    d = await one_turn(b, max_retries=0)
    await b.aclose()
    err = _plain(d)
    assert err["type"] == "timeout" and "0.5 s" in err["message"] and d["answer"] == "w00 w01 "
    assert fake_server.wait_for(lambda r: r.disconnected, timeout=3) is not None


@pytest.mark.parametrize("api", APIS)
async def test_refused_connection(api: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = type("S", (), {"openai_base_url": f"http://127.0.0.1:{port}/v1", "url": f"http://127.0.0.1:{port}"})()
    b = backend_for(api, srv)
    d = await one_turn(b, max_retries=0)
    await b.aclose()
    err = _plain(d)
    assert err["type"] == "connection_refused" and str(port) in err["message"]


@pytest.mark.parametrize("api", APIS)
async def test_cancel_closes_server_stream(fake_server: FakeServer, api: str) -> None:
    fake_server.schedule = Schedule(first_token_ms=10, token_ms=20, visible_tokens=500)
    b = backend_for(api, fake_server)
    request = ChatRequest((Message("user", "hi"),), TurnSettings())
    recorder = new_recorder(b, request, session_id="t", turn_index=0)
    task = asyncio.create_task(run_turn(b, request, recorder))
    while len(recorder.answer) < 12:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rec = recorder.finish().to_dict()
    assert rec["status"] == "cancelled" and rec["answer"].startswith("w00 w01 w02 ")
    gone = await asyncio.to_thread(fake_server.wait_for, lambda r: r.disconnected, 2.0)
    assert gone is not None and gone.chunks_sent < 100
    await b.aclose()


async def test_aclose_of_stream_closes_connection(fake_server: FakeServer) -> None:
    fake_server.schedule = Schedule(first_token_ms=10, token_ms=20, visible_tokens=500)
    b = backend_for("chat", fake_server)
    stream = b.stream(ChatRequest((Message("user", "hi"),)))
    async for e in stream:
        if type(e).__name__ == "TextDelta":
            break
    await stream.aclose()
    gone = await asyncio.to_thread(fake_server.wait_for, lambda r: r.disconnected, 2.0)
    assert gone is not None
    await b.aclose()


async def test_key_is_scrubbed_from_errors(fake_server: FakeServer) -> None:
    key = "sk-proj-SECRET0123456789"
    fake_server.schedule = Schedule(fail_status=401, fail_message=f"Incorrect API key provided: {key}.")
    b = backend_for("chat", fake_server, api_key=key)
    d = await one_turn(b, max_retries=0)
    await b.aclose()
    assert key not in str(d) and "SECRET" not in str(d)
    assert _plain(d)["type"] == "auth" and "OPENAI_API_KEY" in d["error"]["hint"]


def test_a_long_message_masks_a_key_that_straddles_its_cut() -> None:
    """A server's message is cut at MESSAGE_MAX characters; a known key crossing that point is masked
    first, so none of its characters is kept (cut first, its head would no longer match the key)."""
    from ttft.backends.providers.answers.error_body import MESSAGE_MAX, kept
    from ttft.telemetry.log.secrets import remember

    key = "sk-straddle-" + "k" * 40
    remember(key)
    message = "x" * (MESSAGE_MAX - 10) + key + " tail" * 50
    said = kept(message)
    assert "sk-straddle" not in said and "***" in said
    assert said.endswith("more characters not kept)")
