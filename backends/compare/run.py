"""A headless comparison as one call: a typed :class:`ComparePlan` in, a :class:`CompareResult` out.

``ttft compare --headless`` parses its flags into a ComparePlan, makes the panes' backends
(:func:`make_backends`), calls :func:`run_compare` and prints the result; the Python API
(:mod:`backends.api`) calls the same function. Here: the --mcp servers started once for every
pane, the prompt run on every pane ``repeat`` times (:class:`CompareRunner`), the backends and
servers closed, and the comparison's figures and verdicts (:mod:`telemetry.compare.stats`). The
interactive screen keeps driving a CompareRunner itself.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...telemetry import events as ev
from ...telemetry.compare.stats import Comparison, compare, write_comparison
from ...telemetry.log.turns import SessionLog
from ...telemetry.record import TurnRecord
from ...telemetry.settings import TurnSettings
from ..agent.consent import Consent
from ..agent.loop import DEFAULT_MAX_STEPS
from ..base import Backend
from ..mcp.config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_START_TIMEOUT_S
from ..spec import PaneSpec, parse_model
from .panes import LABELS, BackendFactory, build_panes, in_process_factory
from .runner import CompareMode, CompareRunner, PaneTools, PromptResult

if TYPE_CHECKING:
    from ..agent.host import ToolHost
    from ..providers.config import McpServerConfig

COMPARE_SCHEMA = "ttft.compare/1"


@dataclass(frozen=True, slots=True)
class ComparePlan:
    """What one comparison is to do, as ``ttft compare``'s flags say it; immutable."""

    panes: tuple[PaneSpec, ...]  # each pane's PROVIDER:MODEL and base URL, in -m order (1 to 4)
    prompt: str = ""  # the headless run's prompt (the screen may start without one)
    repeat: int = 1  # trials per prompt
    mode: CompareMode = "parallel"  # or "sequential": one pane after another
    blind: bool = False  # the screen hides the names until revealed
    seed: int | None = None  # the blind order's shuffle
    settings: TurnSettings = field(default_factory=TurnSettings)  # every pane's
    system: str | None = None
    timeout_s: float | None = None  # the token idle timeout (--timeout); None: the provider's own
    mcp_servers: tuple[McpServerConfig, ...] = ()  # --mcp: one host, every pane offered the same tools
    consent: Consent = field(default_factory=Consent)  # --allow-tools / --allow-tool: no one to ask headless
    max_steps: int = DEFAULT_MAX_STEPS  # --max-steps: model steps a pane's turn may take
    mcp_start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    mcp_call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    out: Path | None = None  # --out DIR: the comparison exported there (the CLI's, after printing)
    submitted_ns: int | None = None  # what the first turns' own delay runs from (the process start)

    @classmethod
    def of(cls, models: Sequence[str], base_url: str | None = None, **fields: Any) -> ComparePlan:
        """The plan for ``-m`` values (``PROVIDER:MODEL[@URL]``) and ``--base-url``."""
        return cls(panes=tuple(parse_model(m, base_url) for m in models), **fields)


@dataclass(frozen=True, slots=True)
class CompareResult:
    """A comparison's turns and verdicts: each pane's records, the figures, the ids."""

    comparison_id: str
    session_id: str
    names: dict[str, str]  # pane label -> provider:model
    run: PromptResult  # each pane's records, in label order; the mode and the start skew
    comparison: Comparison  # the per-pane figures and the verdicts
    log_errors: tuple[str, ...] = ()  # turns that could not be written to the session log

    @property
    def records(self) -> list[list[TurnRecord]]:
        return self.run.records

    def to_dict(self) -> dict[str, Any]:
        """What ``ttft compare --headless --json`` prints."""
        c = self.comparison
        return {
            "schema": COMPARE_SCHEMA,
            "comparison_id": self.comparison_id,
            "session_id": self.session_id,
            "mode": self.run.mode,
            "trials": c.trials,
            "start_skew_ms": self.run.start_skew_ms,
            "panes": [{**row, "name": self.names[row["pane"]]} for row in c.rows()],
            "verdicts": [
                {"metric": v.metric, "a": v.a, "b": v.b, "clear": v.clear, "better": v.better, "text": v.text}
                for v in c.verdicts
            ],
        }

    def save(self, directory: Path | str) -> list[Path]:
        """Write what ``ttft compare --out DIR`` writes (the turns as JSONL, the summary and verdict CSVs).
        Returns the paths written; OSError when one cannot be."""
        records = [r for recs in self.run.as_dicts() for r in recs]
        parts = [({"prompt_index": self.run.prompt_index, "mode": self.run.mode}, self.comparison)]
        return list(write_comparison(records, parts, Path(directory), self.comparison_id))


