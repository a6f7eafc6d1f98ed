"""The load driver behind ``ttft bench``: many concurrent turns, each recorded like any other.

Every request goes through :func:`backends.turn.run_turn` with its own recorder, so every
request is a complete ``ttft.turn`` record (tagged ``extra.bench``), ended by
:func:`backends.finish.finish_turn` and so seen by the same sinks (OpenTelemetry) as a chat turn. Two kinds of level:

- closed loop (``mode="concurrency"``): ``c`` users, each sending its next request as soon
  as the previous one ends, until ``requests`` are done;
- open loop (``mode="rate"``): ``requests`` sent on a seeded Poisson schedule at ``rate``/s,
  whatever the server does (``max_in_flight`` caps the streams in flight).

The client watches itself: an event-loop lag monitor (a 10 ms ticker measuring how late it
wakes) and the process CPU (psutil) over each level, plus, in open loop, how late each
request left against its schedule. ``telemetry.aggregate.client_bottleneck`` turns those into
a warning when the client rather than the server limited the figures. With ``workers > 1``
the load is split across that many processes (spawned once per run), each with its own
event loop and HTTP pool; they start each level on a shared monotonic deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing as mp
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import psutil

from backends.base import Backend, ChatRequest, Message
from backends.finish import finish_turn
from backends.turn import new_recorder, run_turn
from telemetry import events as ev
from telemetry.aggregate import poisson_schedule
from telemetry.metrics import percentiles
from telemetry.record import TurnRecord
from telemetry.settings import TurnSettings

Mode = Literal["concurrency", "rate"]
LAG_INTERVAL_S = 0.010

# Short, common English words: about one token each in the usual BPE vocabularies.
_WORD_TEXT = """
time year people way day man thing woman life child world school state family student group country problem
hand part place case week company system program question work government number night point home water room
mother area money story fact month lot right study book eye job word business issue side kind head house
service friend father power hour game line end member law car city community name team minute idea kid body
back parent face others level office door health person art war history party result change morning reason
research girl guy moment air teacher force education foot boy age policy music market sense nation plan
college interest death experience effect use class control care field development role effort rate heart drug
show leader light voice wife police mind price report decision son view relationship town road arm difference
value building action model season society tax director position player record paper space ground form event
official matter center couple site project activity star table need court oil situation cost industry figure
street image phone data picture practice piece land product doctor wall patient worker news test movie north
love support technology step baby computer type attention film tree source organization hair window evidence
population truth song
"""
_WORDS = tuple(_WORD_TEXT.split())


def synthetic_prompt(index: int, input_tokens: int, seed: int) -> str:
    """A unique prompt of about ``input_tokens`` tokens; the same (index, seed) gives the same text.

    It is random from its first word, so a server's prefix cache cannot skip the prefill.
    """
    rng = random.Random(f"ttft-bench-{seed}-{index}")
    tail = "Continue this list of words with more words."
    n = max(1, input_tokens - 10)
    words = [rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words) + ". " + tail


@dataclass(frozen=True)
class LoadConfig:
    mode: Mode = "concurrency"
    levels: tuple[float, ...] = (1, 2, 4, 8)
    requests: int = 32
    warmup: int = 2
    input_tokens: int = 128
    max_output_tokens: int = 64
    seed: int = 0
    workers: int = 1
    max_in_flight: int = 1024  # open loop only
    max_retries: int = 0  # a retry is a distortion in a load test: errors are counted instead
    temperature: float | None = None
    # The rest of the turn flags (system prompt aside): effort, thinking, streaming, deadline.
    turn: TurnSettings | None = None
    system: str | None = None  # a system prompt before every synthetic one

    def settings(self) -> TurnSettings:
        return (self.turn or TurnSettings()).with_(
            max_output_tokens=self.max_output_tokens,
            temperature=self.temperature,
            max_retries=self.max_retries,
        )


@dataclass
class Progress:
    """What a live progress line shows; sent after every finished request."""

    mode: Mode
    level: float
    level_index: int
    levels: int
    done: int
    total: int
    errors: int
    in_flight: int
    elapsed_s: float
    warmup: bool = False
    last_ttft_ms: float | None = None
    output_tokens: int = 0


class LevelCancelled(asyncio.CancelledError):
    """A level cut short (Ctrl-C, SIGTERM): its finished turns and, recorded as cancelled with what had
    arrived, the ones in flight. Still a CancelledError, so cancellation goes on as usual."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        super().__init__("level cancelled")
        self.records = records


