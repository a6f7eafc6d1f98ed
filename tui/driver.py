"""The terminal's input as the apps read it: a bracketed paste is only ever text, and bytes that are not
UTF-8 are replaced and said, never fatal. Carried here until Textual fixes both upstream.

What it corrects, in Textual 0.2.0 to 8.2.8 (``textual/_xterm_parser.py`` and
``textual/drivers/linux_driver.py``; 8.2.8 was the newest release when this was written):

1. **A paste's escape sequences became keystrokes.** ``XTermParser.parse`` keeps a paste's
   characters only in its outer loop. An ESC inside the paste starts its escape-sequence loop, which
   never adds to the paste buffer: what follows the ESC is matched against key sequences and, once
   the next ESC comes or 32 characters pass, *re-issued as key events*. A pasted coloured log
   (``log:\\x1b[31mERROR\\x1b[0m`` and more lines) arrived as the keys ``^ [ 3 1 m E R R O R ...``
   with every pasted line break an Enter (the chat sent a scrambled prompt by itself), then a
   ``Paste`` of the text before the first ESC; ``text \\x1b[0m\\x11 more`` typed ctrl+q and quit.
2. **Invalid UTF-8 killed the input thread.** ``LinuxDriver.run_input_thread`` decodes with a strict
   incremental UTF-8 decoder: one byte such as ``\\xff`` (a Latin-1 paste, a binary file's bytes)
   raises ``UnicodeDecodeError`` in the input thread, which makes the app panic with a traceback and
   exit with status 0. Textual issue #6456 (open); its pull requests #6498 (open), #6496 and #6624
   (closed) pass ``errors="replace"``.

How: :class:`PasteAsTextParser` wraps Textual's own parser (every sequence outside a paste is still
Textual's to read) and reads a paste itself, verbatim, from ``ESC[200~`` to ``ESC[201~``;
:class:`InputDecoder` replaces what is not UTF-8 by U+FFFD and counts it; :class:`TtftDriver` is
Textual's Linux/macOS driver with its input loop built from the two, and a notice once the input
goes quiet after bytes were replaced. The apps run on it through ``tui.hangup.driver_class``, whose
driver extends it. Windows keeps Textual's own driver.

**A forged end marker.** A terminal sends a paste's bytes as they are, so a paste that holds
``ESC[201~`` ends there as far as the terminal's stream can tell, and what follows (a line break,
ctrl+q, ``INJECTED typed line``) would arrive as typed keys: a paste could type, and send, what it
likes. The terminal's own end marker still comes after the whole paste, though, and nothing can
have been typed between the two. So what follows a paste's end is held (never a key) while input
keeps coming without a :data:`PASTE_TAIL_S` pause: if the terminal's real end marker arrives in that
burst, the premature one and all that followed it are pasted text too (a second ``Paste`` right
after the first: the box gets every character, in order); if the input goes quiet first, what was
held was typed after the paste (or is the terminal's own report: a focus change, the mouse) and is
read as keys, in order, as it would have been. A start marker in the burst begins a new paste
(what came before it in the burst is pasted text). What cannot be told apart: two real pastes sent
back to back are the same bytes as one paste holding ``ESC[201~ESC[200~``, read as the former
(those twelve characters are not kept); a forged tail that the terminal writes with a pause longer
than :data:`PASTE_TAIL_S` inside it is read as typed past that pause. Nothing in a paste is a key.

The report filed upstream would read, in brief:

    XTermParser turns the content of a bracketed paste that holds ESC into key events.
    Repro: feed "\\x1b[200~a\\x1b[31mred\\x1b[0m\\rb\\x1b[201~" to XTermParser().feed: it gives Key
    events for "^[31mred^[0m", an Enter, "b", and then Paste("a"). Expected: one Paste with every
    character between the markers. Cause: in parse(), the escape-sequence loop runs while
    bracketed_paste is set and neither buffers what it reads nor waits for the end marker; on the
    next ESC or after _MAX_SEQUENCE_SEARCH_THRESHOLD it calls reissue_sequence_as_keys. Patch: once
    ESC[200~ is read, read characters verbatim into the paste buffer until the buffer ends with
    ESC[201~ (no escape-sequence parsing, no timeouts), then emit one Paste. Also: the NUL removal
    (#1661, a Windows Terminal workaround) drops NULs a user pasted on every platform; and
    LinuxDriver's decoder should pass errors="replace" (#6456).

Unlike Textual's parser, this one keeps a paste's NUL characters (every character, in order): the
workaround was for Windows, where this driver is not used.
"""

