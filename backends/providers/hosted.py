"""What every HTTP backend shares: the instrumented client, the turn loop, errors, cancel.

A subclass opens the SDK stream (:meth:`HostedBackend._open`) and translates each SDK
item into events (:meth:`HostedBackend._translate`); this class runs the turn in steps, as
httpx layers its sending: open (the attempts' events drained live, in order), read (each item
stamped with the arrival time of its bytes, under two clocks), end (the API's own end, or one
``Failed`` event for any exception, through :mod:`backends.providers.errors`, or for a body that
was the API's error object), and close: the HTTP stream is closed on every exit, so a cancelled
or abandoned turn stops the server's generation at once.

Two clocks end a turn that never ends, here in the stream loop rather than in httpx (whose read
timeout every keepalive byte resets):

- token idle (``timeout_s``): no new token (text, reasoning or tool-call delta) for that long,
  counted from the response headers and then from each token. SSE comments (``: ping``), empty
  lines, Anthropic ``ping`` events and chunks that carry no token do not reset it. A model that
  thinks without streaming its reasoning is silent for this clock: give it a longer ``--timeout``.
- deadline (``settings.deadline_s``): the whole turn, from the call to the last byte.

Either ends the turn as a ``timeout`` / ``deadline`` error with the partial answer kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import httpx2

from ...telemetry import events as ev
from ...telemetry import json_guard
from ...telemetry.cost import PriceRef
from ...telemetry.errors import ErrorKind
from ...telemetry.log.secrets import Secrets, header_secrets, remember
from ...telemetry.log.urls import redact_url, split_query, url_secrets
from ..base import ChatRequest
from ..transport.http import DEFAULT_TIMEOUT_S, NO_KEY, InstrumentedHTTP, Probe, needs_ca_bundle
from .answers.error_body import ErrorAnswer, error_answer
from .errors import ErrorContext, failed_from_exception

Client = TypeVar("Client")


@dataclass
class TurnState:
    """What a backend learns while translating one turn's stream."""

    stop_reason: str | None = None
    finished: bool = False  # the API's own end marker ([DONE], response.completed, message_stop) came
    failed: ev.Failed | None = None  # an error reported as a stream event (not raised)
    usage: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    notices: list[ev.Notice] = field(default_factory=list)  # from _open: yielded after its attempt events


_TOKENS = (ev.ReasoningDelta, ev.TextDelta, ev.ToolCallDelta)  # what resets the token-idle clock


class GuardedEvents:
    """An SDK's SSE decoder whose events are measured by the JSON guard (``telemetry.json_guard``)
    before the SDK parses them, exactly those the lean reader parses (``parsed``) and as it does
    (``json_guard.loads_event``): an event nested past the guard's depth reaches the SDK with its deep
    part left out, or ends the turn at that event, in the same words, on both paths. Unguarded, the
    SDK would read it whole (its parser goes to Python's recursion limit)."""

    def __init__(self, decoder: Any, parsed: Callable[[Any], bool]) -> None:
        self._decoder = decoder
        self._parsed = parsed

    def _check(self, sse: Any) -> Any:
        data = sse.data
        if self._parsed(sse) and data.count("[") + data.count("{") > json_guard.MAX_DEPTH:
            value = json_guard.loads_event(data, "a stream event")  # the deep part left out, or refused
            return type(sse)(event=sse.event, data=json.dumps(value), id=sse.id, retry=sse.retry)
        return sse

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[Any]:
        return (self._check(sse) for sse in self._decoder.iter_bytes(iterator))

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[Any]:
        async for sse in self._decoder.aiter_bytes(iterator):
            yield self._check(sse)


def openai_parses(sse: Any) -> bool:
    """The events the OpenAI SDK parses, as ``LeanChunks`` does: every one but ``[DONE]``."""
    return not str(sse.data).startswith("[DONE]")


def anthropic_parses(sse: Any) -> bool:
    """The events the Anthropic SDK parses as a stream event, as ``LeanMessageEvents`` does: named, not
    ``ping``, not ``error`` (an error body, read through the guard as one), with data."""
    return sse.event not in (None, "ping", "error") and bool(sse.data)


def guarded_client(cls: type[Client], parsed: Callable[[Any], bool]) -> type[Client]:
    """``cls`` (an SDK's async client class) whose streams decode through :class:`GuardedEvents`. A
    subclass, not an attribute: ``with_options`` copies a client through its class."""

    def make(self: Any, *args: Any, **kwargs: Any) -> GuardedEvents:
        return GuardedEvents(cls._make_sse_decoder(self, *args, **kwargs), parsed)  # type: ignore[attr-defined]

    return cast("type[Client]", type(cls.__name__, (cls,), {"_make_sse_decoder": make}))


