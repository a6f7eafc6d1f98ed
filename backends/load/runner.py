"""A bench run across its levels, in this process or split over worker processes.

:class:`LoadRunner` runs the warm-up, the configured levels and the capacity search's probes
through :func:`backends.load.driver.run_level`. With ``workers > 1`` the load is split across that
many processes (spawned once per run), each building its own backend and HTTP pool from a
:class:`BackendSpec` and running its share on its own event loop; they start each level on a
shared monotonic deadline, and their records and client health are merged back here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing as mp
import re
import sys
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, Self

from ...telemetry import events as ev
from ...telemetry.bench.aggregate import aggregate_level
from ...telemetry.bench.requests import read_bench
from ...telemetry.bench.slo import SLO
from ...telemetry.bench.workload.lengths import Lengths
from ...telemetry.bench.workload.plan import Workload
from ..agent.host import ToolHost
from ..base import Backend
from . import event_loop
from .driver import LoadConfig, run_level
from .outcome import LevelResult, Progress
from .tools import ToolsConfig, open_host


@dataclass(frozen=True)
class BackendSpec:
    """How a worker process builds its own backend (one HTTP pool per process)."""

    spec: str
    base_url: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # The SDK path of Chat Completions only: read streams as JSON dicts, not the SDK's typed chunks.
    raw_stream: bool = False
    # With options["lean"] (no SDK): send through aiohttp rather than httpx2 (backends.transport.aiohttp_client),
    # the cheapest client per chunk under many streams.
    aiohttp: bool = False
    # Which of the lean reader's load clients: "aiohttp" (backends.transport.aiohttp_client) or "proto" (an asyncio
    # Protocol + httptools, backends.transport.protocol).
    transport: str = "aiohttp"
    # Run each worker process on uvloop when it is installed (backends.load.event_loop), as the parent runs.
    fast_loop: bool = False


def build_backend(spec: BackendSpec, pool: int = 1024) -> Backend:
    """The backend for a load run, its HTTP pool sized for ``pool`` concurrent streams."""
    from ..providers.registry import create_backend

    backend = create_backend(spec.spec, base_url=spec.base_url, max_connections=pool, **spec.options)
    if spec.raw_stream and hasattr(backend, "raw_stream"):
        backend.raw_stream = True
    if spec.aiohttp and hasattr(backend, "use_aiohttp"):
        backend.use_aiohttp(spec.transport)
    return backend


def _worker_level(
    spec: BackendSpec,
    cfg: LoadConfig,
    level: float,
    share: float,
    requests: int,
    start_index: int,
    level_index: int,
    run_id: str,
    warmup: bool,
    start_at_ns: int,
    worker: int,
    queue: Any,
    first_user: int = 0,
    part: tuple[int, int] = (0, 1),
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    async def main(host: ToolHost | None) -> LevelResult:
        backend = build_backend(spec, pool_size(cfg))
        try:
            # a copy (asdict would flatten the turn settings to a dict); the first process alone carries the
            # probe user (--probe-rate): one user, however many processes share the load
            sub = replace(cfg, probe_rate=cfg.probe_rate if worker == 0 else None)

            def progress(p: Progress) -> None:
                if queue is not None:
                    queue.put((worker, p.done, p.errors, p.output_tokens, p.last_ttft_ms))

            return await run_level(
                backend,
                sub,
                share,
                run_id=run_id,
                level_index=level_index,
                start_index=start_index,
                requests=requests,
                warmup=warmup,
                start_at_ns=start_at_ns,
                worker=worker,
                on_progress=progress,
                first_user=first_user,
                part=part,
                host=host,
            )
        finally:
            await backend.aclose()

    _otel_in_worker()
    factory = event_loop.loop_factory() if spec.fast_loop else None
    # with tools, a loop kept from level to level: the MCP servers it started live on it
    res = event_loop.run(main(None), factory) if cfg.tools is None else _with_tools(cfg.tools, factory, main)
    from ..otel.push import installed

    if (push := installed()) is not None:
        push.flush()  # a pool worker may never run its exit handlers: hand this level's spans over now
    for r in res.records:
        r["extra"]["bench"]["level"] = level  # the whole level, not this worker's share
    return res.records, res.client


# A worker process's own event loop and tool host, kept from level to level when the run has tools: its
# MCP servers start once in each process (on its first level) and live on that loop until the process ends.
_PROCESS: dict[str, Any] = {}
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _process_host(
    tools: ToolsConfig, factory: Callable[[], asyncio.AbstractEventLoop] | None
) -> tuple[asyncio.Runner, ToolHost]:
    """This process's loop and tool host, made on its first call and kept."""
    runner = _PROCESS.get("runner")
    if runner is None:
        runner = _PROCESS["runner"] = asyncio.Runner(loop_factory=factory)
    host = _PROCESS.get("host")
    if host is None:

        def say(text: str) -> None:  # a server's words: shown, never run
            print(_CONTROLS.sub("?", f"ttft bench: a load process: {text}"), file=sys.stderr, flush=True)

        host = _PROCESS["host"] = runner.run(open_host(tools, say))
    return runner, host


