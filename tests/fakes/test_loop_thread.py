"""The loopback fakes' shared plumbing (tests/fakes/loop_thread.py): it serves, stops and says why it could not."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request

import pytest
from aiohttp import web

from tests.fakes.loop_thread import LoopThreadServer


class Ping(LoopThreadServer):
    thread_name = "ping-fake"

    def __init__(self, **kw: int) -> None:
        super().__init__(**kw)
        self.loop_thread: str | None = None

    def app(self) -> web.Application:
        async def ping(request: web.Request) -> web.Response:
            self.loop_thread = threading.current_thread().name
            return web.Response(text="pong")

        app = web.Application()
        app.router.add_get("/ping", ping)
        return app


class BrokenSetup(Ping):
    async def setup(self) -> None:
        raise ValueError("no semaphore today")


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def test_it_serves_from_its_own_thread_on_a_port_it_bound() -> None:
    with Ping() as srv:
        assert srv.port != 0 and srv.url == f"http://127.0.0.1:{srv.port}"
        assert _get(f"{srv.url}/ping") == "pong"
        assert srv.loop_thread == f"ping-fake-{srv.port}"  # not the test's thread
        url = srv.url
    with pytest.raises(urllib.error.URLError):  # stopped: nothing listens there any more
        _get(f"{url}/ping")
    srv.stop()  # a second stop is harmless


def test_a_restart_keeps_its_port() -> None:
    srv = Ping().start()
    port = srv.port
    srv.stop()
    try:
        assert srv.start().port == port and _get(f"{srv.url}/ping") == "pong"
    finally:
        srv.stop()


def test_a_boot_error_is_raised_by_start_not_lost_in_the_thread() -> None:
    with pytest.raises(RuntimeError, match="ping-fake did not start") as caught:
        BrokenSetup().start()
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_taken_port_fails_at_once() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            Ping(port=taken.getsockname()[1]).start()
