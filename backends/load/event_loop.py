"""The event loop a load process runs on: uvloop when it is installed, else asyncio's own.

Why: under hundreds of streams most of the client's CPU per chunk that is not ttft's own is the
event loop's (selector, handles, transports in Python). uvloop runs them on libuv in C, the same
protocol and future API, so the bench's readers and stamps do not change; it roughly halves the
loop's share. It is optional (``pip install 'ttft[bench]'``): without it, or with
``TTFT_EVENT_LOOP=asyncio``, asyncio's loop runs, and ``summary.json``'s ``meta.event_loop`` says
which one ran. ``ttft ask`` and the chat keep asyncio's loop (one stream: nothing to gain, and
Textual runs its own).

uvloop's ``loop.time()`` counts whole milliseconds, so whatever measures lag on it reads
``time.perf_counter()`` instead (see backends.load.driver).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from importlib import metadata
from typing import Any, TypeVar

T = TypeVar("T")
ENV = "TTFT_EVENT_LOOP"  # "asyncio" forces asyncio's loop; "uvloop" (or unset) prefers uvloop


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    if os.environ.get(ENV, "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None for asyncio's default loop."""
    return _uvloop_factory()


def loop_name(factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> str:
    """What a load process runs on, for the record: ``"uvloop 0.21.0"`` or ``"asyncio"``."""
    if factory is None:
        return "asyncio"
    try:
        return f"uvloop {metadata.version('uvloop')}"
    except metadata.PackageNotFoundError:
        return "uvloop"


def running() -> str:
    """The running loop's name, as :func:`loop_name` gives it."""
    is_uv = type(asyncio.get_running_loop()).__module__.split(".")[0] == "uvloop"
    return loop_name(_uvloop_factory() or asyncio.new_event_loop) if is_uv else "asyncio"


def run(coro: Coroutine[Any, Any, T], factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    """``asyncio.run(coro)`` on ``factory``'s loop (asyncio's own when None)."""
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)