from __future__ import annotations

import codecs
import os
import selectors
import threading
from collections.abc import Generator
from typing import Any

from textual import events
from textual._parser import ParseEOF, ParseError, ParseTimeout, Read1, TokenCallback
from textual._xterm_parser import BRACKETED_PASTE_END, BRACKETED_PASTE_START, XTermParser
from textual.drivers.linux_driver import LinuxDriver

PASTE_TAIL_S = 0.2  # a pause this long after a paste's end: what follows was typed, not pasted
_MARK = len(BRACKETED_PASTE_START)  # both markers are six characters
READ_SIZE = 4096  # bytes per read of the terminal, as Textual reads them
_REPLACE = "ttft-input-replace"  # the codecs error handler that replaces and counts


class PasteAsTextParser(XTermParser):
    """Textual's input parser, with a bracketed paste read here: verbatim, every character of it one
    ``events.Paste`` text (NUL included), never a key; see the module's docstring for the tail."""

    def parse(self, token_callback: TokenCallback) -> Generator[Read1, str, None]:
        upstream = _Upstream(super().parse(lambda t: None if isinstance(t, events.Paste) else token_callback(t)))
        recent = ""  # the last characters given to Textual's parser, to spot a paste's start marker
        while True:
            try:
                ch = yield upstream.request
            except ParseTimeout:
                recent = ""  # an ESC that timed out was the escape key: no marker begins with it any more
                upstream.throw(ParseTimeout())
                continue
            except ParseEOF:
                upstream.eof()
                return
            upstream.send(ch)
            recent = (recent + ch)[-_MARK:]
            if recent != BRACKETED_PASTE_START:
                continue
            recent = ""
            # Textual's parser has just begun a paste: end it at once (its empty Paste is dropped) and
            # read the paste here, so that it never sees what the paste holds.
            upstream.send(BRACKETED_PASTE_END)
            if not (yield from self._paste_and_tail(token_callback, upstream)):
                return

    def _paste_and_tail(self, emit: TokenCallback, upstream: _Upstream) -> Generator[Read1, str, bool]:
        """A paste (and any that follow it in the same burst), then what came after it; False once the
        input has ended."""
        while True:
            text, why = yield from self._read(None)
            emit(events.Paste(text))
            if why == "eof":  # the input ended inside the paste
                upstream.eof()
                return False
            while True:
                held, why = yield from self._read(PASTE_TAIL_S)
                if why != "end":
                    break
                # The terminal's own end marker, after the one the paste held: all of it was pasted.
                emit(events.Paste(BRACKETED_PASTE_END + held))
            if why == "start":  # another paste, in the same burst
                if held:
                    emit(events.Paste(held))
                continue
            # Quiet (or the input's end) before any end marker: what came after the paste was typed.
            upstream.send(held)
            if why == "eof":
                upstream.eof()
                return False
            upstream.settle()
            return True

    def _read(self, tail_s: float | None) -> Generator[Read1, str, tuple[str, str]]:
        """The characters up to the end marker, verbatim, and what ended them: "end", or "eof" (the
        input's end). With ``tail_s`` (after a paste): also "start" (a start marker) and "idle" (no
        character for ``tail_s`` seconds)."""
        chars: list[str] = []
        while True:
            try:
                ch = yield self.read1(tail_s)
            except ParseTimeout:
                if tail_s is None:
                    continue  # none was asked for: a paste waits for its end
                return "".join(chars), "idle"
            except ParseEOF:
                return "".join(chars), "eof"
            chars.append(ch)
            if ch == "~" and len(chars) >= _MARK:
                last = "".join(chars[-_MARK:])
                if last == BRACKETED_PASTE_END:
                    return "".join(chars[:-_MARK]), "end"
                if tail_s is not None and last == BRACKETED_PASTE_START:
                    return "".join(chars[:-_MARK]), "start"


