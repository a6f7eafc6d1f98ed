"""The event vocabulary of one turn.

Backends translate each provider's wire into these events. Every event carries
``t_ns``: a ``time.monotonic_ns()`` reading taken by the backend as close to the
socket as it can (when the bytes arrived, not when a consumer got round to them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .errors import ErrorKind, describe
from .wire import HttpInfo


def now_ns() -> int:
    """The one clock every event is stamped with."""
    return time.monotonic_ns()


def wall_offset_ns() -> int:
    """The wall clock less :func:`now_ns`, now: a monotonic stamp plus this is the wall clock (ns since the
    epoch). The wall clock is read between two monotonic readings and the tightest of a few tries is kept,
    so a thread switch or a preemption between the reads (milliseconds on a busy machine) moves no record's
    ``sent_at``, and records read back on one clock (``ttft proxy --watch``) stay where they were."""
    best: tuple[int, int] | None = None  # (the bracket's width, the offset it gives)
    for _ in range(4):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        width = after - before
        if best is None or width < best[0]:
            best = (width, wall - (before + after) // 2)
        if width < 20_000:  # 20 µs: the reads were not split
            break
    assert best is not None
    return best[1]


@dataclass(frozen=True, slots=True)
class Event:
    t_ns: int


@dataclass(frozen=True, slots=True)
class Submitted(Event):
    """The user asked: Enter in the chat, the start of ``ttft ask``.

    From here to the first AttemptSent is ttft's own delay (``own_delay_ms``): what the
    user waits for before any server is involved. Never part of TTFT.
    """


@dataclass(frozen=True, slots=True)
class RequestQueued(Event):
    """The client wanted to send; any time until the first attempt is client-side queueing."""


@dataclass(frozen=True, slots=True)
class ModelLoadStarted(Event):
    """A local model started loading: its own phase, never part of TTFT."""

    what: str = ""


@dataclass(frozen=True, slots=True)
class ModelLoadFinished(Event):
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class McpStarted(Event):
    """The turn's MCP servers were started (spawned, initialized, their tools listed) from ``start_ns`` to
    ``t_ns``, before the first send: the servers' time, never counted as ttft's own delay."""

    start_ns: int = 0


@dataclass(frozen=True, slots=True)
class AttemptSent(Event):
    """One HTTP attempt (or one local generate call) was handed to the network/engine."""

    attempt: int = 1


@dataclass(frozen=True, slots=True)
class HeadersReceived(Event):
    attempt: int = 1
    status: int = 200
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class WireStep(Event):
    """One HTTP attempt entered a phase of getting its response (``telemetry.wire.PHASES``) at ``t_ns``.

    Emitted live, as the HTTP layer reaches each step, so the waiting line can name it.
    """

    attempt: int = 1
    phase: str = "pool"


@dataclass(frozen=True, slots=True)
class HttpResponse(Event):
    """What an attempt's response headers and connection said (``telemetry.wire.HttpInfo``), values bounded."""

    attempt: int = 1
    info: HttpInfo = field(default_factory=HttpInfo)


@dataclass(frozen=True, slots=True)
class ReasoningDelta(Event):
    """Reasoning text (thinking, reasoning summary, ``<think>`` content).

    ``tokens`` is exact when the backend knows it (local tokenizer); None means
    the recorder estimates it from the text.
    """

    text: str = ""
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class TextDelta(Event):
    """Visible answer text."""

    text: str = ""
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCallDelta(Event):
    """A piece of a tool call the model asks for: its name (on the call's first piece) and/or a piece
    of its arguments (JSON text, streamed in fragments). ``index`` is the call's place in the answer
    as the API numbers it (Chat Completions ``tool_calls[].index``, Responses ``output_index``,
    Anthropic's block ``index``), None where the API gives none: the recorder joins the pieces of
    one call by it (``TurnRecorder.tool_calls``). ``call_id`` is the API's id for the call (Chat
    ``tool_calls[].id``, Responses ``call_id``, Anthropic ``tool_use.id``), on the piece that carries
    it: the tool's result goes back to the model under that id."""

    name: str = ""
    arguments: str = ""
    tokens: int | None = None
    index: int | None = None
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class Usage(Event):
    """Token counts as the server reported them. ``output`` includes ``reasoning``; ``input`` includes
    ``cached_input`` (read from a provider's cache) and ``cache_write_input`` (written to it)."""

    input: int | None = None
    cached_input: int | None = None
    output: int | None = None
    reasoning: int | None = None
    cache_write_input: int | None = None


@dataclass(frozen=True, slots=True)
class ServerTimings(Event):
    """Timings the server or engine reported, kept under the names it uses."""

    source: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notice(Event):
    """Something the backend did differently from what was asked, and why (e.g. a dropped option).

    Collected into the record's ``notices`` under ``key`` (a later one with the same key wins);
    ``value`` must be JSON-serialisable.
    """

    key: str = ""
    value: Any = None


@dataclass(frozen=True, slots=True)
class Finished(Event):
    """The stream closed normally."""

    stop_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Failed(Event):
    """The turn failed: its kind (``telemetry.errors``; a class name only for an exception nobody expected),
    one sentence that says what happened, the HTTP status where there was one, and what to try."""

    error_type: ErrorKind | str = "error"
    message: str = ""
    status_code: int | None = None
    hint: str | None = None

    @classmethod
    def of(cls, exc: BaseException, t_ns: int | None = None) -> Failed:
        """The turn's end for an exception that no provider's table reads (``telemetry.errors.describe``):
        one of ttft's own gives its kind and hint; any other, its class name (a bug, said as one)."""
        kind, message, hint = describe(exc)
        return cls(now_ns() if t_ns is None else t_ns, kind, message, None, hint)


@dataclass(frozen=True, slots=True)
class Cancelled(Event):
    pass


TokenEvent = ReasoningDelta | TextDelta | ToolCallDelta
TERMINAL = (Finished, Failed, Cancelled)


@dataclass(frozen=True, slots=True)
class DraftProgress(Event):
    """Speculative decoding so far in this turn (the local engine, at most every 100 ms).

    ``drafted`` tokens were proposed, ``accepted`` of them kept; ``steps`` decode steps
    (each verifying one draft, or a plain step where there was none).
    """

    drafted: int = 0
    accepted: int = 0
    steps: int = 0