@dataclass
class LevelResult:
    mode: Mode
    level: float
    records: list[dict[str, Any]]
    client: dict[str, Any]
    wall_s: float


@dataclass
class _ClientWatch:
    """Event-loop lag and process CPU for one level."""

    lags_ms: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _cpu0: float = 0.0
    _t0: float = 0.0

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(LAG_INTERVAL_S)
            self.lags_ms.append(max(0.0, (loop.time() - t - LAG_INTERVAL_S) * 1000))

    def start(self) -> None:
        times = psutil.Process().cpu_times()
        self._cpu0 = times.user + times.system
        self._t0 = time.monotonic()
        psutil.cpu_percent(None)  # starts the system-wide window
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> dict[str, Any]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        times = psutil.Process().cpu_times()
        wall = max(time.monotonic() - self._t0, 1e-9)
        cpu = (times.user + times.system - self._cpu0) / wall * 100
        return {
            "loop_lag_ms": percentiles(self.lags_ms),
            "cpu_percent": cpu,  # this process, % of one core
            "host_cpu_percent": psutil.cpu_percent(None),  # the whole machine, % of all cores
            "cpus": psutil.cpu_count(),
            "lag_samples": len(self.lags_ms),
        }


async def _one(
    backend: Backend,
    cfg: LoadConfig,
    *,
    index: int,
    run_id: str,
    mode: Mode,
    level: float,
    origin_ns: int,
    warmup: bool,
    scheduled_ms: float | None = None,
    worker: int = 0,
    on_cancel: Callable[[Finished], None] | None = None,
) -> Finished:
    user = Message("user", synthetic_prompt(index, cfg.input_tokens, cfg.seed))
    request = ChatRequest(((Message("system", cfg.system),) if cfg.system else ()) + (user,), cfg.settings())
    bench = {"run_id": run_id, "mode": mode, "level": level, "index": index, "warmup": warmup, "worker": worker}
    if scheduled_ms is not None:
        bench["scheduled_at_ms"] = scheduled_ms
    recorder = new_recorder(backend, request, session_id=run_id, turn_index=index, extra={"bench": bench})
    called = ev.now_ns()
    try:
        record = await run_turn(backend, request, recorder)
    except asyncio.CancelledError:
        if on_cancel is not None:  # run_turn recorded it as cancelled, with what had arrived
            on_cancel(Finished(finish_turn(recorder), called, origin_ns))
        raise
    return Finished(record, called, origin_ns)


@dataclass(frozen=True, slots=True)
class Finished:
    """One finished request, its record turned into the ``ttft.turn`` dict only once the level is over.

    Streams of one level end together (a batching server finishes them on one step): converting
    each record as it ends would stall every stream still running for that burst, inside the
    figures being measured.
    """

    record: TurnRecord
    called_ns: int
    origin_ns: int

    def to_dict(self) -> dict[str, Any]:
        d = self.record.to_dict()
        sent = self.record.timestamps.sent if self.record.timestamps.sent is not None else self.called_ns
        d["extra"]["bench"]["sent_at_ms"] = (sent - self.origin_ns) / 1e6
        return d


def _as_dicts(done: list[Finished]) -> list[dict[str, Any]]:
    records = [f.to_dict() for f in done]
    records.sort(key=lambda r: r["extra"]["bench"]["index"])
    return records


async def run_level(
    backend: Backend,
    cfg: LoadConfig,
    level: float,
    *,
    run_id: str,
    level_index: int = 0,
    start_index: int = 0,
    requests: int | None = None,
    warmup: bool = False,
    start_at_ns: int | None = None,
    worker: int = 0,
    on_progress: Callable[[Progress], None] | None = None,
) -> LevelResult:
    """Run one level in this process and return its records and the client's health."""
    total = cfg.requests if requests is None else requests
    if start_at_ns is not None:
        wait = (start_at_ns - ev.now_ns()) / 1e9
        if wait > 0:
            await asyncio.sleep(wait)
    # A full garbage collection in the middle of a level stalls every stream at once: hold the
    # collector off until the level ends (re-enabled even on errors). No collection first: one
    # scanned the whole heap, ~25 ms of CPU per level; the collector catches up after the level.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return await _run_level(
            backend, cfg, level, run_id, level_index, start_index, total, warmup, start_at_ns, worker, on_progress
        )
    finally:
        if gc_was_on:
            gc.enable()