def _with_tools(
    tools: ToolsConfig,
    factory: Callable[[], asyncio.AbstractEventLoop] | None,
    main: Callable[[ToolHost | None], Coroutine[Any, Any, LevelResult]],
) -> LevelResult:
    runner, host = _process_host(tools, factory)
    result: LevelResult = runner.run(main(host))
    return result


def split(total: float, parts: int, integer: bool) -> list[float]:
    """``total`` users (whole, the first parts one more) or requests/s (equal) over ``parts`` drivers."""
    if integer:
        base, extra = divmod(int(total), parts)
        return [base + (1 if i < extra else 0) for i in range(parts)]
    return [total / parts] * parts


def warmup_workload(cfg: LoadConfig) -> Workload | None:
    """What the warm-up sends: the run's prompts, one turn each (a trace's: plain prompts of the
    configured length, since a trace's clock and blocks belong to its levels)."""
    w = cfg.workload
    if w is None:
        return None
    if w.trace:
        return Workload(input=Lengths.fixed(cfg.input_tokens), output=w.output)
    return replace(w, turns=1, think_time_s=0.0)


@dataclass(frozen=True, slots=True)
class Part:
    """One process's (or one cluster driver's) part of a level."""

    share: float  # its users, or requests/s (a trace: the whole speedup)
    requests: int
    start_index: int  # its prompts' numbers: unique across the run
    first_user: int  # its first closed-loop user's number across the level (users pick shared prefixes)
    part: tuple[int, int]  # a trace's split: this part sends every request whose place is part[0] mod part[1]


