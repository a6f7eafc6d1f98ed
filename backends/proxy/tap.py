"""The tap: one proxied call's answer, read from a copy as it passes, into the events of ttft's own turns.

The proxy hands the tap every read of the upstream's body after writing it to the client, stamped with
its arrival (:class:`backends.transport.http.Probe`). The tap decodes a copy (:mod:`backends.proxy.decode`),
splits it into SSE events with the lean readers' splitter (:class:`backends.providers.lean.sse.SSESplitter`,
the JSON read by its ``loads``), and translates each event with the same translation the lean readers and
the SDK paths use (:mod:`backends.providers.chat_wire`, :mod:`backends.providers.messages_wire`,
:mod:`backends.providers.responses_wire`), ending as they end (the API's end marker, an error event, a
status error's body). The events go into a :class:`telemetry.recorder.TurnRecorder`, so a proxied call's
TTFT, TPOT, ITL, tokens, wait split, server figures, errors and cost are computed as a turn's are.

The tap never raises into the proxy: what it cannot read (a malformed event, bad UTF-8, JSON nested too
deep, an encoding it cannot decode) ends its reading, not the call; the bytes still pass unchanged, and
the record says what could not be read (``error`` for the stream, ``notices["proxy"]`` for the tap).
"""

from __future__ import annotations

from typing import Any

import httpx2

from ...telemetry import events as ev
from ...telemetry.errors import ErrorKind
from ...telemetry.log.secrets import masked
from ...telemetry.log.surrogates import scrub_event
from ...telemetry.recorder import TurnRecorder
from ..providers.chat_wire import ChatWire
from ..providers.errors import ErrorContext, failed_from_exception
from ..providers.hosted import TurnState
from ..providers.lean.sdk_errors import APIError, anthropic_status_error, status_error
from ..providers.lean.sse import SSESplitter, loads, message_data, stream_error
from ..providers.messages_wire import MessagesWire
from ..providers.responses_wire import ResponsesWire
from ..think import ThinkSplitter
from ..transport.http import Probe
from .decode import BodyDecoder

NOTICE = "proxy"  # the record's notices key for what the tap could not read
MAX_BODY_KEPT = 16 * 1024 * 1024  # a whole (non-streamed) answer read for the record; the rest passes unread


class _Bare:
    """The host half the wire translations expect, with nothing to send: they only translate here."""

    def __init__(self, model: str, **opts: Any) -> None:
        self.model = model
        self.provider = opts.get("provider", "")


class _ChatTap(ChatWire, _Bare):
    pass


class _MessagesTap(MessagesWire, _Bare):
    pass


class _ResponsesTap(ResponsesWire, _Bare):
    pass


def _wire(api: str, model: str, compat: bool) -> Any:
    if api == "messages":
        return _MessagesTap(model)
    if api == "responses":
        return _ResponsesTap(model)
    return _ChatTap(model, compat=compat)


