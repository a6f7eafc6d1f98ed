"""A whole probe as one call: a typed :class:`ProbePlan` in, a :class:`ProbeResult` out.

``ttft probe`` parses its flags into a ProbePlan, calls :func:`run_probe` and prints the
result; the Python API (:mod:`backends.api`) calls the same function. Here: the backend
made from the plan's Target, the local model's context read (the schedule must fit in
it), the schedule made (:mod:`backends.probe.plan`), the turns run and logged
(:mod:`backends.probe.run`) and the fit. Each way it can stop is an exception of the
project's own, whose message is the sentence the CLI prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...telemetry.errors import TtftError
from ...telemetry.export.json_text import json_text
from ...telemetry.log import private_files
from ...telemetry.log.turns import SessionLog, new_session_id
from ...telemetry.probe.result import Estimate, ProbeFit, ProbePoint
from ...telemetry.probe.store import save_probe
from ...telemetry.settings import TurnSettings
from ..providers.registry import Target, create_backend
from .plan import Schedule, make_plan
from .run import run_steps

PROBE_SCHEMA = "ttft.probe/1"


class ModelLoadFailed(TtftError, RuntimeError):
    """A local model that did not load before the probe: nothing was sent."""


class OutDirError(TtftError, OSError):
    """The folder for the probe's files could not be made: nothing was sent."""


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """What one probe is to do, as ``ttft probe``'s flags say it; immutable."""

    target: Target
    quick: bool = False  # fewer lengths and 3 trials a point
    budget: int | None = None  # at most about this many tokens (BudgetError when even the least plan costs more)
    settings: TurnSettings = field(default_factory=TurnSettings)  # each turn's; the schedule sets its output length
    out: Path | None = None  # every turn logged here as ttft.turn JSONL, as it ends
    sdk: bool = False  # read with the API's SDK, not ttft's own reader
    timeout_s: float | None = None
    local_options: Mapping[str, Any] = field(default_factory=dict)  # the engine's load options (n_gpu_layers...)
    seed: int | None = None  # None: new texts each run (a prompt cache outlives a probe)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """A probe's fit, its points and every turn's record, for the target the backend named."""

    provider: str
    model: str
    base_url: str | None = field(repr=False)  # the saved fit's key; may hold credentials, so never shown
    schedule: Schedule
    fit: ProbeFit
    engine_prefill_per_1k: Estimate | None  # llama.cpp's own prefill per 1k tokens, where the engine reports it
    records: tuple[dict[str, Any], ...]
    session_id: str
    log_errors: tuple[str, ...] = ()  # turns that could not be written to ``plan.out``
    out: Path | None = None  # where the turns were logged as they ended (``plan.out``)

    @property
    def points(self) -> tuple[ProbePoint, ...]:
        return self.fit.points

    @property
    def fitted(self) -> bool:
        """Whether enough turns succeeded to fit anything (the CLI's exit 1 when not)."""
        return self.fit.base_ttft_ms is not None or self.fit.output_ms_per_100_tokens is not None

    def to_dict(self) -> dict[str, Any]:
        """What ``ttft probe --json`` prints: the fit's keys plus ``points``."""
        return {"schema": PROBE_SCHEMA, **self.fit.to_dict()}

    def save(self, directory: Path | str) -> list[Path]:
        """Write what ``ttft probe --out DIR`` writes (``probe.json``; the turns as ``ttft.turn`` JSONL when
        they were not logged there already); the chart's SVG is the CLI's. Returns the paths written;
        OSError when one cannot be."""
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        written = [folder / "probe.json"]
        private_files.replace(written[0], (json_text(self.fit.to_dict()) + "\n").encode("utf-8"))
        turns = folder / f"{self.session_id}.jsonl"
        if self.out is None or folder.resolve() != self.out.resolve():
            log = SessionLog(self.session_id, directory=folder)
            for r in self.records:
                log.append(r)  # LogWriteError (an OSError) when it cannot
            written.append(turns)
        return written

    def save_fit(self) -> Path:
        """Keep the fit for this provider, model and base URL, where the chat and ``ask`` read it to split a
        turn's server wait. Returns its path; OSError when it cannot be written."""
        return save_probe(self.provider, self.model, self.base_url, self.fit)


async def model_context(backend: Any) -> int | None:
    """A local model's context window (the schedule must fit in it); None for a hosted API."""
    load = getattr(backend, "load", None)
    if load is None:
        return None
    info = await load()
    sizes = [info.get(k) for k in ("n_ctx", "n_ctx_train")] if isinstance(info, dict) else []
    known = [n for n in sizes if isinstance(n, int) and n > 0]
    return min(known) if known else None  # the context the engine opened, never past what the model was trained on


OnPlan = Callable[[str, Schedule], None]  # (provider:model, the schedule), before the first request
OnTurn = Callable[[int, Any, Any], None]  # (index, step, record), as each turn ends


async def run_probe(plan: ProbePlan, *, on_plan: OnPlan | None = None, on_turn: OnTurn | None = None) -> ProbeResult:
    """Run ``plan``: its backend made, its schedule sent in order, the points fitted.

    Raises ProviderError (the target cannot be reached as given), :class:`ModelLoadFailed`,
    BudgetError, :class:`OutDirError` or WarmupFailed: all TtftError, and all before the schedule
    is spent. The fit is not saved (:meth:`ProbeResult.save_fit`).
    """
    backend = create_backend(plan.target, timeout_s=plan.timeout_s, lean=not plan.sdk, **dict(plan.local_options))
    try:
        try:
            context = await model_context(backend)
        except Exception as exc:  # a local model that does not load: its own message, no traceback
            raise ModelLoadFailed(f"could not load the model: {getattr(exc, 'message', None) or exc}") from exc
        schedule = make_plan(context, quick=plan.quick, budget=plan.budget, seed=plan.seed)
        if on_plan is not None:
            on_plan(f"{backend.provider}:{backend.model}", schedule)
        log = None
        if plan.out is not None:
            try:
                plan.out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OutDirError(f"cannot create {plan.out}: {exc.strerror or exc}") from exc
            log = SessionLog(f"probe-{new_session_id()}", directory=plan.out)
        run = await run_steps(backend, schedule, log=log, on_turn=on_turn, settings=plan.settings)
    finally:
        await backend.aclose()
    return ProbeResult(
        provider=backend.provider,
        model=backend.model,
        base_url=backend.base_url,
        schedule=schedule,
        fit=run.fit,
        engine_prefill_per_1k=run.engine_prefill_per_1k,
        records=run.records,
        session_id=run.session_id,
        log_errors=tuple(str(e) for e in getattr(log, "write_errors", ())),
        out=plan.out,
    )