def parts(cfg: LoadConfig, mode: str, level: float, requests: int, start_index: int, most: int) -> list[Part]:
    """A level split over at most ``most`` processes: whole conversations each (a process never sends
    a conversation's later turns alone), or, for a trace, the whole clock each with its share of the
    requests. Closed loop never uses more processes than users or conversations."""
    turns = cfg.plan().turns if mode != "trace" else 1
    conversations = -(-requests // turns)
    k = max(1, most)
    if mode == "concurrency":
        k = max(1, min(k, int(level), conversations))
    if mode == "trace":
        return [Part(level, requests, start_index, 0, (w, k)) for w in range(k)]
    k = max(1, min(k, conversations))
    shares = split(level, k, mode == "concurrency")
    counts = [int(x) * turns for x in split(conversations, k, True)]
    out, first = [], start_index
    for w in range(k):
        first_user = int(sum(shares[:w])) if mode == "concurrency" else 0
        out.append(Part(shares[w], counts[w], first, first_user, (w, k)))
        first += counts[w]
    return out


def pool_size(cfg: LoadConfig) -> int:
    """The HTTP pool for one driver: room for the top level's streams and the warm-up."""
    top = max(cfg.levels) if cfg.mode == "concurrency" else cfg.max_in_flight
    return max(128, int(top) + cfg.warmup + 8)


def _noop() -> int:
    _otel_in_worker()
    return 0


BARRIER_WAIT_S = 120.0


def _start_tools(tools: ToolsConfig, fast_loop: bool, barrier: Any) -> int:
    """Start this process's tool host before anything is timed. The barrier holds each call until every
    process has one, so no process runs two and each starts its own servers here (not in its first level,
    where the start would stretch the level's clock)."""
    _otel_in_worker()
    with contextlib.suppress(Exception):  # a barrier that broke: the host starts on the first level instead
        barrier.wait(BARRIER_WAIT_S)
    _process_host(tools, event_loop.loop_factory() if fast_loop else None)
    return 0


def _otel_in_worker() -> None:
    """A worker process's turns reach the live OTel push too (configured by the same variables);
    the SDK is imported here, before anything is timed."""
    from ..otel.push import install

    install(eager=True)


class Runner(Protocol):
    """What ``ttft bench`` asks of whatever runs its load: this machine (:class:`LoadRunner`) or a
    cluster (``backends.load.cluster.runner.ClusterRunner``)."""

    cfg: LoadConfig
    backend: Backend | None  # the one backend in this process, when there is one
    streams_records: bool  # records go to a callback as they arrive, rather than with each result

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def warmup(self) -> LevelResult | None: ...

    async def level(self, level_index: int) -> LevelResult: ...

    async def probe(self, level: float, *, requests: int, level_index: int, start_index: int) -> LevelResult: ...

    def figures(self, res: LevelResult, slo: SLO | None) -> tuple[dict[str, Any], list[str]]: ...

    def describe(self) -> dict[str, Any]: ...


class LoadRunner:
    """Runs the levels of a bench in this process, or split over ``cfg.workers`` processes."""

    streams_records = False

    def __init__(
        self,
        cfg: LoadConfig,
        *,
        backend: Backend | None = None,
        spec: BackendSpec | None = None,
        run_id: str = "bench",
        on_progress: Callable[[Progress], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
    ) -> None:
        if backend is None and spec is None:
            raise ValueError("need a backend or a backend spec")
        if cfg.workers > 1 and spec is None:
            raise ValueError("several workers need a BackendSpec (each process builds its own backend)")
        self.cfg = cfg
        self.backend = backend
        self.spec = spec
        self.run_id = run_id
        self.on_progress = on_progress
        self.on_notice = on_notice  # what the tool servers say (one failed to start, one is gone)
        self.host: ToolHost | None = None  # the run's tools in this process (workers start their own)
        self._pool: ProcessPoolExecutor | None = None
        self._manager: Any = None

    async def __aenter__(self) -> LoadRunner:
        if self.cfg.workers > 1:
            ctx = mp.get_context("spawn")
            self._pool = ProcessPoolExecutor(self.cfg.workers, mp_context=ctx)
            self._manager = ctx.Manager()
            loop = asyncio.get_running_loop()
            # Pay the spawn and import cost before anything is timed.
            if self.cfg.tools is None:
                await asyncio.gather(*(loop.run_in_executor(self._pool, _noop) for _ in range(self.cfg.workers)))
            else:  # and each process's tool servers
                assert self.spec is not None
                barrier = self._manager.Barrier(self.cfg.workers)
                start = functools.partial(_start_tools, self.cfg.tools, self.spec.fast_loop, barrier)
                await asyncio.gather(*(loop.run_in_executor(self._pool, start) for _ in range(self.cfg.workers)))
        elif self.backend is None:
            assert self.spec is not None
            self.backend = build_backend(self.spec, pool_size(self.cfg))
        # A backend passed in ready-made keeps the pool its maker gave it (create_backend's max_connections).
        if self.cfg.tools is not None and self.cfg.workers <= 1:
            self.host = await open_host(self.cfg.tools, self.on_notice)  # once a run, shared by every level
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.host is not None:
            await self.host.aclose()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._manager.shutdown()
        if self.backend is not None and self.spec is not None:
            await self.backend.aclose()

    async def warmup(self) -> LevelResult | None:
        """``cfg.warmup`` requests, not measured (tagged ``warmup``); opens connections, wakes the server."""
        if self.cfg.warmup <= 0:
            return None
        first = self.cfg.levels[0] if self.cfg.mode == "concurrency" else 1
        c = max(1, min(self.cfg.warmup, int(max(self.cfg.levels)) if self.cfg.mode == "concurrency" else 4, first))
        cfg = replace(self.cfg, mode="concurrency", workers=1, workload=warmup_workload(self.cfg))
        if self.cfg.workers > 1:
            return await self._run_split(cfg, c, -1, requests=self.cfg.warmup, warmup=True, start_index=10**6)
        assert self.backend is not None
        return await run_level(
            self.backend,
            cfg,
            c,
            run_id=self.run_id,
            level_index=-1,
            start_index=10**6,
            requests=self.cfg.warmup,
            warmup=True,
            on_progress=self.on_progress,
            host=self.host,
        )

    async def level(self, level_index: int) -> LevelResult:
        return await self.probe(
            self.cfg.levels[level_index],
            requests=self.cfg.requests,
            level_index=level_index,
            start_index=level_index * self.cfg.requests,
        )

    async def probe(self, level: float, *, requests: int, level_index: int, start_index: int) -> LevelResult:
        """``requests`` requests at any ``level`` (the capacity search's probes; ``level`` runs the configured ones).

        ``start_index`` numbers the prompts (unique across a run); ``level_index`` seeds open-loop arrivals.
        """
        if self.cfg.workers > 1:
            return await self._run_split(self.cfg, level, level_index, requests=requests, start_index=start_index)
        assert self.backend is not None
        return await run_level(
            self.backend,
            self.cfg,
            level,
            run_id=self.run_id,
            level_index=level_index,
            start_index=start_index,
            requests=requests,
            on_progress=self.on_progress,
            host=self.host,
        )

    def figures(self, res: LevelResult, slo: SLO | None) -> tuple[dict[str, Any], list[str]]:
        """The level's figures (``telemetry.bench.aggregate``), and a sentence for records that did not read."""
        read = read_bench(res.records)
        problem = read.message()  # a worker's record that does not read: left out, said
        figures = aggregate_level(
            read.turns, level=res.level, mode=res.mode, slo=slo, client=res.client, probe_rate=self.cfg.probe_rate
        )
        return figures, [problem] if problem is not None else []

    def describe(self) -> dict[str, Any]:
        """What this runner adds to the summary: nothing (the workers are the summary's own ``workers``)."""
        return {}

    async def _run_split(
        self,
        cfg: LoadConfig,
        level: float,
        level_index: int,
        *,
        requests: int | None = None,
        warmup: bool = False,
        start_index: int = 0,
    ) -> LevelResult:
        assert self._pool is not None and self.spec is not None
        n = cfg.requests if requests is None else requests
        split_up = parts(cfg, cfg.mode, level, n, start_index, self.cfg.workers)
        queue = self._manager.Queue()
        start_at = ev.now_ns() + 300_000_000  # every worker starts on the same monotonic deadline
        loop = asyncio.get_running_loop()
        futures = [
            loop.run_in_executor(
                self._pool,
                _worker_level,
                self.spec,
                cfg,
                level,
                p.share,
                p.requests,
                p.start_index,
                level_index,
                self.run_id,
                warmup,
                start_at,
                w,
                queue,
                p.first_user,
                p.part,
            )
            for w, p in enumerate(split_up)
        ]
        done: dict[int, tuple[int, int, int]] = {}
        gathered = asyncio.gather(*futures)
        while not gathered.done():
            await asyncio.sleep(0.1)
            last_ttft = None
            while True:
                try:
                    w, d, e, t, last_ttft = queue.get_nowait()
                except Exception:
                    break
                done[w] = (d, e, t)
            if self.on_progress is not None and done:
                self.on_progress(
                    Progress(
                        mode=cfg.mode,
                        level=level,
                        level_index=level_index,
                        levels=len(self.cfg.levels),
                        done=sum(v[0] for v in done.values()),
                        total=n,
                        errors=sum(v[1] for v in done.values()),
                        in_flight=-1,
                        elapsed_s=max(0.0, (ev.now_ns() - start_at) / 1e9),
                        warmup=warmup,
                        last_ttft_ms=last_ttft,
                        output_tokens=sum(v[2] for v in done.values()),
                    )
                )
        results = await gathered
        records = sorted((r for recs, _ in results for r in recs), key=lambda r: r["extra"]["bench"]["index"])
        clients = [c for _, c in results]
        client = merge_clients(clients)
        wall = max(
            ((r["extra"]["bench"]["sent_at_ms"] + ((r.get("events_ms") or {}).get("end") or 0)) for r in records),
            default=0.0,
        )
        return LevelResult(cfg.mode, level, records, client, wall / 1000)


def merge_clients(clients: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One client-health entry for several worker processes: the worst of each figure."""
    lag_p99 = [c["loop_lag_ms"]["p99"] for c in clients if c["loop_lag_ms"].get("p99") is not None]
    lag_max = [c["loop_lag_ms"]["max"] for c in clients if c["loop_lag_ms"].get("max") is not None]
    lag_p50 = [c["loop_lag_ms"]["p50"] for c in clients if c["loop_lag_ms"].get("p50") is not None]
    cpu = [c["cpu_percent"] for c in clients]
    host = [c["host_cpu_percent"] for c in clients if c.get("host_cpu_percent") is not None]
    out: dict[str, Any] = {
        "workers": len(clients),
        "host_cpu_percent": max(host, default=None),
        "loop_lag_ms": {
            "p50": max(lag_p50, default=None),
            "p99": max(lag_p99, default=None),
            "max": max(lag_max, default=None),
        },
        "cpu_percent": sum(cpu),
        "cpu_percent_max_process": max(cpu, default=None),
        "per_worker": list(clients),
    }
    late = [c["send_late_ms"]["p99"] for c in clients if c.get("send_late_ms")]
    if late:
        out["send_late_ms"] = {"p99": max(late)}
    return out
