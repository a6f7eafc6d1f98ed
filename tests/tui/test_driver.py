"""The terminal's input as the apps read it (tui.driver): a bracketed paste is one text, whatever bytes it
holds, never a key; what follows a forged end marker is pasted text too; outside a paste every sequence
reads as Textual reads it; bytes that are not UTF-8 are replaced, counted and said, and the input thread
lives on. Bytes go into the real parser and driver; the events come out."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from textual import events
from textual._xterm_parser import XTermParser
from textual.drivers.headless_driver import HeadlessDriver
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message
from ttft.tui.driver import PASTE_TAIL_S, InputDecoder, PasteAsTextParser, TtftDriver
from ttft.tui.hangup import driver_class

from tests.support.tui_support import TimedBackend
from tests.tui.widgets.test_prompt_box import BoxApp

START, END = "\x1b[200~", "\x1b[201~"

# What a paste may hold, each of which Textual 8.2.8 turned (in part) into keys.
HOSTILE = {
    "coloured log": "colored log:\x1b[31mERROR\x1b[0m disk full\r\x1b[1;33mWARN\x1b[0m retrying\rINFO done",
    "ctrl+q's byte": "innocent text \x1b[0m\x11 more",
    "a lone ESC at the end": "text then\x1b",
    "two ESCs": "a\x1b\x1bb",
    "a start marker inside": f"a{START}b",
    "a long CSI": "\x1b[" + "1;" * 40 + "m after",
    "an OSC title": "\x1b]0;pwned\x07 and \x1b]52;c;Zm9v\x07",
    "C0, DEL and NUL": "\x00\x01\x03\x04\x1a\x1c\x7f\x08\tend",
    "C1 and bidi": "\x9b31m \u202e gnp.exe",
    "non-ASCII": "ünïcødé 漢字 🙂 \ufffd",
    "a mouse report": "\x1b[<0;10;5M\x1b[<0;10;5m",
    "a focus report": "\x1b[I\x1b[O",
    "arrow keys": "\x1b[A\x1b[B\x1bOA",
    "empty": "",
}


def feed(parser: XTermParser, *chunks: str) -> list[Message]:
    return [e for chunk in chunks for e in parser.feed(chunk)]


def settle(parser: XTermParser) -> list[Message]:
    """The events the parser gives once the input has been quiet past its wait after a paste."""
    time.sleep(PASTE_TAIL_S + 0.05)
    return list(parser.tick())


def pasted(evs: list[Message]) -> str:
    assert all(isinstance(e, events.Paste) for e in evs), [e for e in evs if not isinstance(e, events.Paste)]
    return "".join(e.text for e in evs if isinstance(e, events.Paste))


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_paste_is_one_text_with_every_character_and_no_key(content: str) -> None:
    parser = PasteAsTextParser()
    evs = feed(parser, START + content + END)
    assert len(evs) == 1 and pasted(evs) == content
    assert settle(parser) == []


def test_textual_s_own_parser_made_keys_of_them() -> None:
    """What the fix is for: the same bytes through Textual's parser give keys (so the tests above can fail)."""
    for name in ("coloured log", "ctrl+q's byte", "a long CSI", "an OSC title"):
        evs = list(XTermParser().feed(START + HOSTILE[name] + END))
        assert any(isinstance(e, events.Key) for e in evs), name


@pytest.mark.parametrize("name", ["coloured log", "ctrl+q's byte", "a lone ESC at the end", "a start marker inside"])
def test_the_paste_is_the_same_however_the_reads_cut_it(name: str) -> None:
    data = START + HOSTILE[name] + END
    for cut in range(1, len(data)):
        parser = PasteAsTextParser()
        assert pasted(feed(parser, data[:cut], data[cut:])) == HOSTILE[name], cut
    one_by_one = PasteAsTextParser()
    assert pasted(feed(one_by_one, *data)) == HOSTILE[name]


def test_a_forged_end_marker_and_what_follows_it_are_pasted_text() -> None:
    content = f"harmless text{END}\rINJECTED typed line\x11\r{END}again\rlast"
    parser = PasteAsTextParser()
    evs = feed(parser, START + content + END)
    assert pasted(evs) == content  # in order, the forged markers as text; no Enter, no ctrl+q
    assert [e.text for e in evs] == ["harmless text", f"{END}\rINJECTED typed line\x11\r", f"{END}again\rlast"]
    assert settle(parser) == []


def test_keys_after_a_paste_are_keys_once_the_input_pauses() -> None:
    parser = PasteAsTextParser()
    assert pasted(feed(parser, START + "x" + END + "\x1b[B" + "\r")) == "x"  # held: they might be pasted
    after = settle(parser)
    assert [e.key for e in after if isinstance(e, events.Key)] == ["down", "enter"]
    # After the pause, keys are read at once again, and a lone ESC is the escape key.
    assert [e.key for e in feed(parser, "a") if isinstance(e, events.Key)] == ["a"]
    feed(parser, START + "y" + END + "\x1b")
    assert [e.key for e in settle(parser) if isinstance(e, events.Key)] == ["escape"]


def test_two_pastes_in_one_burst_are_two_pastes() -> None:
    parser = PasteAsTextParser()
    evs = feed(parser, START + "one" + END + START + "two\x1b[0m" + END)
    assert [e.text for e in evs if isinstance(e, events.Paste)] == ["one", "two\x1b[0m"]
    assert settle(parser) == []


def test_a_paste_cut_by_the_end_of_input_is_still_text() -> None:
    parser = PasteAsTextParser()
    evs = feed(parser, START + "abc\x1b[31m")
    assert evs == []
    assert pasted(list(parser.feed(""))) == "abc\x1b[31m"


