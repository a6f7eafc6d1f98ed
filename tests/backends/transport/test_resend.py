"""The lean reader's aiohttp client resends a POST only when the server cannot have read any of it
(backends.transport.aiohttp_client.resend_is_safe), against a raw loopback server that ends kept-alive connections."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from ttft.backends.providers.lean.chat import LeanChatBackend
from ttft.backends.transport.aiohttp_client import ended_by_peer

from tests.fakes.keepalive_server import KEEPALIVE_WORDS, KeepAliveServer
from tests.support.backend_util import one_turn


def lean(base_url: str) -> LeanChatBackend:
    b = LeanChatBackend("m", provider="compat", base_url=base_url, compat=True)
    b.use_aiohttp()
    return b


async def two_turns(
    then: Any, make: Callable[[str], LeanChatBackend] = lean
) -> tuple[KeepAliveServer, dict[str, Any], dict[str, Any]]:
    """Two turns on one backend (``make``: its load transport), the second on the pooled connection."""
    async with KeepAliveServer(then) as srv:
        b = make(srv.base_url)
        try:
            first = await one_turn(b, stream=True, max_retries=0)
            second = await one_turn(b, stream=True, max_retries=0)  # on the pooled connection
        finally:
            await b.aclose()
    return srv, first, second


async def test_a_request_reset_unread_on_a_reused_connection_goes_again_as_the_same_attempt() -> None:
    srv, first, second = await two_turns("reset_unread")
    assert first["status"] == "ok" and first["http"]["connection"] == "new"
    assert second["status"] == "ok", second.get("error")
    assert second["attempts"] == 1 and len(second["chunks"]) == KEEPALIVE_WORDS
    assert srv.connections == 2 and srv.requests == 2  # each request read once: nothing ran twice


async def test_a_pooled_connection_the_server_closed_costs_the_next_turn_nothing() -> None:
    srv, first, second = await two_turns("close_idle")
    assert first["status"] == second["status"] == "ok", second.get("error")
    assert second["attempts"] == 1 and second["http"]["connection"] == "new"
    assert srv.requests == 2 and srv.connections == 2


async def test_a_request_the_server_read_is_never_resent() -> None:
    srv, first, second = await two_turns("read_then_drop")
    assert first["status"] == "ok"
    assert second["status"] == "error" and second["attempts"] == 1
    assert srv.requests == 2 and srv.connections == 1  # the second was read, then dropped: not sent again


async def test_the_same_server_answering_keeps_one_connection() -> None:
    srv, first, second = await two_turns("answer")
    assert first["status"] == second["status"] == "ok"
    assert second["http"]["connection"] == "reused" and srv.connections == 1 and srv.requests == 2


def test_a_pooled_socket_the_peer_ended_is_seen_before_any_write() -> None:
    a, b = socket.socketpair()
    try:
        assert not ended_by_peer(a)  # idle and open: reusable
        b.close()
        assert ended_by_peer(a)  # its EOF is waiting: dropped before the request is written
    finally:
        a.close()
    assert ended_by_peer(None)


def test_the_resend_rule_by_failure() -> None:
    import errno

    import aiohttp
    from ttft.backends.transport.aiohttp_client import resend_is_safe

    reset = aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer")
    pipe = aiohttp.ClientOSError(errno.EPIPE, "Broken pipe")
    closing = aiohttp.ClientConnectionResetError("Cannot write to closing transport")
    eof = aiohttp.ServerDisconnectedError()
    other = aiohttp.ClientOSError(errno.EHOSTUNREACH, "No route to host")
    assert [resend_is_safe(e, True) for e in (reset, pipe, closing, eof, other)] == [1, 1, 1, 0, 0]
    assert not any(resend_is_safe(e, False) for e in (reset, pipe, closing, eof, other))