class _Upstream:
    """Textual's parser generator, driven from inside ours: the characters we pass it, one at a time."""

    def __init__(self, gen: Generator[Any, str, None]) -> None:
        self.gen = gen
        self.request: Read1 = next(gen)
        self.done = False

    def send(self, chars: str) -> None:
        for ch in chars:
            if self.done:
                return
            try:
                self.request = self.gen.send(ch)
            except StopIteration:
                self.done = True

    def throw(self, exc: ParseError) -> None:
        if self.done:
            return
        try:
            self.request = self.gen.throw(exc)
        except StopIteration:
            self.done = True

    def settle(self) -> None:
        """The input has been quiet for longer than Textual's escape delay: an escape sequence it still
        waits on is complete (a lone ESC is the escape key), so let its timeout pass now."""
        for _ in range(_MARK):
            if self.done or self.request.timeout is None:
                return
            self.throw(ParseTimeout())

    def eof(self) -> None:
        self.throw(ParseEOF())
        self.done = True


# --- bytes that are not UTF-8 -------------------------------------------------------------------
_counts = threading.local()


def _replace_and_count(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    _counts.bad = getattr(_counts, "bad", 0) + exc.end - exc.start
    return "\ufffd", exc.end


codecs.register_error(_REPLACE, _replace_and_count)


class InputDecoder:
    """The terminal's bytes as text: UTF-8, each run of bytes that is not UTF-8 replaced by one U+FFFD
    (as ``errors="replace"`` does) and counted in :attr:`replaced` (bytes), instead of raising."""

    def __init__(self) -> None:
        self.replaced = 0
        self._decode = codecs.getincrementaldecoder("utf-8")(errors=_REPLACE).decode

    def decode(self, data: bytes, final: bool = False) -> str:
        _counts.bad = 0
        text: str = self._decode(data, final)
        self.replaced += _counts.bad
        return text

    def take_replaced(self) -> int:
        n, self.replaced = self.replaced, 0
        return n


def replaced_notice(n: int) -> str:
    return (
        f"The terminal sent {n} byte{'s' if n != 1 else ''} that {'are' if n != 1 else 'is'} not UTF-8:"
        " each run of them is now \ufffd (U+FFFD), in the box and in what is sent."
    )


class TtftDriver(LinuxDriver):
    """Textual's Linux/macOS driver, its input read by :class:`InputDecoder` and
    :class:`PasteAsTextParser` (the rest of its input loop as Textual's)."""

    def run_input_thread(self) -> None:
        parser = PasteAsTextParser(self._debug)
        decoder = InputDecoder()
        selector = selectors.SelectSelector()  # as Textual's: it works with every kind of stdin
        selector.register(self.fileno, selectors.EVENT_READ)

        def pump(ready: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            for _key, mask in ready:
                if mask & selectors.EVENT_READ:
                    text = decoder.decode(os.read(self.fileno, READ_SIZE), final=final)
                    if not text:  # a piped stdin at its end, or half a character: nothing to parse yet
                        break
                    for message in parser.feed(text):
                        self.process_message(message)
            for message in parser.tick():
                self.process_message(message)
            if not ready and decoder.replaced:  # said once the input is quiet: one notice per paste
                self._say(replaced_notice(decoder.take_replaced()))

        try:
            while not self.exit_event.is_set():
                pump(selector.select(0.1))
            selector.unregister(self.fileno)
            pump(selector.select(0.1), final=True)
        finally:
            selector.close()
            try:
                for _ in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass

    def _say(self, notice: str) -> None:
        self._app.call_later(self._app.notify, notice, title="Input", severity="warning", markup=False, timeout=10)