# Outside a paste, what Textual reads: keys, escape sequences, the mouse, focus, a terminal's replies.
TYPED = [
    "abc",
    "\r",
    "\x11",
    "\x1b[A\x1b[1;5C\x1bOP",
    "\x1b[<0;10;5M\x1b[<0;10;5m",
    "\x1b[I\x1b[O",
    "\x1b\r",
    "\x1ba",
    "\x1b[?2026;2$y",
    "\x1b[97;5u",
    "é漢",
    "[200~",
]


@pytest.mark.parametrize("typed", TYPED)
def test_outside_a_paste_it_reads_what_textual_reads(typed: str) -> None:
    ours, textual = PasteAsTextParser(), XTermParser()
    assert [repr(e) for e in feed(ours, typed)] == [repr(e) for e in feed(textual, typed)]
    time.sleep(0.15)  # past Textual's escape delay: a pending lone ESC becomes a key in both
    assert [repr(e) for e in ours.tick()] == [repr(e) for e in textual.tick()]


def test_a_lone_escape_key_is_still_the_escape_key() -> None:
    parser = PasteAsTextParser()
    assert feed(parser, "\x1b") == []
    time.sleep(0.15)
    assert [e.key for e in parser.tick() if isinstance(e, events.Key)] == ["escape"]


# --- bytes that are not UTF-8 -------------------------------------------------------------------
def test_the_decoder_replaces_and_counts_bytes_that_are_not_utf8() -> None:
    d = InputDecoder()
    assert d.decode(b"caf\xe9 and \xff\xfe end") == "caf\ufffd and \ufffd\ufffd end"
    assert d.take_replaced() == 3 and d.replaced == 0
    assert d.decode(b"\xc3") == "" and d.decode(b"\xa9!") == "é!"  # a character cut across reads
    assert d.replaced == 0
    assert d.decode(b"\xe6\xbc", final=True) == "\ufffd" and d.replaced == 2  # cut by the end of input


class _App:
    """What the driver's input thread touches of the app: call_later (its notices)."""

    def __init__(self) -> None:
        self.later: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []

    def call_later(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.later.append((fn, args, kwargs))

    def notify(self, *args: Any, **kwargs: Any) -> None:
        pass


class _PipeDriver(TtftDriver):
    """The driver reading a pipe in place of the terminal, keeping the messages it would post."""

    def __init__(self, app: Any, fd: int) -> None:
        super().__init__(app)
        self.fileno = fd
        self.messages: list[Message] = []

    def process_message(self, message: Message) -> None:
        self.messages.append(message)


@pytest.fixture
async def pipe_driver() -> AsyncIterator[tuple[_PipeDriver, _App, int]]:
    """The driver's input thread on a pipe (a driver is made inside a running event loop, as Textual does)."""
    r, w = os.pipe()
    app = _App()
    driver = _PipeDriver(app, r)
    thread = threading.Thread(target=driver.run_input_thread, daemon=True)
    thread.start()
    yield driver, app, w
    driver.exit_event.set()
    thread.join(5)
    assert not thread.is_alive()
    os.close(w)
    os.close(r)


def wait_until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(what)


async def test_the_input_thread_lives_on_after_bytes_that_are_not_utf8_and_says_so(
    pipe_driver: tuple[_PipeDriver, _App, int],
) -> None:
    driver, app, w = pipe_driver
    os.write(w, b"\x1b[200~caf\xe9 \xff\x1b[31m end\x1b[201~")
    wait_until(lambda: bool(driver.messages), "the paste")
    assert [(type(m), getattr(m, "text", None)) for m in driver.messages] == [
        (events.Paste, "caf\ufffd \ufffd\x1b[31m end")
    ]
    wait_until(lambda: bool(app.later), "the notice")  # once the input is quiet: one for the paste
    (fn, args, kwargs) = app.later[0]
    assert fn == app.notify and "2 bytes that are not UTF-8" in args[0] and kwargs["markup"] is False
    os.write(w, b"ok")  # and it still reads
    wait_until(lambda: len(driver.messages) == 3, "the keys typed after")
    assert [getattr(m, "key", None) for m in driver.messages[1:]] == ["o", "k"]
    assert len(app.later) == 1


def test_the_apps_run_on_this_driver_where_textual_would_use_its_linux_one() -> None:
    from ttft.tui.chat.app import ChatApp
    from ttft.tui.compare.app import CompareApp

    assert issubclass(driver_class(LinuxDriver), TtftDriver)  # with tui.hangup's care for a closed terminal
    assert driver_class(HeadlessDriver) is HeadlessDriver  # any other is left as it is (Windows', the tests')
    if os.name == "posix":
        assert issubclass(ChatApp().driver_class, TtftDriver)
        assert issubclass(CompareApp([TimedBackend(model="m")]).driver_class, TtftDriver)


# --- through the prompt box ---------------------------------------------------------------------
async def test_a_hostile_paste_reaches_the_prompt_box_whole_and_sends_nothing() -> None:
    content = f"colored log:\x1b[31mERROR\x1b[0m\r\x11 quit?{END}\rINJECTED\r"
    app = BoxApp()
    async with app.run_test(size=(80, 30)) as pilot:
        app.box.focus()
        for e in feed(parser := PasteAsTextParser(), START + content + END + "!"):
            app.post_message(e)
        for e in settle(parser):
            app.post_message(e)
        await pilot.pause()
        assert app.sent == [] and app.is_running  # no Enter, no ctrl+q
        assert app.box.value == content.replace("\r", "\n") + "!"
        await pilot.press("enter")
        assert app.sent == [content.replace("\r", "\n") + "!"]