async def _run_level(
    backend: Backend,
    cfg: LoadConfig,
    level: float,
    run_id: str,
    level_index: int,
    start_index: int,
    total: int,
    warmup: bool,
    start_at_ns: int | None,
    worker: int,
    on_progress: Callable[[Progress], None] | None,
) -> LevelResult:
    mode = cfg.mode
    watch = _ClientWatch()
    watch.start()
    origin = start_at_ns if start_at_ns is not None else ev.now_ns()
    records: list[Finished] = []
    state = {"in_flight": 0, "errors": 0, "tokens": 0}

    def finished(f: Finished) -> None:
        records.append(f)
        state["in_flight"] -= 1
        if f.record.status != "ok":
            state["errors"] += 1
        state["tokens"] += int(f.record.tokens.output or 0)
        if on_progress is not None:
            on_progress(
                Progress(
                    mode=mode,
                    level=level,
                    level_index=level_index,
                    levels=len(cfg.levels),
                    done=len(records),
                    total=total,
                    errors=state["errors"],
                    in_flight=state["in_flight"],
                    elapsed_s=(ev.now_ns() - origin) / 1e9,
                    warmup=warmup,
                    last_ttft_ms=f.record.metrics.ttft_ms,
                    output_tokens=state["tokens"],
                )
            )

    common = {
        "run_id": run_id,
        "mode": mode,
        "level": level,
        "origin_ns": origin,
        "warmup": warmup,
        "worker": worker,
        "on_cancel": records.append,
    }
    t0 = time.monotonic()
    tasks: list[asyncio.Task[None]] = []

    async def drive() -> None:
        if mode == "concurrency":
            indices = iter(range(start_index, start_index + total))

            async def user() -> None:
                for i in indices:
                    state["in_flight"] += 1
                    finished(await _one(backend, cfg, index=i, **common))  # type: ignore[arg-type]

            await asyncio.gather(*(user() for _ in range(max(1, min(int(level), total)))))
            return
        schedule = poisson_schedule(level, total, cfg.seed + level_index * 1000 + worker)
        gate = asyncio.Semaphore(cfg.max_in_flight)
        loop = asyncio.get_running_loop()
        base = loop.time() - (ev.now_ns() - origin) / 1e9

        async def send(i: int, at_s: float) -> None:
            async with gate:
                state["in_flight"] += 1
                finished(await _one(backend, cfg, index=i, scheduled_ms=at_s * 1000, **common))  # type: ignore[arg-type]

        for k, at in enumerate(schedule):
            delay = base + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(send(start_index + k, at)))
        await asyncio.gather(*tasks)

    try:
        await drive()
    except asyncio.CancelledError:
        for t in tasks:  # open loop: the sends already started are not children of a gather yet
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await watch.stop()
        raise LevelCancelled(_as_dicts(records)) from None
    wall = time.monotonic() - t0
    client = await watch.stop()
    dicts = _as_dicts(records)
    late = [
        r["extra"]["bench"]["sent_at_ms"] - r["extra"]["bench"]["scheduled_at_ms"]
        for r in dicts
        if "scheduled_at_ms" in r["extra"]["bench"]
    ]
    if late:
        client["send_late_ms"] = percentiles(late)
    client["workers"] = 1
    return LevelResult(mode, level, dicts, client, wall)


# --- several processes --------------------------------------------------------------
@dataclass(frozen=True)
class BackendSpec:
    """How a worker process builds its own backend (one HTTP pool per process)."""

    spec: str
    base_url: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # Chat Completions only: read streams as JSON dicts, not the SDK's typed chunks (less CPU per chunk).
    raw_stream: bool = False
    # With options["lean"] (no SDK): send through aiohttp rather than httpx2 (backends.lean_http),
    # the cheapest client per chunk under many streams.
    aiohttp: bool = False