def make_backends(plan: ComparePlan, factory: BackendFactory | None = None) -> list[Backend]:
    """Each pane's backend, made by ``factory`` (default: in this process, with the plan's timeout).
    Whatever the factory raises (a bad spec, a missing key) is raised as it is."""
    make = factory or functools.partial(in_process_factory, timeout_s=plan.timeout_s)
    return [make(p.spec, p.base_url) for p in plan.panes]


def no_tools(backends: Sequence[Backend]) -> str | None:
    """Why these panes cannot all be offered the tools (every model gets the same ones, or none runs)."""
    from ..agent.loop import NO_TOOLS, supports_tools

    for label, b in zip(LABELS, backends, strict=False):
        if not supports_tools(b):
            return f"pane {label} ({b.provider}:{b.model}): {NO_TOOLS}"
    return None


OnTurn = Callable[[int, int, TurnRecord], None]  # (pane, trial, record), as each turn ends
OnNotice = Callable[[str], None]


async def _start_tools(plan: ComparePlan, on_warn: OnNotice | None, on_note: OnNotice | None) -> ToolHost | None:
    """The --mcp servers started and timed; the host every pane's turn calls, or None without --mcp."""
    if not plan.mcp_servers:
        return None
    from ..mcp.host import start_host
    from ..mcp.views import startup_line

    host = await start_host(
        list(plan.mcp_servers),
        on_notice=on_warn or (lambda text: None),  # a server that failed
        start_timeout_s=plan.mcp_start_timeout_s,
        call_timeout_s=plan.mcp_call_timeout_s,
    )
    for view in host.servers():
        if on_note is not None:
            on_note(startup_line(view))
    return host


async def run_compare(
    plan: ComparePlan,
    *,
    backends: Sequence[Backend] | None = None,
    factory: BackendFactory | None = None,
    on_turn: OnTurn | None = None,
    on_tool_notice: Callable[[int, str], None] | None = None,
    on_warn: OnNotice | None = None,
    on_note: OnNotice | None = None,
) -> CompareResult:
    """Run ``plan``'s prompt on every pane, ``repeat`` times; the backends (``backends``, or made here with
    ``factory``) and the tool servers are closed at the end, however it ends.

    ``on_turn``: each turn as it ends. ``on_tool_notice``: a pane's tool notice (a cut result, the step
    limit). ``on_warn``: a tool server that failed to start. ``on_note``: each server's startup line.
    """
    made = list(backends) if backends is not None else make_backends(plan, factory)
    t0 = ev.now_ns()
    try:
        host = await _start_tools(plan, on_warn, on_note)
    except BaseException:
        for b in made:
            await b.aclose()
        raise
    tools = None
    if host is not None:
        # headless has nobody to ask: the plan's consent decides, and a call it does not allow stops that turn
        tools = PaneTools(
            host, plan.consent, max_steps=plan.max_steps, on_notice=on_tool_notice, mcp_start_ns=(t0, ev.now_ns())
        )
    panes = build_panes(made, range(len(made)), settings=plan.settings)
    log = SessionLog()
    runner = CompareRunner(panes, log=log, mode=plan.mode, system=plan.system, tools=tools)
    try:
        result = await runner.run_prompt(
            plan.prompt, repeat=plan.repeat, on_done=on_turn, submitted_ns=plan.submitted_ns
        )
    finally:
        for b in made:
            await b.aclose()
        if host is not None:
            with contextlib.suppress(Exception):  # a server that will not end never costs the comparison
                await host.aclose()
    per_pane = {p.label: recs for p, recs in zip(panes, result.records, strict=True)}
    return CompareResult(
        comparison_id=runner.comparison_id,
        session_id=log.session_id,
        names={p.label: f"{p.backend.provider}:{p.backend.model}" for p in panes},
        run=result,
        comparison=compare(per_pane),
        log_errors=tuple(str(e) for e in log.write_errors),
    )
