"""SIGTERM and SIGHUP end a command the way Ctrl-C does, so the turn in flight is kept.

A closed terminal sends SIGHUP, a container stop or ``kill`` sends SIGTERM; by default
either kills the process at once and the turn being streamed is lost. Here they cancel
the command's main task instead, as asyncio does for SIGINT: ``run_turn`` records the
turn as cancelled with its partial answer and logs it, then the command exits with the
shell's code for the signal (128 + its number: 143 for SIGTERM, 129 for SIGHUP).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

STOP_SIGNALS: tuple[int, ...] = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


class Interrupted(KeyboardInterrupt):
    """A stop signal ended the command (a KeyboardInterrupt, so every Ctrl-C path handles it too)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def exit_code(exc: KeyboardInterrupt) -> int:
    """The exit status for an interruption: 128 + the signal (130 for Ctrl-C)."""
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + signal.SIGINT


def install(loop: asyncio.AbstractEventLoop, on_signal: Callable[[int], None]) -> list[int]:
    """Call ``on_signal(signum)`` on ``loop`` for each stop signal; returns those installed (none off the
    main thread, or where the loop cannot take signal handlers)."""
    installed = []
    for s in STOP_SIGNALS:
        try:
            loop.add_signal_handler(s, on_signal, s)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(s)
    return installed


def uninstall(loop: asyncio.AbstractEventLoop, installed: list[int]) -> None:
    for s in installed:
        loop.remove_signal_handler(s)


def run(coro: Coroutine[Any, Any, T], loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    """``asyncio.run(coro)``, with SIGTERM and SIGHUP cancelling it like Ctrl-C; raises ``Interrupted``.
    ``loop_factory``: the loop to run on (``ttft bench``'s uvloop, backends.load.event_loop); asyncio's when None."""
    caught: list[int] = []

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            if not caught:
                caught.append(signum)
                task.cancel()

        installed = install(loop, stop)
        try:
            return await coro
        finally:
            uninstall(loop, installed)

    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(main())
    except asyncio.CancelledError:
        if caught:
            raise Interrupted(caught[0]) from None
        raise