def build_backend(spec: BackendSpec, pool: int = 1024) -> Backend:
    """The backend for a load run, its HTTP pool sized for ``pool`` concurrent streams."""
    from backends.providers import create_backend

    backend = create_backend(spec.spec, base_url=spec.base_url, max_connections=pool, **spec.options)
    if spec.raw_stream and hasattr(backend, "raw_stream"):
        backend.raw_stream = True
    if spec.aiohttp and hasattr(backend, "use_aiohttp"):
        backend.use_aiohttp()
    return backend


_WORKER_BACKENDS: dict[BackendSpec | str, Backend] = {}


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
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    async def main() -> LevelResult:
        backend = build_backend(spec, _pool_size(cfg))
        try:
            sub = replace(cfg)  # a copy (asdict would flatten the turn settings to a dict)

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
            )
        finally:
            await backend.aclose()

    _otel_in_worker()
    res = asyncio.run(main())
    from backends.otel import installed

    if (push := installed()) is not None:
        push.flush()  # a pool worker may never run its exit handlers: hand this level's spans over now
    for r in res.records:
        r["extra"]["bench"]["level"] = level  # the whole level, not this worker's share
    return res.records, res.client


def _split(total: float, parts: int, integer: bool) -> list[float]:
    if integer:
        base, extra = divmod(int(total), parts)
        return [base + (1 if i < extra else 0) for i in range(parts)]
    return [total / parts] * parts


def _pool_size(cfg: LoadConfig) -> int:
    top = max(cfg.levels) if cfg.mode == "concurrency" else cfg.max_in_flight
    return max(128, int(top) + cfg.warmup + 8)


def _noop() -> int:
    _otel_in_worker()
    return 0


def _otel_in_worker() -> None:
    """A worker process's turns reach the live OTel push too (configured by the same variables);
    the SDK is imported here, before anything is timed."""
    from backends.otel import install

    install(eager=True)


class LoadRunner:
    """Runs the levels of a bench in this process, or split over ``cfg.workers`` processes."""

    def __init__(
        self,
        cfg: LoadConfig,
        *,
        backend: Backend | None = None,
        spec: BackendSpec | None = None,
        run_id: str = "bench",
        on_progress: Callable[[Progress], None] | None = None,
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
        self._pool: ProcessPoolExecutor | None = None
        self._manager: Any = None

    async def __aenter__(self) -> LoadRunner:
        if self.cfg.workers > 1:
            ctx = mp.get_context("spawn")
            self._pool = ProcessPoolExecutor(self.cfg.workers, mp_context=ctx)
            self._manager = ctx.Manager()
            loop = asyncio.get_running_loop()
            # Pay the spawn and import cost before anything is timed.
            await asyncio.gather(*(loop.run_in_executor(self._pool, _noop) for _ in range(self.cfg.workers)))
        elif self.backend is None:
            assert self.spec is not None
            self.backend = build_backend(self.spec, _pool_size(self.cfg))
        # A backend passed in ready-made keeps the pool its maker gave it (create_backend's max_connections).
        return self

    async def __aexit__(self, *exc: object) -> None:
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
        cfg = replace(self.cfg, mode="concurrency", workers=1)
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
        )

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
        workers = self.cfg.workers
        if cfg.mode == "concurrency":
            workers = max(1, min(workers, int(level), n))
        shares = _split(level, workers, cfg.mode == "concurrency")
        counts = [int(x) for x in _split(n, workers, True)]
        queue = self._manager.Queue()
        start_at = ev.now_ns() + 300_000_000  # every worker starts on the same monotonic deadline
        loop = asyncio.get_running_loop()
        futures = []
        first = start_index
        for w in range(workers):
            futures.append(
                loop.run_in_executor(
                    self._pool,
                    _worker_level,
                    self.spec,
                    cfg,
                    level,
                    shares[w],
                    counts[w],
                    first,
                    level_index,
                    self.run_id,
                    warmup,
                    start_at,
                    w,
                    queue,
                )
            )
            first += counts[w]
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
