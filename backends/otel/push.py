"""Live OpenTelemetry: every finished turn pushed to an OTLP/HTTP collector, off the hot path.

Configured by the standard variables only, so a user's existing set-up just works:
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT`` / ``..._METRICS_ENDPOINT`` for one
signal), ``OTEL_EXPORTER_OTLP_HEADERS``, ``..._TIMEOUT``, ``..._COMPRESSION``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SDK_DISABLED`` and ``OTEL_{TRACES,METRICS}_EXPORTER=none``; the
SDK's own environment handling reads them. With no endpoint set nothing is sent and the SDK is
never imported (the chat's first turn is measured in ms).

The sink (:func:`backends.finish.add_sink`) only puts the finished record on a bounded queue;
a thread of its own imports the SDK (at the first turn, or at once with ``eager``), turns the
record into spans and histogram points through :mod:`telemetry.export.genai` (the mapping the file
export uses too) and hands them to the SDK's batch span processor and periodic metric reader,
which export from their own threads. So a collector that is down or slow never delays a turn,
a stamp or the log line. At exit the queues get a short bounded flush (``CLOSE_TIMEOUT_S``),
and what did not arrive is said once, on stderr.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping

from ...telemetry.export import genai
from ...telemetry.log.urls import redact_url
from ...telemetry.record import TurnRecord
from ..finish import add_sink
from .sdk import Sdk, Signals

QUEUE_TURNS = 1024  # finished turns waiting for the export thread; past this they are dropped, and counted
CLOSE_TIMEOUT_S = 2.0  # the most the process's exit waits for a collector


def _on(env: Mapping[str, str], name: str) -> bool:
    return bool(env.get(name, "").strip())


def _exporter_off(env: Mapping[str, str], signal: str) -> bool:
    return env.get(f"OTEL_{signal}_EXPORTER", "").strip().lower() == "none"


def configured(env: Mapping[str, str] = os.environ) -> Signals | None:
    """Which signals the standard variables ask for; None when nothing is to be sent."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    base = _on(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    traces = (base or _on(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) and not _exporter_off(env, "TRACES")
    metrics = (base or _on(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")) and not _exporter_off(env, "METRICS")
    if not (traces or metrics):
        return None
    where = (
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        or ""
    )
    shown = "".join(ch if ch.isprintable() else "?" for ch in redact_url(where.strip()) or "")  # for stderr
    return Signals(bool(traces), bool(metrics), shown or "the collector")


class LivePush:
    """The sink: a bounded queue of finished turns and the thread that exports them."""

    def __init__(self, signals: Signals, *, capture_content: bool = False) -> None:
        self.signals = signals
        self.capture_content = capture_content
        self._queue: queue.Queue[TurnRecord | threading.Event | None] = queue.Queue(QUEUE_TURNS)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._ready = threading.Event()
        self._sdk: Sdk | None = None
        self.problem: str | None = None  # why nothing could be exported at all (the SDK missing, ...)
        self.queue_full = 0  # turns dropped at the door (counted on the turns' threads)
        self.failed = 0  # turns the export thread could not convert (counted there)
        self.turns = 0
        self.closed = False
        self.remove: Callable[[], None] | None = None  # takes the sink off backends.finish

    # --- the hot path: cheap, never blocks --------------------------------------------------
    def __call__(self, record: TurnRecord) -> None:
        if self.closed:
            return
        self.start()
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.queue_full += 1

    def start(self) -> None:
        """Start the export thread (it imports the SDK): at the first turn, or earlier when asked."""
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ttft-otel", daemon=True)
                self._thread.start()

    # --- the export thread ------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._sdk = Sdk(self.signals)
        except ImportError:
            self.problem = "the OpenTelemetry SDK is not installed (pip install 'ttft[otel]')"
        except Exception as exc:  # a bad variable (an unparsable header list, ...): said at exit
            self.problem = f"could not set up the exporter: {type(exc).__name__}: {exc}"
        finally:
            self._ready.set()
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):  # a flush marker: everything before it is handed over
                item.set()
                continue
            if self._sdk is None:
                self.failed += 1
                continue
            try:
                self._sdk.emit(item, self.capture_content)
                self.turns += 1
            except Exception:  # one odd record must not stop the others
                self.failed += 1

    # --- the end ----------------------------------------------------------------------------
    def flush(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Export what is queued, waiting at most ``timeout_s`` (a bench worker's level end, exit)."""
        if self._thread is None or not self._thread.is_alive():
            return
        deadline = time.monotonic() + timeout_s
        marker = threading.Event()
        try:
            self._queue.put(marker, timeout=timeout_s)
        except queue.Full:
            return
        marker.wait(max(0.0, deadline - time.monotonic()))
        if self._sdk is not None:
            _bounded(self._sdk.force_flush, deadline - time.monotonic())

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> str | None:
        """Flush within ``timeout_s``, stop, and return the one line saying what was not delivered
        (None: everything was)."""
        if self.closed:
            return None
        self.closed = True
        if self.remove is not None:
            self.remove()
        deadline = time.monotonic() + timeout_s
        self.flush(timeout_s)
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)  # the thread ends; a stuck one dies with the process (daemon)
        if self._thread is not None:  # it ends at once once the queue is drained: a short floor
            self._thread.join(max(0.1, deadline - time.monotonic()))
        if self._sdk is not None:
            # The SDK's own threads (batch span worker, periodic metric reader) would otherwise go on
            # exporting, and retrying a dead collector, for as long as the process lives.
            # Started even with no time left: it ends the SDK's retries in the background.
            t = threading.Thread(target=self._sdk.shutdown, name="ttft-otel-shutdown", daemon=True)
            t.start()
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                self._sdk.stop_exporters()
        return self.report()

    def report_at_close(self) -> None:
        """Close (bounded) and say on stderr, once, what did not reach the collector."""
        line = self.close()
        if line:
            print(line, file=sys.stderr)

    def unexported(self) -> int:
        """Turns still waiting in the queue."""
        with self._queue.mutex:
            return sum(isinstance(x, TurnRecord) for x in self._queue.queue)

    def report(self) -> str | None:
        if self.problem:
            return f"ttft: OpenTelemetry: nothing sent: {self.problem}"
        lost: list[str] = []
        dropped = self.queue_full + self.failed + self.unexported()
        if dropped:
            lost.append(f"{dropped} turn{'s' if dropped != 1 else ''} not exported")
        if self._sdk is not None:
            spans = self._sdk.spans_emitted - self._sdk.spans_exporter.delivered
            if spans > 0:
                lost.append(f"{spans} of {self._sdk.spans_emitted} spans not delivered")
            if self._sdk.metrics_exporter is not None and self._sdk.metrics_exporter.failed:
                lost.append(f"{self._sdk.metrics_exporter.failed} metric exports failed")
        if not lost:
            return None
        return f"ttft: OpenTelemetry ({self.signals.endpoint}): " + "; ".join(lost)


def _bounded(fn: Callable[[], object], timeout_s: float) -> None:
    """``fn()`` on a daemon thread, waited for at most ``timeout_s``: the SDK's flush ignores its timeout."""
    if timeout_s <= 0:
        return
    t = threading.Thread(target=fn, name="ttft-otel-flush", daemon=True)
    t.start()
    t.join(timeout_s)


# --- one per process ------------------------------------------------------------------------
_installed: LivePush | None = None
_install_lock = threading.Lock()


def install(env: Mapping[str, str] = os.environ, *, eager: bool = False) -> LivePush | None:
    """Register the live push as a sink when the variables ask for one (once per process); None when
    they do not. ``eager``: import the SDK now (a bench, before anything is timed), not at the first
    turn's end. At exit it flushes for at most ``CLOSE_TIMEOUT_S`` and says once what was lost."""
    global _installed
    with _install_lock:
        push = _installed
        if push is None:
            signals = configured(env)
            if signals is None:
                return None
            # The SDK imports this module, which registers an exit hook: a `ttft ask` may be exiting
            # by the time the export thread imports the SDK, and then no hook can be registered.
            import concurrent.futures.thread  # noqa: F401

            push = _installed = LivePush(signals, capture_content=genai.capture_content(env))
            push.remove = add_sink(push)
            atexit.register(_at_exit, push)
    if eager:
        push.start()
    return push


def _at_exit(push: LivePush) -> None:
    push.report_at_close()


def installed() -> LivePush | None:
    return _installed


def uninstall(timeout_s: float = CLOSE_TIMEOUT_S) -> str | None:
    """Close and forget the process's push (tests); returns its report line."""
    global _installed
    with _install_lock:
        push, _installed = _installed, None
    return push.close(timeout_s) if push is not None else None