class _Turn:
    """What one turn's steps share: the request, its probe and state, the deadline, the opening
    task and the SDK's stream once open, whether a token came, and the Failed that ended the read."""

    __slots__ = ("deadline", "failed", "got_tokens", "loop", "opening", "probe", "request", "sdk", "state")

    def __init__(
        self, request: ChatRequest, probe: Probe, loop: asyncio.AbstractEventLoop, deadline: float | None
    ) -> None:
        self.request = request
        self.probe = probe
        self.loop = loop
        self.deadline = deadline  # on the loop's clock
        self.state = TurnState()
        self.opening: asyncio.Future[Any] | None = None
        self.sdk: Any = None
        self.got_tokens = False
        self.failed: ev.Failed | None = None


class _Clocks:
    """A turn's token-idle and deadline clocks (see the module doc).

    One timer per idle window, not one per chunk (a timeout scope per chunk costs ~10 us, which a
    load test of many streams would pay on every token). When a clock runs out while the stream
    loop waits for the next item, the task is cancelled there, and only there: never while the
    generator is suspended at a yield, in its consumer's code.
    """

    __slots__ = ("deadline", "fired", "handle", "idle", "last_token", "loop", "task", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: float | None, deadline: float | None) -> None:
        self.loop = loop
        self.idle = idle
        self.deadline = deadline
        self.last_token = loop.time()  # moved on by the stream loop at each token
        self.waiting = False  # the stream loop is awaiting the next item
        self.fired: ErrorKind | None = None  # TIMEOUT or DEADLINE once one ran out
        self.task = asyncio.current_task()
        self.handle: asyncio.TimerHandle | None = None
        self._arm()

    def _due(self) -> float | None:
        due = self.last_token + self.idle if self.idle else None
        if self.deadline is not None and (due is None or self.deadline < due):
            due = self.deadline
        return due

    def _arm(self) -> None:
        due = self._due()
        self.handle = None if due is None else self.loop.call_at(due, self._check)

    def _check(self) -> None:
        now = self.loop.time()
        due = self._due()
        if due is not None and now < due:  # a token came meanwhile: the window moved on
            self.handle = self.loop.call_at(due, self._check)
            return
        self.handle = None
        self.fired = ErrorKind.DEADLINE if self.deadline is not None and now >= self.deadline else ErrorKind.TIMEOUT
        if self.waiting and self.task is not None:
            self.task.cancel()  # lands in the awaited read: the stream loop turns it into the error

    def cancelled_us(self) -> bool:
        """Whether a CancelledError in the wait is this clock's own (then it is withdrawn), not the caller's."""
        return self.fired is not None and self.task is not None and self.task.uncancel() == 0

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class HostedBackend:
    provider: str
    api: str
    model: str
    base_url: str | None
    price: PriceRef | None = None  # where its turns' cost comes from (set by the registry; telemetry.cost)

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: str | None = None,
        api_key: str | None = None,
        key_env: str | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        max_connections: int | None = None,
    ) -> None:
        self.model = model
        self.provider = provider
        # Recorded and shown: credentials and query values masked. The SDK gets the address
        # without its query, and the query as default parameters (see telemetry.log.urls).
        self.base_url = redact_url(base_url)
        self._sdk_base_url, self._query = split_query(base_url)
        self.api_key = api_key
        self.key_env = key_env
        self.headers = dict(headers or {})
        # A server (or the HTTP library) may quote any of these in an error message: each is masked
        # there, and every turn's Failed event is masked with them too (backends.turn, telemetry.log.secrets).
        sent = (api_key, *header_secrets(self.headers), *url_secrets(base_url))
        self._secrets = Secrets(sent)
        remember(*sent)
        self.timeout_s = timeout_s
        self.http = InstrumentedHTTP(timeout_s, max_connections=max_connections, tls=needs_ca_bundle(base_url))

    def sdk_options(self) -> dict[str, Any]:
        """What both SDKs' clients take: our instrumented HTTP client, key, address, headers.

        With no key the SDK gets a placeholder that the request hook strips, so a local
        server gets no auth header and a key from the environment never leaks to it.
        """
        return {
            "api_key": self.api_key or NO_KEY,
            "base_url": self._sdk_base_url,
            "default_query": self._query or None,
            "http_client": self.http.client,
            "timeout": self.http.timeout,
            "default_headers": self.headers or None,
        }

    # --- for subclasses ------------------------------------------------------------------
    async def _open(self, request: ChatRequest, probe: Probe, state: TurnState) -> Any:
        """Send the request; return the SDK's stream (or, non-streamed, its response object)."""
        raise NotImplementedError

    def _translate(self, item: Any, t: int, state: TurnState) -> Iterable[ev.Event]:
        raise NotImplementedError

    def _finish(self, state: TurnState, probe: Probe, t: int) -> Iterable[ev.Event]:
        """Events after the stream ended normally: usage, then Finished (or Failed)."""
        raise NotImplementedError

    # One canned streamed answer in this API's wire format (see _warm_up).
    WARM_UP_BODY: bytes = b""
    _warmed: bool = False

    async def _warm_request(self, client: httpx2.AsyncClient) -> None:
        """Run one canned stream through the SDK (subclasses: the SDK call, consumed to the end)."""

    async def _warm_up(self) -> None:
        """Pay the SDK's first-use costs before the first request is sent, not inside TTFT.

        A process's first stream makes the SDK build its typed event models (up to ~90 ms,
        during which arriving bytes wait unread, so later tokens would be stamped late).
        Streaming one canned answer through the same SDK code path from an in-memory
        transport moves that cost before the first send: it shows as client-side time,
        never as server latency. Once per process and API.
        """
        cls = type(self)
        if cls._warmed or not cls.WARM_UP_BODY:
            return
        cls._warmed = True
        body = cls.WARM_UP_BODY

        def handler(request: httpx2.Request) -> httpx2.Response:
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            with contextlib.suppress(Exception):
                await self._warm_request(client)
        # The SDKs leave a large heap of long-lived objects (their typed models); a full
        # collection of it pauses every thread for 100s of ms, late-stamping whatever bytes
        # arrive meanwhile. Freezing what exists now keeps later collections small.
        gc.freeze()

    async def warm_up(self, extra: dict[str, Any] | None = None) -> None:
        """The first-use costs now, outside any turn: the chat calls this at start-up, while the user types.
        (``extra``, the turn settings' engine options, shapes a local model's load only.)

        Measured on a loopback server: a process's first turn spends ~50 ms between the call and
        its send without it, 2-3 ms (like every later turn) with it.
        """
        await self._warm_up()

    def _error_context(self, streaming_started: bool) -> ErrorContext:
        return ErrorContext(
            provider=self.provider,
            base_url=self.base_url,
            key_env=self.key_env,
            timeout_s=self.timeout_s,
            secrets=self._secrets,
            streaming_started=streaming_started,
        )

    # --- the turn ------------------------------------------------------------------------
    def _clock_failed(self, kind: ErrorKind, request: ChatRequest, got_tokens: bool) -> ev.Failed:
        """The turn ran out of one of its two clocks (see the module doc)."""
        phase = "in the middle of the answer" if got_tokens else "before the first token"
        kept = "The partial answer is kept; " if got_tokens else ""
        if kind is ErrorKind.DEADLINE:
            message = f"The turn passed its {request.settings.deadline_s or 0:g} s deadline {phase}."
            hint = f"{kept}allow more time with --deadline SECONDS."
        else:
            message = f"No new token for {self.timeout_s or 0:g} s {phase}; keepalives from the server do not count."
            hint = f"{kept}the server stalled: retry, or allow more time with --timeout SECONDS."
        return ev.Failed(ev.now_ns(), kind, message, None, hint[0].upper() + hint[1:])

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        """One turn in named steps, layered as httpx layers its sending: open the stream (the
        attempts' events go out live), read it with its two clocks, end it (the API's own end, or
        the one ``Failed`` that ends the turn instead), and close it on every exit."""
        loop = asyncio.get_running_loop()
        deadline_s = request.settings.deadline_s
        deadline = loop.time() + deadline_s if deadline_s else None  # from the call, warm-up included
        await self._warm_up()
        turn = _Turn(request, self.http.new_probe(), loop, deadline)
        try:
            # aclosing: a consumer that stops early closes each step at once (its clocks stopped)
            async with contextlib.aclosing(self._open_stream(turn)) as opening:
                async for e in opening:
                    yield e
            if turn.sdk is None:
                return  # it did not open: its Failed is out
            async with contextlib.aclosing(self._read_stream(turn)) as reading:
                async for e in reading:
                    yield e
            for e in self._end_stream(turn):
                yield e
        finally:
            await self._close_stream(turn)

    async def _open_stream(self, turn: _Turn) -> AsyncGenerator[ev.Event, None]:
        """Send the request (:meth:`_open`) and wait for its headers, yielding each attempt's events
        (sent, each wire step) as they happen, so the live line names the phase of the wait. On
        success ``turn.sdk`` holds the SDK's stream; otherwise the turn's Failed has been yielded."""
        probe, state = turn.probe, turn.state
        # Events are never yielded inside the deadline's scope, which would cancel the consumer's code
        # instead of the wait.
        opening = turn.opening = asyncio.ensure_future(self._open(turn.request, probe, state))
        # One event, set by each pushed wire event and by the opening's end: no task or
        # asyncio.wait per wake-up (~15 us each, several a request under a load test).
        wake = probe.wake = asyncio.Event()
        opening.add_done_callback(lambda _: wake.set())
        try:
            while True:
                async with asyncio.timeout_at(turn.deadline) as clock:
                    await wake.wait()
                if opening.done():
                    break
                for e in probe.drain():  # clears the event
                    yield e
            sdk = opening.result()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            for e in (*probe.drain(), *state.notices):
                yield e
            if turn.deadline is not None and clock.expired():
                yield self._clock_failed(ErrorKind.DEADLINE, turn.request, False)
            else:
                # A 200 whose complete body did not read (nested past the guard's depth, or Python's)
                # may still be the API's error object: the server's own words, kept.
                answer = self._error_answer(turn) if probe.status == 200 else None
                yield failed_from_exception(answer or exc, self._error_context(False), probe)
            return
        turn.sdk = sdk
        for e in (*probe.drain(), *state.notices):
            yield e

    async def _read_stream(self, turn: _Turn) -> AsyncGenerator[ev.Event, None]:
        """The answer's events: each item of the stream stamped with the arrival of its bytes and
        translated, under the token-idle and deadline clocks (see the module doc); or a complete
        (non-streamed) response's, at once. What ends the read early is left in ``turn.failed``."""
        probe, state, loop = turn.probe, turn.state, turn.loop
        clocks: _Clocks | None = None
        try:
            if not hasattr(turn.sdk, "__aiter__"):  # a complete (non-streamed) response
                for e in self._translate(turn.sdk, probe.stamp(), state):
                    turn.got_tokens = turn.got_tokens or isinstance(e, _TOKENS)
                    yield e
                return
            items = turn.sdk.__aiter__()
            clocks = _Clocks(loop, self.timeout_s or None, turn.deadline)  # the headers are in: the idle clock starts
            while clocks.fired is None:
                clocks.waiting = True
                try:
                    item = await items.__anext__()
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError:
                    clocks.waiting = False
                    if not clocks.cancelled_us():
                        raise
                    break
                clocks.waiting = False
                t = probe.stamp()
                for e in self._translate(item, t, state):
                    if isinstance(e, _TOKENS):
                        turn.got_tokens = True
                        clocks.last_token = loop.time()
                    yield e
                if state.failed is not None:
                    break
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # A body that was the API's error object in place of the answer is what failed, whatever
            # the SDK made of it.
            turn.failed = failed_from_exception(self._error_answer(turn) or exc, self._error_context(True), probe)
            return
        finally:
            if clocks is not None:
                clocks.stop()
        if clocks is not None and clocks.fired is not None and state.failed is None:
            turn.failed = self._clock_failed(clocks.fired, turn.request, turn.got_tokens)

    def _end_stream(self, turn: _Turn) -> Iterator[ev.Event]:
        """The turn's last events: the Failed that ended the read (an exception, a clock, an error
        event in the stream, a body that was an error object), else the API's own end (:meth:`_finish`)."""
        failed = turn.failed or turn.state.failed
        if failed is None and (answer := self._error_answer(turn)) is not None:
            failed = failed_from_exception(answer, self._error_context(True), turn.probe)
        if failed is not None:
            yield failed
            return
        yield from self._finish(turn.state, turn.probe, turn.probe.stamp())

    def _error_answer(self, turn: _Turn) -> ErrorAnswer | None:
        """The error the whole body stated, when no token came and the body was one JSON error object
        (or one too long to keep, read from its start: a hostile part after the server's message)."""
        if turn.got_tokens:
            return None
        probe = turn.probe
        return error_answer(probe.cut_head, cut=True) if probe.cut_head else error_answer(probe.body_head)

    async def _close_stream(self, turn: _Turn) -> None:
        """Close the HTTP stream on every exit (cancelled, abandoned, failed or done), so the server
        stops generating at once; an opening still in flight is cancelled first."""
        opening, sdk = turn.opening, turn.sdk
        if opening is not None and sdk is None:
            if not opening.done():
                opening.cancel()  # cancelled, or past the deadline, while connecting or waiting for headers
                await asyncio.wait((opening,))
            if not opening.cancelled() and opening.exception() is None:
                sdk = opening.result()  # it opened just as the turn ended: closed below
        self.http.release(turn.probe)
        close = getattr(sdk, "close", None)
        if close is not None:
            # Shielded so a cancellation cannot leave the connection (and the server's generation) open.
            await asyncio.shield(close())

    async def aclose(self) -> None:
        await self.http.aclose()
