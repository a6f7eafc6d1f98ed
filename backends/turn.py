"""Run one turn: consume a backend's events, feed the recorder, log the record.

This is the single loop every front end (``ttft ask``, the chat, compare, bench)
uses, so a turn is recorded the same way everywhere, including when it fails or
is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from ..telemetry import events as ev
from ..telemetry.log.crashes import with_report
from ..telemetry.log.secrets import masked
from ..telemetry.log.surrogates import scrub, scrub_event
from ..telemetry.log.turns import SessionLog
from ..telemetry.log.urls import redact_url
from ..telemetry.probe.saved import SavedProbe
from ..telemetry.probe.store import saved_probe as saved_probe_for
from ..telemetry.record import TurnRecord
from ..telemetry.recorder import TurnRecorder
from .base import Backend, ChatRequest
from .finish import finish_turn


def new_recorder(
    backend: Backend,
    request: ChatRequest,
    *,
    session_id: str,
    turn_index: int,
    extra: dict[str, Any] | None = None,
    saved_probe: bool = True,
    probe: SavedProbe | None = None,
) -> TurnRecorder:
    """The recorder for one turn. ``saved_probe``: split the server's wait with this target's saved
    ``ttft probe`` when there is one (telemetry.probe.saved); the probe's own turns say False.
    ``probe``: that probe, already looked up (:func:`target_probe`; the load driver, once a level)."""
    if probe is None and saved_probe:
        probe = target_probe(backend)
    return TurnRecorder(
        session_id=session_id,
        turn_index=turn_index,
        provider=backend.provider,
        api=backend.api,
        model=backend.model,
        base_url=redact_url(backend.base_url),  # never a URL's credentials or query values, whoever built it
        settings=request.settings,
        prompt=scrub(request.prompt),  # argv's undecodable bytes arrive as lone surrogates
        input_chars=sum(len(m.text()) for m in request.messages),
        extra=dict(extra or {}),
        probe=probe,
        attachments=tuple(a.info(backend.api) for a in request.attachments),
        price=getattr(backend, "price", None),  # telemetry.cost.PriceRef, set by the registry; None: not priced
    )


def target_probe(backend: Backend) -> SavedProbe | None:
    """The ``ttft probe`` saved for this backend's target, or None. The in-process engine reports its
    own prefill, so its wait is never split by a guess, and it has no queue to blame for the rest."""
    if backend.provider == "local":
        return None
    return saved_probe_for(backend.provider, backend.model, backend.base_url)


async def warm_up(backend: Backend, extra: dict[str, Any] | None = None) -> None:
    """Pay a backend's first-use costs before any turn: ``warm_up()`` where it has one (the SDK's first
    stream), else ``load()`` (a local model: the turns after it then have no load phase). ``extra``: the
    turn settings' extra, whose engine options (GPU layers, threads, flash attention) a load follows, so
    that the first turn does not load again.

    Best effort: a failure here is met again, and recorded, by the first turn.
    """
    warm = getattr(backend, "warm_up", None) or getattr(backend, "load", None)
    if warm is None:
        return
    with contextlib.suppress(Exception):
        await (warm(extra) if extra else warm())


async def stream_turn(
    backend: Backend,
    request: ChatRequest,
    recorder: TurnRecorder,
    *,
    on_event: Callable[[ev.Event], None] | None = None,
) -> None:
    """Drive the stream to its end, leaving ``recorder`` done but the turn not yet ended: the caller
    ends it (:func:`backends.finish.finish_turn`). The load driver ends its turns later, off the
    streams' path. Cancellation closes the stream, records ``Cancelled`` and re-raises; any other
    exception from the backend is recorded as ``Failed``, never raised.
    """
    stream = backend.stream(request)
    try:
        async for e in stream:
            e = scrub_event(e)  # here, once, for every front end: lone surrogates never reach a file or a terminal
            if type(e) is ev.Failed:  # and no known secret reaches the record, the log, stderr or the screen
                e = masked(e)
            recorder.feed(e)
            if on_event is not None:
                on_event(e)
    except asyncio.CancelledError:
        recorder.feed(ev.Cancelled(ev.now_ns()))
        raise
    except Exception as exc:  # a backend bug must still leave a record, never a lost turn
        recorder.feed(masked(with_report(ev.Failed.of(exc), exc, "a turn")))
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


async def run_turn(
    backend: Backend,
    request: ChatRequest,
    recorder: TurnRecorder,
    *,
    log: SessionLog | None = None,
    on_event: Callable[[ev.Event], None] | None = None,
    before_finish: Callable[[TurnRecorder], None] | None = None,
) -> TurnRecord:
    """Drive the stream to its end (:func:`stream_turn`) and end the turn, also when it is cancelled,
    which then re-raises. ``before_finish``: given the recorder once the stream is over, before the
    record is made (the API sets the loop's lag on it there).

    Returns the record as logged (:func:`backends.finish.finish_turn`, which also hands it to the
    sinks). A log write that fails does not lose the turn: the record is still returned, and the
    failure is in ``log.write_errors`` and ``recorder.log_error`` for the front end to report.
    """
    try:
        await stream_turn(backend, request, recorder, on_event=on_event)
    finally:
        if before_finish is not None:
            before_finish(recorder)
        record = finish_turn(recorder, log)
    return record
