"""A bench run's plan: everything ``run_bench`` needs, settled once, typed and immutable.

The CLI builds one from its flags (``tui.commands.bench.args.plan``); a notebook builds one by hand::

    from .driver import LoadConfig
from ...telemetry.values import checked
from ...telemetry.values.checked import BadValue
    from .plan import BenchPlan, Users

    plan = BenchPlan.of(
        "compat:m", base_url="http://127.0.0.1:8000/v1", levels=(Users(1), Users(4)), requests=16
    )
    # asyncio.run(backends.load.bench.run_bench(plan)).levels: one summary dict per level

A level is a tagged value: :class:`Users` (closed loop), :class:`Rate` (open loop, requests/s) or
:class:`Speedup` (a trace replayed X times faster). The driver still takes ``(mode, floats)``;
:meth:`BenchPlan.of` converts at its edge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ...telemetry.values import checked
from ...telemetry.values.checked import BadValue
from .driver import LoadConfig

if TYPE_CHECKING:
    from ...telemetry.bench.capacity import Objectives
    from ...telemetry.bench.slo import SLO
    from .cluster.address import ClusterAddress

Mode = Literal["concurrency", "rate", "trace"]


@dataclass(frozen=True)
class Level:
    """One level of load; its subclass says what the number means."""

    value: float
    mode: ClassVar[Mode]

    @staticmethod
    def of(mode: str, value: float) -> Level:
        """The tagged level for the driver's ``(mode, value)``."""
        return _KINDS[mode](value)


@dataclass(frozen=True)
class Users(Level):
    """Closed loop: this many users, each sending its next request when its answer ends."""

    mode: ClassVar[Mode] = "concurrency"


@dataclass(frozen=True)
class Rate(Level):
    """Open loop: requests on a seeded Poisson schedule at this many per second."""

    mode: ClassVar[Mode] = "rate"


@dataclass(frozen=True)
class Speedup(Level):
    """A trace replayed this many times faster than it was recorded."""

    mode: ClassVar[Mode] = "trace"


_KINDS: dict[str, type[Level]] = {"concurrency": Users, "rate": Rate, "trace": Speedup}


@dataclass(frozen=True)
class LocalServer:
    """``-m local-server[:PATH.gguf]``: the llama-server the run starts and stops (its model: the spec's path)."""

    slots: int = 4
    ctx: int = 4096
    threads: int | None = None
    gpu_layers: int | None = None
    flash_attn: str | None = None
    ignore_eos: bool = False
    server_bin: str | None = None


@dataclass(frozen=True)
class Capacity:
    """``--find-capacity``: the search's objectives, where it starts, its limit and its longest probe."""

    objectives: Objectives
    start: float = 1.0
    limit: float = 1024
    max_requests: int | None = None


@dataclass(frozen=True)
class BenchPlan:
    """What a bench run does, settled before anything runs. ``load`` is the driver's configuration; the
    rest is where the load goes, how it is read and what the run leaves (``out``)."""

    spec: str
    load: LoadConfig
    out: Path
    run_id: str
    base_url: str | None = None
    local: LocalServer | None = None
    slo: SLO | None = None
    capacity: Capacity | None = None
    cluster: ClusterAddress | None = None
    cluster_workers: int | None = None
    raw_stream: bool = False
    sdk: bool = False
    aiohttp: bool = False
    timeout_s: float | None = None
    server_metrics: str | None = None
    start_at: float | None = None
    workload_source: Mapping[str, Any] | None = None  # what a dataset or trace held, for summary.json
    workload_notes: tuple[str, ...] = field(default=())

    @property
    def mode(self) -> Mode:
        return self.load.mode

    @property
    def levels(self) -> tuple[Level, ...]:
        """The run's levels, tagged (a capacity search's are its probes, not these)."""
        return tuple(Level.of(self.load.mode, v) for v in self.load.levels)

    @staticmethod
    def of(
        spec: str,
        *,
        levels: tuple[Level, ...] = (Users(1), Users(2), Users(4), Users(8)),
        out: Path | None = None,
        run_id: str | None = None,
        **settings: object,
    ) -> BenchPlan:
        """A plan from tagged levels (all of one kind); ``settings`` are :class:`LoadConfig`'s fields
        (``requests``, ``seed``, ...) and this class's (``base_url``, ``slo``, ...)."""
        from dataclasses import fields

        _check_levels(tuple(levels), searched=settings.get("capacity") is not None)
        _check_counts(settings)
        from ...telemetry.bench.workload.lengths import Lengths
        from ...telemetry.bench.workload.plan import Workload

        names = {f.name for f in fields(LoadConfig)}
        if settings.get("workload") is None:  # the plain bench's: fixed-length unique prompts
            settings["workload"] = Workload(input=Lengths.fixed(int(settings.get("input_tokens", 128))))  # type: ignore[call-overload]
        load = LoadConfig(
            mode=levels[0].mode if levels else "concurrency",
            levels=tuple(lv.value for lv in levels),
            **{k: v for k, v in settings.items() if k in names},  # type: ignore[arg-type]
        )
        rid = run_id or new_run_id()
        rest = {k: v for k, v in settings.items() if k not in names}
        return BenchPlan(spec, load, out or Path(f"ttft-{rid}"), rid, **rest)  # type: ignore[arg-type]


# The load's counts as the flags take them: at least 1 (``--requests N``), or 0 for none (``--warmup``).
_AT_LEAST_ONE = ("requests", "input_tokens", "max_output_tokens", "workers", "max_in_flight")
_AT_LEAST_NONE = ("warmup",)


def _check_levels(levels: tuple[object, ...], *, searched: bool) -> None:
    """What ``--concurrency``/``--request-rate``/``--speedup`` accept: at least one level (a capacity search
    finds its own), each above 0, all of one kind. A plan from the API is held to the flags' rules
    (BadValue, in their words)."""
    if not levels and not searched:
        raise BadValue("levels: give at least one level, e.g. levels=[Users(1), Users(4)]")
    for lv in levels:
        if not isinstance(lv, Level) or type(lv) is Level:
            raise BadValue(f"levels: each is Users(n), Rate(r) or Speedup(x), not {lv!r}")
        try:
            value = checked.number(lv.value)
        except BadValue as exc:
            raise BadValue(f"levels: {exc}") from None
        if value <= 0:
            raise BadValue(f"levels must be > 0, got {lv!r}")
    if len({type(lv) for lv in levels}) > 1:
        raise BadValue("a run's levels are all of one kind (users, a rate or a trace's speedup)")


def _check_counts(settings: Mapping[str, object]) -> None:
    for name in _AT_LEAST_ONE + _AT_LEAST_NONE:
        if name in settings and settings[name] is not None:
            check = checked.positive_int if name in _AT_LEAST_ONE else checked.non_negative_int
            try:
                check(settings[name])
            except BadValue as exc:
                raise BadValue(f"{name} {exc}") from None


def new_run_id() -> str:
    """``bench-YYYYMMDD-HHMMSS-xxxxxx``: a random tail as session ids have, so two runs started in the same
    second share neither an id (their turns would collide in a merged report) nor a default folder."""
    import secrets
    from datetime import UTC, datetime

    return "bench-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
