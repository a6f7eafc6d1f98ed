"""A tool-using turn's steps and its split, as its record keeps them (``TurnRecord.steps`` and ``.agent``).

``telemetry.agent.steps`` makes them from a turn's model records and tool runs; ``ttft proxy`` makes them
from an app's calls (``telemetry.proxy.sessions``). Each step is a frozen record of its kind:
:class:`ModelStepRecord`, :class:`ToolStepRecord` or :class:`ApprovalStepRecord` (a wait for a person's
answer), told apart by ``isinstance`` or by ``kind``; :class:`AgentSummary` is the turn's split.

Their ``to_dict`` is the JSON the log has always held (``steps`` and ``agent`` of ``ttft.turn/2``,
docs/log-schema.md), and :func:`steps_from_json` and ``AgentSummary.from_dict`` read it back, old lines
included, each field checked against its annotation (``telemetry.typed_read``). A damaged or hand-edited
line loses only what is wrong in it: a field of the wrong type takes its default, and a step that is no
object or of no known kind is left out, so the rest of the turn still reads, exports and draws.

Fields only the proxy fills (a model step's ``call_index`` and ``retry``; a tool step's ``timing``,
``gap_ms``, ``span_source`` and ``matched_by``; the summary's ``time_in_app_ms``) are None elsewhere and
then absent from the JSON, as are the approval figures of a turn nobody was asked about.

The same records describe a turn in flight (``telemetry.agent.steps.live_steps``): a step still under
way has status ``running``, a wait still being answered has ``answer`` None. Those are never logged.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from .metrics import TokenCounts
from .typed_read import RecordError, build, convert, field_types, kind_of
from .wire import WaitSplit

# How the loop ended: a final answer, the step limit, a call that was not allowed, the model's failure, Esc.
Stopped = Literal["answer", "max_steps", "denied", "error", "cancelled"]
RUNNING = "running"  # the status of a step still under way (a live view's, never logged)


def _plain(obj: Any, optional: frozenset[str]) -> dict[str, Any]:
    """The record's fields in their order, nested ones as their own JSON; ``optional`` ones only when set."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if v is None and f.name in optional:
            continue
        out[f.name] = v.to_dict() if isinstance(v, TokenCounts | WaitSplit) else v
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelStepRecord:
    """One model call: its span on the turn's clock (ms from the first send) and its own figures."""

    kind: ClassVar[Literal["model"]] = "model"
    start_ms: float | None = None
    end_ms: float | None = None
    duration_ms: float | None = None
    status: str = "ok"  # the call's record status, or ``running``
    stop_reason: str | None = None
    attempts: int = 1
    ttft_ms: float | None = None
    ttfvt_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    wait_ms: WaitSplit | None = None
    server_queue_ms: float | None = None
    server_ttft_ms: float | None = None
    server_rest_ms: float | None = None
    server_timing_source: str | None = None
    tokens: TokenCounts | None = None
    tool_calls: int = 0  # how many tools it asked for
    call_index: int | None = None  # ttft proxy: the app's call it was
    retry: bool | None = None  # ttft proxy: a retry of the step before

    _OPTIONAL: ClassVar[frozenset[str]] = frozenset({"call_index", "retry"})

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "model", **_plain(self, self._OPTIONAL)}


@dataclass(frozen=True, slots=True, kw_only=True)
class _CallSpan:
    """What a tool step and a wait for approval share: the call's span, its tool and server, its id."""

    start_ms: float | None = None
    end_ms: float | None = None
    name: str = ""
    server: str = ""
    call_id: str = ""
    duration_ms: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStepRecord(_CallSpan):
    """One tool call as run: its span, name and server, how it ended, and its result's size before any cut."""

    kind: ClassVar[Literal["tool"]] = "tool"
    status: str = "ok"  # ok, error, denied, cancelled, refused; or ``running``
    result_bytes: int = 0
    truncated: bool = False
    # ttft proxy: how the app's step was timed ("gap": the whole gap between calls; "span": the app's own
    # span), where that span came from and how it was matched, and the gap it ran in
    timing: Literal["gap", "span"] | None = None
    gap_ms: float | None = None
    span_source: str | None = None
    matched_by: str | None = None

    _OPTIONAL: ClassVar[frozenset[str]] = frozenset({"timing", "gap_ms", "span_source", "matched_by"})

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "tool", **_plain(self, self._OPTIONAL)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalStepRecord(_CallSpan):
    """The wait for a person's answer before a call ran, and the answer (None while they are asked)."""

    kind: ClassVar[Literal["approval"]] = "approval"
    answer: Literal["once", "always", "deny", "cancelled"] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "approval", **_plain(self, frozenset())}


