"""Run the probe's plan against one backend: every request a normal, recorded turn; then the fit.

Turns go through :func:`backends.turn.run_turn`, so each is the same ``ttft.turn``
record as in the chat (logged when a log is given). The probe's own turns are
never split with an earlier saved probe: they are what a new one is made of.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...telemetry.errors import TtftError
from ...telemetry.log.turns import SessionLog, new_session_id
from ...telemetry.probe.fit import engine_prefill_per_1k, fit_probe
from ...telemetry.probe.result import Estimate, ProbeFit, ProbePoint
from ...telemetry.record import TurnRecord
from ...telemetry.settings import TurnSettings
from ..base import Backend, ChatRequest, Message
from ..turn import new_recorder, run_turn
from .plan import Schedule, Step, prompt_text

# The engine's own prompt-eval time, by the ServerTimings source that carries it.
ENGINE_PREFILL_KEYS = {"llama.cpp": "prompt_eval_ms", "llama-server": "prompt_ms"}


@dataclass(frozen=True, slots=True)
class ProbeRun:
    plan: Schedule
    fit: ProbeFit
    engine_prefill_per_1k: Estimate | None  # llama.cpp's t_p_eval per 1k tokens, where the engine reports it
    records: tuple[dict[str, Any], ...]
    session_id: str


class WarmupFailed(TtftError, RuntimeError):
    """The first request failed: the probe stops before it spends the plan."""


def _engine_prefill_ms(record: TurnRecord) -> float | None:
    for source, key in ENGINE_PREFILL_KEYS.items():
        v = (record.server or {}).get(source, {}).get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    return None


def point_of(step: Step, record: TurnRecord) -> ProbePoint:
    """One measured turn as a fit's point (the server's usage counts, or the estimate, as recorded)."""
    assert step.kind is not None
    m, t = record.metrics, record.tokens
    return ProbePoint(
        kind=step.kind,
        group=step.group,
        trial=step.trial,
        input_tokens=t.input,
        cached_tokens=t.cached_input,
        output_tokens=t.output,
        ttft_ms=m.ttft_ms,
        e2e_ms=m.e2e_ms,
        tpot_ms=m.tpot_ms,
        tokens_source=t.source,
        server_prefill_ms=_engine_prefill_ms(record),
        status=record.status,
    )


async def run_steps(
    backend: Backend,
    plan: Schedule,
    *,
    log: SessionLog | None = None,
    on_turn: Callable[[int, Step, TurnRecord], None] | None = None,
    settings: TurnSettings | None = None,
) -> ProbeRun:
    """Every step of ``plan`` in order, then the fit of the points. WarmupFailed when the first request fails."""
    base = settings or TurnSettings()
    session_id = log.session_id if log is not None else f"probe-{new_session_id()}"
    points: list[ProbePoint] = []
    records: list[dict[str, Any]] = []
    for i, step in enumerate(plan.steps):
        request = ChatRequest(
            (Message("user", prompt_text(step)),), base.with_(max_output_tokens=step.max_output_tokens)
        )
        extra = {"probe_point": {"kind": step.kind or "warmup", "group": step.group, "trial": step.trial}}
        recorder = new_recorder(backend, request, session_id=session_id, turn_index=i, extra=extra, saved_probe=False)
        record = await run_turn(backend, request, recorder, log=log)
        records.append(record.to_dict())
        if on_turn is not None:
            on_turn(i, step, record)
        if step.warmup:
            if record.status != "ok":
                err = record.error.message if record.error else record.status
                raise WarmupFailed(f"the warm-up request failed: {err}")
            continue
        points.append(point_of(step, record))
    fit = fit_probe(points)
    return ProbeRun(plan, fit, engine_prefill_per_1k(points), tuple(records), session_id)
