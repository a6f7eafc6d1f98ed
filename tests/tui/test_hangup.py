"""The terminal driver outlives its terminal (tui.hangup): writes to a pty whose other end has closed
neither block nor raise, and the hangup is reported once. The whole chat's hangup, in a real terminal,
is tests/cli/test_tmux_hangup.py."""

from __future__ import annotations

import os
import pty
import threading
import time

from textual.drivers.linux_driver import LinuxDriver
from ttft.tui.hangup import HangupSafeDriver, _Writer, driver_class


def test_writes_after_the_terminal_closed_never_block_and_say_it_once() -> None:
    master, slave = pty.openpty()
    gone: list[float] = []
    reported = threading.Event()

    def on_gone() -> None:
        gone.append(time.monotonic())
        reported.set()

    writer = _Writer(os.fdopen(slave, "w", encoding="utf-8"), on_gone)
    writer.start()
    writer.write("before")
    deadline = time.monotonic() + 5
    seen = b""
    while b"before" not in seen and time.monotonic() < deadline:
        seen += os.read(master, 100)
    assert b"before" in seen
    os.close(master)  # the terminal goes away

    def flood() -> None:  # ten times the queue Textual's writer blocks on once its thread has died
        for _ in range(300):
            writer.write("x" * 4000)

    flooding = threading.Thread(target=flood)
    flooding.start()
    flooding.join(5)
    assert not flooding.is_alive(), "a write blocked on the dead terminal"
    assert reported.wait(5) and len(gone) == 1
    started = time.monotonic()
    writer.stop()
    assert time.monotonic() - started < 1.0


def test_the_apps_get_this_driver_in_place_of_textuals_linux_one_only() -> None:
    from textual.drivers.headless_driver import HeadlessDriver

    assert driver_class(LinuxDriver) is HangupSafeDriver
    assert driver_class(HeadlessDriver) is HeadlessDriver  # a test's pilot, TEXTUAL_DRIVER: as they are