class CallTap:
    """Reads one call's answer into its recorder (see the module doc)."""

    def __init__(
        self,
        api: str,
        *,
        recorder: TurnRecorder,
        probe: Probe,
        ctx: ErrorContext,
        url: str,
        model_step: bool = True,
        compat: bool = False,
    ) -> None:
        self.api = api
        self.recorder = recorder
        self.probe = probe
        self.ctx = ctx
        self.url = url
        self.model_step = model_step
        self.wire = _wire(api, recorder.model, compat)
        self.state = TurnState()
        if api == "messages":
            self.state.extra["usage"] = {}
        elif api == "chat.completions":
            self.state.extra["splitter"] = ThinkSplitter() if compat else None
        self.status = 0
        self.mode = "off"  # "sse", "body" (a whole JSON answer), "error" (a status error's body), "off"
        self.reading = True  # False once the tap could not read on (the bytes still pass)
        self.failed: ev.Failed | None = None
        self.unread: list[str] = []
        self.response_id: str | None = None
        self.got_tokens = False
        self.ended = False  # end() has run: later news (a cancel after the last byte) changes nothing
        self._decoder: BodyDecoder | None = None
        self._split = SSESplitter()
        self._body = bytearray()

    # --- feeding ---------------------------------------------------------------------
    def emit(self, e: ev.Event) -> None:
        e = scrub_event(e)  # lone surrogates never reach the record
        if type(e) is ev.Failed:
            e = masked(e)
        self.recorder.feed(e)

    def drain_probe(self) -> None:
        """The upstream attempt's events so far (sent, wire steps, headers) into the recorder."""
        for e in self.probe.drain():
            self.emit(e)

    def begin(self, status: int, headers: Any) -> None:
        """The upstream's headers are in: what kind of body follows."""
        self.status = status
        self.drain_probe()
        self._decoder = BodyDecoder(headers.get("Content-Encoding"))
        if self._decoder.error:
            self._stop(self._decoder.error)
        ctype = str(headers.get("Content-Type", "")).lower()
        if not 200 <= status < 300:
            self.mode = "error"
        elif "text/event-stream" in ctype:
            self.mode = "sse"
        else:
            self.mode = "body"
            if self.api == "chat.completions":
                self.state.extra["complete"] = True

    def feed(self, data: bytes, t: int) -> None:
        """One read of the body (as sent), arrived at ``t``."""
        if not self.reading or self._decoder is None:
            return
        plain = self._decoder.feed(data)
        if self._decoder.error:
            self._stop(self._decoder.error)
            return
        if self.mode == "sse":
            try:
                self._sse(plain, t)
            except Exception as exc:  # the stream is not this API's: the reader's failure, as the lean reader's
                self._fail(exc)
        elif len(self._body) + len(plain) <= MAX_BODY_KEPT:
            self._body += plain
        else:
            self._stop(f"the answer is longer than {MAX_BODY_KEPT >> 20} MiB; not read")

    def _answered(self) -> httpx2.Response:
        """The answer an ``error`` event is raised against (made only then)."""
        return httpx2.Response(200, request=self._request())

    def _sse(self, plain: bytes, t: int) -> None:
        if self.api == "messages":
            for event in self._split.feed_named(plain):
                if (payload := message_data(event, self._answered)) is not None:
                    self._item(loads(payload), t)
                if not self.reading:
                    return
            return
        for data in self._split.feed(plain):
            if isinstance(data, UnicodeDecodeError):
                raise data
            if data.startswith(b"[DONE]"):
                self.state.finished = True
                self.reading = False  # what follows [DONE] is no event (the lean reader reads it away too)
                return
            obj = loads(data)
            if (error := stream_error(obj)) is not None:
                raise APIError(error[0], self._request(), body=error[1])
            self._item(obj, t)
            if not self.reading:
                return

    def _item(self, item: Any, t: int) -> None:
        if self.api == "responses" and isinstance(item, dict):
            resp = item.get("response") if isinstance(item.get("response"), dict) else item
            rid = resp.get("id") if isinstance(resp, dict) else None
            if isinstance(rid, str) and rid and self.response_id is None:
                self.response_id = rid[:128]
        if self.api == "chat.completions" and self.state.extra.get("complete"):
            events = self.wire._translate_complete_raw(item, t, self.state)
        else:
            events = self.wire._translate_raw(item, t, self.state)
        for e in events:
            if isinstance(e, ev.ReasoningDelta | ev.TextDelta | ev.ToolCallDelta):
                self.got_tokens = True
            self.emit(e)
        if self.state.failed is not None:
            self.failed = self.state.failed
            self.reading = False

    # --- the end ---------------------------------------------------------------------
    def end(self, t: int, failure: ev.Failed | BaseException | None = None, *, cancelled: str | None = None) -> None:
        """The body has ended: read to its end, or cut by ``failure`` (an upstream error, a read timeout),
        or ``cancelled`` (why: the client disconnected, the proxy closed)."""
        if self.ended:
            return
        self.ended = True
        self.drain_probe()
        # A client that leaves once the stream's last event came cut nothing: the OpenAI SDK closes its
        # response at [DONE], before the upstream's end of body reaches the proxy.
        done = self.mode == "sse" and self.state.finished and self.failed is None and self.state.failed is None
        if cancelled is not None and not done:
            self.note(cancelled)
            self.emit(ev.Cancelled(t))
            return
        if failure is not None:
            if self.failed is not None:  # the stream had already failed to read: that is what the record says
                self.emit(self.failed)
            elif isinstance(failure, ev.Failed):
                self.emit(failure)
            else:
                self.emit(failed_from_exception(failure, self._ctx(), self.probe))
            return
        if self.failed is not None:
            self.emit(self.failed)
            return
        try:
            if self.mode == "error":
                self._status_failure()
                return
            if self.mode == "body" and self.reading:
                self._whole(t)
            elif self.mode == "sse" and self.reading:
                self._split.finish()
        except Exception as exc:
            self._fail(exc)
        if self.failed is not None:
            self.emit(self.failed)
            return
        if not self.model_step:
            self.emit(ev.Finished(t, None))
            return
        if not self.reading and not self.state.finished and self.state.failed is None and self.mode != "sse":
            self.emit(ev.Finished(t, None))  # a body the tap could not read: the call itself completed
            return
        for e in self.wire._finish(self.state, self.probe, t):
            self.emit(e)

    def _whole(self, t: int) -> None:
        body = bytes(self._body)
        if not self.model_step:  # count_tokens: {"input_tokens": N}; the model generates nothing
            doc = loads(body, "the answer") if body else None
            n = doc.get("input_tokens") if isinstance(doc, dict) else None
            if isinstance(n, int) and not isinstance(n, bool):
                self.recorder.extra["count_tokens"] = n
            return
        self._item(loads(body, "the answer"), t)

    def _status_failure(self) -> None:
        """A status error: the SDK's error for the body, worded as a turn's (429 and 529 kept with their status)."""
        response = httpx2.Response(self.status, content=bytes(self._body), request=self._request())
        exc = anthropic_status_error(response) if self.api == "messages" else status_error(response)
        self.emit(failed_from_exception(exc, self._ctx(), self.probe))

    def _fail(self, exc: BaseException) -> None:
        self.failed = failed_from_exception(exc, self._ctx(), self.probe)
        self.reading = False

    def _stop(self, why: str) -> None:
        self.note(why)
        self.reading = False

    def note(self, why: str) -> None:
        self.unread.append(why)
        self.recorder.notices[NOTICE] = "; ".join(self.unread)

    def _ctx(self) -> ErrorContext:
        ctx = self.ctx
        return ErrorContext(
            provider=ctx.provider,
            base_url=ctx.base_url,
            key_env=None,
            timeout_s=ctx.timeout_s,
            secrets=ctx.secrets,
            streaming_started=self.got_tokens,
        )

    def _request(self) -> httpx2.Request:
        return httpx2.Request("POST", self.url)


def read_timeout_failure(timeout_s: float, got_tokens: bool) -> ev.Failed:
    """An upstream that sent no byte for the proxy's read timeout: the call ended by the proxy."""
    phase = "in the middle of the answer" if got_tokens else "before the first token"
    return ev.Failed(
        ev.now_ns(),
        ErrorKind.TIMEOUT,
        f"The upstream sent no byte for {timeout_s:g} s {phase}; the proxy ended the call.",
        None,
        "The server stalled; the client got every byte that came before.",
    )
