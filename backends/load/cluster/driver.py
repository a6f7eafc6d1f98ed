"""One node's load driver as a Ray actor, and the barrier the drivers of a level start at.

A :class:`Driver` is the bench's own driver (:func:`backends.load.driver.run_level`, its spreading,
its client watch) on an event loop of its own thread (uvloop when installed, as a plain ``ttft bench``
runs), apart from the threads Ray answers calls on: a call from the head never waits for a pass of the
loop that stamps the streams, and the loop never runs Ray's work. The backend and its HTTP pool live
as long as the actor, so connections carry from the warm-up to every level, as in one process.

A level starts when every driver of it has reached the :class:`Barrier` (an async actor): the engine
releases them together, with no wall clock involved. Finished records are converted to ``ttft.turn``
dicts a few per loop pass (a level's streams end together; converting them all at once would stall
the streams still running) and handed on in batches about every ``BATCH_S``, each with the driver's
running counts for the head's progress line. The head takes batches by long poll and acknowledges
what it got, so a reply lost on the way is sent again rather than lost, and a driver whose node goes
away has already handed on everything up to its last batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import socket
import threading
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any

import psutil
import ray

from ....telemetry.bench.requests import Mode
from .. import event_loop
from ..driver import LoadConfig, run_level
from ..outcome import Finished, Progress
from ..runner import BackendSpec, build_backend, warmup_workload

# How often a driver hands its finished records on while a level runs: each batch is work on the driver's
# process (converting, pickling, Ray's reply) while streams are being stamped; twice a second keeps the
# progress line live at a cost measured within noise (tests/benchmarks/cluster_fidelity.py).
BATCH_S = 0.5
CONVERT_PER_PASS = 16  # records turned into dicts per loop pass (~80 us each on a 2-core machine)


@dataclass(frozen=True, slots=True)
class Job:
    """One driver's part of one level."""

    key: str  # the level's barrier
    mode: Mode  # the warm-up is closed loop whatever the levels are
    level: float  # the whole level (written in every record)
    share: float  # this driver's users, or requests/s
    requests: int
    start_index: int  # its prompts' numbers: unique across the run
    level_index: int
    warmup: bool
    worker: int  # the driver's number in the run
    first_user: int = 0  # its first closed-loop user's number across the level (users pick shared prefixes)
    part: tuple[int, int] = (0, 1)  # a trace's split: this driver sends every request at part[0] mod part[1]


@dataclass(frozen=True, slots=True)
class Batch:
    """What a driver hands the head: finished records, its running counts, and at the end its client health."""

    seq: int
    records: list[dict[str, Any]]
    key: str = ""  # the level it belongs to (its job's key)
    done: int = 0
    errors: int = 0
    output_tokens: int = 0
    in_flight: int = 0
    last_ttft_ms: float | None = None
    last: bool = False  # the level's final batch
    client: dict[str, Any] | None = None
    error: str | None = None  # the level failed on this driver (not a request's error: those are records)
    cancelled: bool = False


def ttft_version() -> str | None:
    """This installation's ttft version (a node that runs another one is said)."""
    try:
        return metadata.version("ttft")
    except metadata.PackageNotFoundError:
        return None


