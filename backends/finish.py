"""The one way a turn ends: finish the recorder, write the record to the log, hand it to every sink.

Chat, ask, compare, bench (and probe) all end their turns here, so every turn reaches the
same places in the same order: the session log first (a line is never lost to a sink),
then each registered sink (the live OpenTelemetry push, registered by the CLI through
:mod:`backends.otel.push`). A sink must be cheap and must not block: it is called on the
thread that ran the turn, right after the last stamp. A sink that raises is ignored.

Ending a turn twice is harmless: the second call returns the record the first one
delivered, without logging it or sinking it again.

A batch of ended turns (a bench's finisher) goes through :func:`finish_turns`: the same path
for each, with the turns' ITL percentiles computed together first (one numpy call per distinct
answer length rather than one per turn).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

from ..telemetry.log.turns import LogWriteError, SessionLog
from ..telemetry.metrics import Percentiles, itl_gaps, percentiles_many
from ..telemetry.record import TurnRecord
from ..telemetry.recorder import TurnRecorder

Sink = Callable[[TurnRecord], None]

_sinks: list[Sink] = []
_lock = threading.Lock()  # recorders end on several threads (the chat's runner, compare, bench workers)


def add_sink(sink: Sink) -> Callable[[], None]:
    """Send every turn that ends from now on to ``sink``; returns a function that removes it."""
    with _lock:
        _sinks.append(sink)

    def remove() -> None:
        with _lock, contextlib.suppress(ValueError):
            _sinks.remove(sink)

    return remove


def finish_turn(recorder: TurnRecorder, log: SessionLog | None = None) -> TurnRecord:
    """The turn's record as logged (its index settled by the log) and as every sink saw it.

    A log write that fails does not lose the turn: the record is still returned and sunk, the
    failure is in ``log.write_errors`` and its message in ``recorder.log_error``.
    """
    return _deliver(recorder, log, None)


def finish_turns(recorders: Sequence[TurnRecorder], log: SessionLog | None = None) -> list[TurnRecord]:
    """``[finish_turn(r, log) for r in recorders]``, the same records, logged and sunk in that order.

    The ended turns not yet finished get their ITL percentiles from one ``percentiles_many``.
    A turn still open is left to compute its own: its chunks could still grow until it is closed.
    """
    # Read without the lock: a turn another thread finishes meanwhile keeps its own record, and
    # the figures computed for it here are unused (finish() uses them on its first call only).
    batch = [r for r in recorders if r.delivered is None and not r.finished and r.done]
    itl = dict(zip(map(id, batch), percentiles_many([itl_gaps(r.chunks) for r in batch]), strict=True))
    return [_deliver(r, log, itl.get(id(r))) for r in recorders]


def deliver_record(record: TurnRecord, log: SessionLog | None = None) -> tuple[TurnRecord, str | None]:
    """A record made from several recorders (a tool-using turn: ``backends.agent.loop``), logged and sunk
    as :func:`finish_turn` does one recorder's; returns it as logged and why the log write failed, if it did."""
    error: str | None = None
    with _lock:
        if log is not None:
            try:
                logged = log.append(record)
                if isinstance(logged, TurnRecord):
                    record = logged
            except LogWriteError as exc:
                error = str(exc)
        sinks = tuple(_sinks)
    for sink in sinks:
        with contextlib.suppress(Exception):
            sink(record)
    return record, error


def _deliver(recorder: TurnRecorder, log: SessionLog | None, itl_ms: Percentiles | None) -> TurnRecord:
    with _lock:
        if recorder.delivered is not None:
            return recorder.delivered
        record = recorder.finish(itl_ms)
        if log is not None:
            try:
                logged = log.append(record)
                if isinstance(logged, TurnRecord):
                    record = logged
            except LogWriteError as exc:  # the turn stays on screen and in memory; the front end says so
                recorder.log_error = str(exc)
        recorder.delivered = record
        sinks = tuple(_sinks)
    for sink in sinks:
        with contextlib.suppress(Exception):  # a sink's bug never costs a turn
            sink(record)
    return record