StepRecord = ModelStepRecord | ToolStepRecord | ApprovalStepRecord
S = TypeVar("S", ModelStepRecord, ToolStepRecord, ApprovalStepRecord)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSummary:
    """A tool-using turn's split, from its first send to its last step's end: in the model, in tools, and
    the rest (ttft's own work between steps; for a proxied app, the app's own time, ``time_in_app_ms``,
    and ttft's is 0), with its step counts and how the loop ended. ``max_steps`` 0: no cap known."""

    time_in_model_ms: float = 0.0
    time_in_tools_ms: float = 0.0
    time_in_ttft_ms: float = 0.0
    time_in_approval_ms: float | None = None  # a person deciding; None when nobody was asked
    step_count: int = 0  # model and tool steps (a wait for approval is not a step of the loop)
    model_steps: int = 0
    tool_steps: int = 0
    max_steps: int = 0
    stopped: Stopped = "answer"
    approval_steps: int | None = None
    time_in_app_ms: float | None = None  # ttft proxy: the app's own time between its calls

    _OPTIONAL: ClassVar[frozenset[str]] = frozenset({"time_in_approval_ms", "approval_steps", "time_in_app_ms"})

    @property
    def between_steps(self) -> tuple[Literal["app", "ttft"], float]:
        """Whose the time between steps is, and how long: the app's in a proxied session, else ttft's."""
        if self.time_in_app_ms is not None:
            return "app", self.time_in_app_ms
        return "ttft", self.time_in_ttft_ms

    def to_dict(self) -> dict[str, Any]:
        return _plain(self, self._OPTIONAL)

    @classmethod
    def from_dict(cls, data: object) -> AgentSummary:
        """From a record's ``agent`` (untrusted: an old or hand-edited log; see the module doc). A RecordError
        only when it is no object."""
        return _read(cls, data, "agent")


R = TypeVar("R", ModelStepRecord, ToolStepRecord, ApprovalStepRecord, AgentSummary)


def _read(cls: type[R], data: object, where: str) -> R:
    """``cls`` from its JSON: every field checked at once, and where one is wrong, each on its own, a
    wrong one left at its default."""
    try:
        return build(cls, data, where)
    except RecordError:
        if not isinstance(data, Mapping):
            raise
    hints = field_types(cls)
    kept: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if (v := data.get(f.name)) is not None:
            with contextlib.suppress(RecordError):
                kept[f.name] = convert(hints[f.name], v, f"{where}.{f.name}")
    return cls(**kept)


def step_from_dict(data: object, where: str = "step") -> StepRecord:
    """One step from its JSON, by its ``kind``; a RecordError when it is no object or of no known kind."""
    if not isinstance(data, Mapping):
        raise RecordError(f"{where} is {kind_of(data)}, not an object")
    match kind := data.get("kind"):
        case "model":
            return _read(ModelStepRecord, data, where)
        case "tool":
            return _read(ToolStepRecord, data, where)
        case "approval":
            return _read(ApprovalStepRecord, data, where)
    shown = repr(kind)[:40] if isinstance(kind, str) else kind_of(kind)
    raise RecordError(f"{where}.kind is {shown}, not one of 'model', 'tool', 'approval'")


def steps_from_json(value: object, where: str = "steps") -> tuple[StepRecord, ...]:
    """A record's ``steps`` list read back (absent, null or no list: none), each step that is one."""
    if not isinstance(value, list | tuple):
        return ()
    out: list[StepRecord] = []
    for i, s in enumerate(value):
        with contextlib.suppress(RecordError):
            out.append(step_from_dict(s, f"{where}[{i}]"))
    return tuple(out)


def of_kind(steps: Iterable[StepRecord], cls: type[S]) -> list[S]:
    """The steps of one kind, in order: ``of_kind(rec.steps, ToolStepRecord)``."""
    return [s for s in steps if isinstance(s, cls)]


def step_count(steps: Sequence[StepRecord]) -> int:
    """The model and tool steps among these, as ``AgentSummary.step_count`` counts them: a wait for a
    person's approval is not a step of the loop."""
    return sum(1 for st in steps if not isinstance(st, ApprovalStepRecord))