class Driver:
    """The load driver of one Ray actor (``ray.remote(Driver)``, a threaded actor: calls run on Ray's threads)."""

    def __init__(self, spec: BackendSpec, cfg: LoadConfig, run_id: str, pool: int, barrier: Any, name: str) -> None:
        self.name = name
        self._spec = spec
        self._cfg = replace(cfg, workers=1)
        self._run_id = run_id
        self._barrier = barrier
        factory = event_loop.loop_factory() if spec.fast_loop else None
        self._loop = factory() if factory is not None else asyncio.new_event_loop()
        self._loop_name = event_loop.loop_name(factory)
        self._thread = threading.Thread(target=self._loop.run_forever, name="ttft-driver", daemon=True)
        self._thread.start()
        self._cond = threading.Condition()
        self._batches: list[Batch] = []
        self._seq = 0
        self._progress: Progress | None = None
        self._running: concurrent.futures.Future[None] | None = None
        self._node_id = ray.get_runtime_context().get_node_id()
        self._backend = asyncio.run_coroutine_threadsafe(self._build(pool), self._loop).result()

    async def _build(self, pool: int) -> Any:
        from ...otel.push import install

        install(eager=True)  # the turns reach a live OTel push too, when the node's environment sets one
        return build_backend(self._spec, pool)  # in the loop: the HTTP clients bind to it

    def info(self) -> dict[str, Any]:
        """Where this driver runs, for the summary's node list."""
        return {
            "node_id": self._node_id,
            "host": socket.gethostname(),
            "cpus": psutil.cpu_count(),
            "pid": os.getpid(),
            "event_loop": self._loop_name,
            "ttft": ttft_version(),
            "provider": getattr(self._backend, "provider", None),
            "api": getattr(self._backend, "api", None),
            "model": getattr(self._backend, "model", None),
        }

    def start(self, job: Job) -> None:
        """Begin ``job`` on the driver's loop: it waits at the barrier, then runs; batches follow by :meth:`take`."""
        with self._cond:
            self._batches.clear()  # the previous level's were all taken: its last batch ended the head's poll
            self._progress = None
        self._running = asyncio.run_coroutine_threadsafe(self._level(job), self._loop)

    def take(self, key: str, ack: int, wait_s: float) -> list[Batch]:
        """Level ``key``'s batches after ``ack`` (the last one the head got), waiting up to ``wait_s`` for one.

        A threaded actor does not keep its calls in order: the head's first ``take`` of a level may run
        before that level's ``start``, while the previous level's last batch is still held. Batches are
        therefore matched by level, never by sequence alone (that stale last batch once ended a level's
        poll before it began, and the node's whole level went unread)."""
        with self._cond:
            self._batches = [b for b in self._batches if b.seq > ack]
            mine = [b for b in self._batches if b.key == key]
            if not mine:
                self._cond.wait(wait_s)
                mine = [b for b in self._batches if b.key == key]
            return mine

    def stop(self) -> None:
        """Cancel the level in flight (Ctrl-C at the head): its finished and in-flight records still come."""
        if self._running is not None:
            self._running.cancel()

    def close(self) -> None:
        async def close() -> None:
            await self._backend.aclose()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    # --- on the driver's loop ---------------------------------------------------------
    async def _level(self, job: Job) -> None:
        pending: list[Finished] = []
        client: dict[str, Any] | None = None
        error: str | None = None
        cancelled = False

        def progress(p: Progress) -> None:
            self._progress = p

        try:
            await self._barrier.wait.remote(job.key, self.name)
            flusher = asyncio.get_running_loop().create_task(self._flush_every(pending, job))
            try:
                res = await run_level(
                    self._backend,
                    replace(
                        self._cfg,
                        mode=job.mode,
                        workload=warmup_workload(self._cfg) if job.warmup else self._cfg.workload,
                    ),
                    job.share,
                    run_id=self._run_id,
                    level_index=job.level_index,
                    start_index=job.start_index,
                    requests=job.requests,
                    warmup=job.warmup,
                    worker=job.worker,
                    on_progress=progress,
                    on_record=pending.append,
                    first_user=job.first_user,
                    part=job.part,
                )
                client = res.client
            finally:
                flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flusher
        except asyncio.CancelledError:  # stopped: the records in flight were recorded as cancelled
            cancelled = True
        except Exception as exc:  # the level could not run here (not a request's error: those are records)
            error = f"{type(exc).__name__}: {exc}"
        rest = [self._to_dict(f, job) for f in pending]
        self._publish(job.key, rest, last=True, client=client, error=error, cancelled=cancelled)
        from ...otel.push import installed

        if (push := installed()) is not None:
            push.flush()

    async def _flush_every(self, pending: list[Finished], job: Job) -> None:
        while True:
            await asyncio.sleep(BATCH_S)
            out: list[dict[str, Any]] = []
            try:
                while pending:
                    chunk = pending[:CONVERT_PER_PASS]
                    del pending[:CONVERT_PER_PASS]
                    out.extend(self._to_dict(f, job) for f in chunk)
                    await asyncio.sleep(0)  # the streams' chunks are read between chunks of this work
            finally:
                self._publish(job.key, out)  # converted records go on even when the level is stopped midway

    def _to_dict(self, f: Finished, job: Job) -> dict[str, Any]:
        d = f.to_dict()
        tags = d["extra"]["bench"]
        tags["level"] = job.level  # the whole level, not this driver's share
        tags["node"] = self._node_id
        return d

    def _publish(self, key: str, records: list[dict[str, Any]], **end: Any) -> None:
        p = self._progress
        with self._cond:
            self._seq += 1
            self._batches.append(
                Batch(
                    self._seq,
                    records,
                    key,
                    done=p.done if p else 0,
                    errors=p.errors if p else 0,
                    output_tokens=p.output_tokens if p else 0,
                    in_flight=p.in_flight if p else 0,
                    last_ttft_ms=p.last_ttft_ms if p else None,
                    **end,
                )
            )
            self._cond.notify_all()


class Barrier:
    """Where a level's drivers wait until all have arrived (an async actor: its methods share one loop).

    The head names the parties (:meth:`expect`); a driver lost before it arrived is struck off
    (:meth:`leave`), so the others are not held for it."""

    def __init__(self) -> None:
        self._expected: dict[str, set[str]] = {}
        self._arrived: dict[str, set[str]] = {}
        self._open: dict[str, asyncio.Event] = {}

    def _event(self, key: str) -> asyncio.Event:
        return self._open.setdefault(key, asyncio.Event())

    def _check(self, key: str) -> None:
        if key in self._expected and self._expected[key] <= self._arrived.get(key, set()):
            self._event(key).set()

    async def expect(self, key: str, names: list[str]) -> None:
        self._expected[key] = set(names)
        self._check(key)

    async def wait(self, key: str, name: str) -> None:
        self._arrived.setdefault(key, set()).add(name)
        self._check(key)
        await self._event(key).wait()

    async def leave(self, key: str, name: str) -> None:
        self._expected.get(key, set()).discard(name)
        self._check(key)

    async def forget(self, key: str) -> None:
        for table in (self._expected, self._arrived, self._open):
            table.pop(key, None)
