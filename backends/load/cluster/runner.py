"""A bench run's levels on a Ray cluster: one driver per node, or ``--workers N`` spread over the nodes.

:class:`ClusterRunner` answers what :class:`backends.load.runner.LoadRunner` answers (the warm-up, a
level, a capacity probe, a level's figures), so ``ttft bench`` runs the same steps whichever runs the
load. On entering it connects to the cluster (or starts ``local:N``), reserves one CPU per driver in a
placement group (``STRICT_SPREAD``: one per node; ``SPREAD`` with ``--workers``) and starts the
drivers (:class:`backends.load.cluster.driver.Driver`). Each level is split over the drivers as
``--workers`` splits it over processes; the drivers start together at the engine's barrier, and the
head long-polls each for batches, which go to ``turns.jsonl`` as they arrive and add up into one
progress line for the whole cluster.

Faults: a driver whose node goes away (Ray says the actor died, or it stays unreachable for
``LOST_AFTER_S``) is lost: what it sent is kept, its level is marked partial with the node named
(:mod:`telemetry.bench.cluster`), and the later levels are split over the drivers left. Ctrl-C stops
every driver; their finished and in-flight records still come back (for up to ``STOP_WAIT_S``) before
the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from ....telemetry.bench.cluster import Node, Share, cluster_block, level_figures
from ....telemetry.bench.merge import worst_client
from ....telemetry.bench.requests import Mode, level_label
from ....telemetry.bench.slo import SLO
from ....telemetry.errors import ErrorKind, TtftError
from ....telemetry.log.urls import redact_url
from ...base import Backend
from ..driver import LoadConfig
from ..outcome import LevelCancelled, LevelResult, Progress
from ..runner import BackendSpec, merge_clients, parts, pool_size, warmup_workload
from .address import ClusterAddress, loopback_elsewhere, unreachable
from .driver import Barrier, Batch, Driver, Job, ttft_version
from .local import LocalCluster

T = TypeVar("T")

PLACE_TIMEOUT_S = 120.0  # for the drivers' CPUs to be reserved, and again for the drivers to start
TAKE_WAIT_S = 0.5  # a long poll's wait for the next batch
LOST_AFTER_S = 10.0  # a driver unreachable this long is lost (Ray says so sooner when its node is declared dead)
STOP_WAIT_S = 15.0  # after Ctrl-C, how long the head waits for the drivers' last records
WARMUP_INDEX = 10**6  # warm-up prompts are numbered apart from the measured ones, as in one process
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # the ones tui.signals and asyncio handle
HINT = "every node needs ttft installed (the same version as here), with Ray: pip install 'ttft[cluster]'"


class ClusterError(TtftError, RuntimeError):
    """The cluster cannot run the bench (unreachable, no room, a driver that does not start): says why."""

    def __init__(self, message: str, hint: str | None = None, kind: ErrorKind = ErrorKind.CLUSTER) -> None:
        super().__init__(message, kind=kind, hint=hint)


@dataclass(eq=False)
class ClusterLevel(LevelResult):
    """A level run on the cluster: its records and, per node, its share (for the union's figures)."""

    shares: list[Share] = field(default_factory=list)


@dataclass(eq=False)
class _Handle:
    """One driver actor as the head sees it."""

    index: int
    name: str
    actor: Any
    node: Node
    lost: str | None = None


@dataclass
class _Got:
    """What one driver's level brought back."""

    records: list[dict[str, Any]] = field(default_factory=list)
    client: dict[str, Any] | None = None
    lost: str | None = None
    error: str | None = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _route_ray_messages(path: Path | None) -> None:
    """Ray's driver prints the cluster's own messages (a node marked dead, say) straight to stdout, colour
    codes and all, in the middle of the table; they go to ``path`` instead (the run's ``ray.log``), and
    the bench says what matters in its own words. Ray offers no switch for it: this replaces the one
    function its listener calls, where that function exists."""
    from ray._private import worker

    if not hasattr(worker, "print_to_stdstream"):
        return

    def to_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        if path is None:
            return
        with contextlib.suppress(OSError), path.open("a", encoding="utf-8") as f:
            f.writelines(f"({data.get('pid')}) {line}\n" for line in data.get("lines") or ())

    setattr(worker, "print_to_stdstream", to_log)  # noqa: B010 (a module's attribute, not a typo'd access)


def _round_robin(handles: Sequence[_Handle]) -> list[_Handle]:
    """The drivers ordered one per node in turn: a level with fewer users than drivers still spans the nodes."""
    by_node: dict[str, list[_Handle]] = {}
    for h in handles:
        by_node.setdefault(h.node.node_id, []).append(h)
    ordered = []
    for k in range(max((len(hs) for hs in by_node.values()), default=0)):
        ordered += [hs[k] for hs in by_node.values() if k < len(hs)]
    return ordered


def _why_lost(exc: BaseException) -> str:
    if isinstance(exc, ActorDiedError):
        return "its driver died (the node or its process went away)"
    return f"{type(exc).__name__}: {_first_line(exc)}"


class ClusterRunner:
    """The levels of a bench over the drivers of a Ray cluster (see the module's docstring)."""

    streams_records = True  # records reach ``on_records`` as they arrive, not with the level's result

    def __init__(
        self,
        cfg: LoadConfig,
        *,
        spec: BackendSpec,
        address: ClusterAddress,
        workers: int | None = None,
        run_id: str = "bench",
        on_progress: Callable[[Progress], None] | None = None,
        on_records: Callable[[list[dict[str, Any]]], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        on_fault: Callable[[str], None] | None = None,
        ray_log: Path | None = None,
    ) -> None:
        self.cfg = cfg
        self.spec = spec
        self.address = address
        self.workers = workers
        self.run_id = run_id
        self.backend: Backend | None = None  # the drivers hold the backends
        self.on_progress = on_progress
        self.on_records = on_records or (lambda _records: None)
        self.on_note = on_note or (lambda _text: None)  # what it is doing (left out with -q)
        self.on_fault = on_fault or self.on_note  # a node lost: always said
        self.ray_log = ray_log
        self._local: LocalCluster | None = None
        self._connected = False
        self._pg: PlacementGroup | None = None
        self._barrier: Any = None
        self._drivers: list[_Handle] = []
        self._nodes: list[Node] = []
        self._round = 0
        self._history: list[list[Share]] = []
        self._lost: list[tuple[Node, str, str]] = []
        self._counts: dict[int, Batch] = {}  # each driver's latest batch: its running counts
        self._level_total = 0

    # --- the cluster's lifetime ----------------------------------------------------------
    async def __aenter__(self) -> ClusterRunner:
        try:
            if self.address.local_nodes is not None:
                per_node = math.ceil((self.workers or self.address.local_nodes) / self.address.local_nodes)
                self.on_note(f"starting a local Ray cluster of {self.address.local_nodes} node(s) ...")
                self._local = LocalCluster(self.address.local_nodes, cpus=per_node)
                await _in_thread(self._local.start, on_cancel=self._local.cancel)
            # Ray's core worker puts its own handler on SIGTERM (a stack dump, then abort): the bench's own
            # handlers (tui.signals: stop like Ctrl-C, keep what arrived) are put back once it is connected.
            handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
            try:
                await _in_thread(self._connect)
            finally:
                for s, handler in handlers.items():
                    if handler is not None:
                        signal.signal(s, handler)
            await self._place()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        closing = [d.actor.close.remote() for d in self._drivers if d.lost is None]
        if closing:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), 10)
        await _in_thread(self._teardown)

    def _teardown(self) -> None:
        if self._connected:
            for handle in [*(d.actor for d in self._drivers), self._barrier]:
                if handle is not None:
                    with contextlib.suppress(Exception):
                        ray.kill(handle, no_restart=True)
            if self._pg is not None:
                with contextlib.suppress(Exception):
                    remove_placement_group(self._pg)
            with contextlib.suppress(Exception):
                ray.shutdown()
            self._connected = False
        if self._local is not None:
            self._local.stop()
            self._local = None

    def _shown(self) -> str:
        return redact_url(self.address.resolve()) or self.address.text

    def _connect(self) -> None:
        logging.getLogger("ray").setLevel(logging.ERROR)  # before init, so its start-up notes stay quiet too
        local = self._local
        address = local.address if local is not None else self.address.resolve()
        if (why := unreachable(address)) is not None:
            raise ClusterError(
                f"cannot reach the Ray cluster at {self._shown()}: {why}",
                hint="start one (ray start --head), check RAY_ADDRESS, or try --cluster local:2",
            )
        try:
            ray.init(
                address=address,
                namespace=f"ttft-{self.run_id}",
                logging_level=logging.ERROR,
                log_to_driver=False,
                _node_ip_address="127.0.0.1" if local is not None else None,  # no look-up of an outside address
            )
        except ConnectionError as exc:
            raise ClusterError(f"cannot reach the Ray cluster at {self._shown()}: {_first_line(exc)}") from None
        except ValueError as exc:  # ray://... without Ray Client installed, and the like: Ray's own sentence
            raise ClusterError(
                f"cannot connect to {self._shown()}: {_first_line(exc)}", kind=ErrorKind.CONFIG_ERROR
            ) from None
        self._connected = True
        _route_ray_messages(self.ray_log)

    async def _place(self) -> None:
        nodes = [
            n for n in await _in_thread(ray.nodes) if n.get("Alive") and (n.get("Resources") or {}).get("CPU", 0) >= 1
        ]
        if not nodes:
            raise ClusterError("the Ray cluster has no live node with a CPU for a driver")
        count = self.workers or len(nodes)
        strategy = "SPREAD" if self.workers else "STRICT_SPREAD"
        cpus = sum(int((n.get("Resources") or {}).get("CPU", 0)) for n in nodes)
        if count > cpus:  # would wait for room that never comes
            raise ClusterError(
                f"{count} drivers of one CPU each do not fit in the cluster's {cpus} CPU(s)",
                hint=f"give --workers at most {cpus}",
                kind=ErrorKind.BAD_SPEC,
            )
        self._pg = placement_group([{"CPU": 1}] * count, strategy=strategy)
        try:
            await asyncio.wait_for(_awaitable(self._pg.ready()), PLACE_TIMEOUT_S)
        except TimeoutError:
            raise ClusterError(
                f"the cluster found no room for {count} driver(s) of one CPU each within {PLACE_TIMEOUT_S:g} s "
                f"({len(nodes)} node(s), {cpus} CPU(s) in all, some perhaps in use)",
                hint="give --workers at most the free CPUs",
            ) from None
        self._barrier = ray.remote(Barrier).options(num_cpus=0).remote()
        remote = ray.remote(Driver)
        actors: list[Any] = [
            remote.options(
                num_cpus=1,
                max_concurrency=8,  # start, take, stop and close answer while a level runs
                max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(self._pg, placement_group_bundle_index=i),
            ).remote(self.spec, self.cfg, self.run_id, pool_size(self.cfg), self._barrier, f"driver-{i}")
            for i in range(count)
        ]
        try:
            infos = await asyncio.wait_for(
                asyncio.gather(*(_awaitable(a.info.remote()) for a in actors)), PLACE_TIMEOUT_S
            )
        except TimeoutError:
            raise ClusterError(f"the drivers did not start within {PLACE_TIMEOUT_S:g} s", hint=HINT) from None
        except RayError as exc:
            self._drivers = [_Handle(i, f"driver-{i}", a, Node("?", "?")) for i, a in enumerate(actors)]
            raise ClusterError(f"a driver did not start on the cluster: {_first_line(exc)}", hint=HINT) from None
        here = ttft_version()
        by_node: dict[str, Node] = {}
        handles = []
        for i, (actor, info) in enumerate(zip(actors, infos, strict=True)):
            node = by_node.setdefault(info["node_id"], Node(info["node_id"], str(info["host"]), info.get("cpus")))
            handles.append(_Handle(i, f"driver-{i}", actor, node))
            if here and info.get("ttft") and info["ttft"] != here:
                self.on_note(f"{node.label()} runs ttft {info['ttft']}, this machine {here}")
        self._drivers = _round_robin(handles)
        self._nodes = list(by_node.values())
        if (
            why := loopback_elsewhere(self.spec.base_url, [n.host for n in self._nodes], socket.gethostname())
        ) is not None:
            self.on_fault(why)  # said even with -q: those drivers load some other server, or none
        self.on_note(
            f"{len(self._drivers)} driver(s) on {len(self._nodes)} node(s) of the Ray cluster at {self._shown()}"
        )

    # --- the runner's questions ---------------------------------------------------------------
    async def warmup(self) -> ClusterLevel | None:
        """The unmeasured requests, at least one per driver, so every driver's connections are open."""
        if self.cfg.warmup <= 0:
            return None
        alive = self._alive()
        n = max(self.cfg.warmup, len(alive))
        return await self._run("concurrency", float(len(alive)), -1, n, WARMUP_INDEX, warmup=True)

    async def level(self, level_index: int) -> ClusterLevel:
        return await self.probe(
            self.cfg.levels[level_index],
            requests=self.cfg.requests,
            level_index=level_index,
            start_index=level_index * self.cfg.requests,
        )

    async def probe(self, level: float, *, requests: int, level_index: int, start_index: int) -> ClusterLevel:
        res = await self._run(self.cfg.mode, level, level_index, requests, start_index)
        self._history.append(res.shares)
        return res

    def figures(self, res: LevelResult, slo: SLO | None) -> tuple[dict[str, Any], list[str]]:
        """The level's figures over the union of the nodes' records (``telemetry.bench.cluster``)."""
        shares = res.shares if isinstance(res, ClusterLevel) else []
        return level_figures(res.mode, shares, slo=slo)

    def describe(self) -> dict[str, Any]:
        """The summary's ``cluster`` block, and the drivers in all as its ``workers``."""
        placed: dict[str, int] = {}
        for d in self._drivers:
            placed[d.node.node_id] = placed.get(d.node.node_id, 0) + 1
        block = cluster_block(
            engine="ray",
            version=ray.__version__,
            address=self.address.text if self.address.local else self._shown(),
            nodes=self._nodes,
            placed=placed,
            levels=self._history,
            lost=self._lost,
        )
        return {"workers": len(self._drivers), "cluster": block}

    # --- one level ------------------------------------------------------------------------
    def _alive(self) -> list[_Handle]:
        return [d for d in self._drivers if d.lost is None]

    async def _run(
        self, mode: Mode, level: float, level_index: int, requests: int, start_index: int, *, warmup: bool = False
    ) -> ClusterLevel:
        alive = self._alive()
        if not alive:
            raise ClusterError("every driver was lost: no node is left to run the load")
        cfg = replace(self.cfg, mode=mode, workload=warmup_workload(self.cfg) if warmup else self.cfg.workload)
        split_up = parts(cfg, mode, level, requests, start_index, min(len(alive), max(1, requests)))
        used = alive[: len(split_up)]
        key = f"{self.run_id}-{self._round}"
        self._round += 1
        jobs = [
            Job(
                key, mode, level, p.share, p.requests, p.start_index, level_index, warmup, d.index, p.first_user, p.part
            )
            for d, p in zip(used, split_up, strict=True)
        ]
        self._counts = {}
        self._level_total = requests
        await _awaitable(self._barrier.expect.remote(key, [d.name for d in used]))
        for d, job in zip(used, jobs, strict=True):
            d.actor.start.remote(job)  # a driver already gone shows up in its first take
        t0 = time.monotonic()
        label = "warm-up" if warmup else level_label(mode, level)
        nodes = len({d.node.node_id for d in used})
        loop = asyncio.get_running_loop()
        collectors = [
            loop.create_task(self._collect(d, job, label, t0, nodes)) for d, job in zip(used, jobs, strict=True)
        ]
        try:
            await asyncio.wait(collectors)  # not gather: a Ctrl-C here must not cancel the collectors
        except asyncio.CancelledError:
            await self._stop(used, collectors)
            raise LevelCancelled([]) from None  # what arrived went to on_records already
        finally:
            self._barrier.forget.remote(key)
        got = [c.result() for c in collectors]
        for d, g in zip(used, got, strict=True):
            if g.error is not None:
                raise ClusterError(f"the driver on {d.node.label()} could not run the level: {g.error}")
        return self._level_result(mode, level, used, jobs, got)

    async def _stop(self, used: Sequence[_Handle], collectors: list[asyncio.Task[_Got]]) -> None:
        """Ctrl-C: every driver stops its level; their last records are waited for, for a while."""
        self.on_note("stopping every driver; waiting for the records they hold ...")
        for d in used:
            if d.lost is None:
                with contextlib.suppress(Exception):
                    d.actor.stop.remote()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait(collectors, timeout=STOP_WAIT_S)
        for c in collectors:
            c.cancel()

    async def _collect(self, d: _Handle, job: Job, label: str, t0: float, nodes: int) -> _Got:
        got = _Got()
        ack = 0
        unreachable_since: float | None = None
        while True:
            try:
                batches: list[Batch] = await _awaitable(d.actor.take.remote(job.key, ack, TAKE_WAIT_S))
                unreachable_since = None
            except ActorUnavailableError:  # maybe a blip: a later take gets every batch not acknowledged
                now = time.monotonic()
                unreachable_since = unreachable_since or now
                if now - unreachable_since < LOST_AFTER_S:
                    await asyncio.sleep(0.5)
                    continue
                return self._lose(d, job, got, label, f"its driver was unreachable for {LOST_AFTER_S:g} s")
            except RayError as exc:
                return self._lose(d, job, got, label, _why_lost(exc))
            for b in batches:
                if b.seq <= ack:
                    continue
                ack = b.seq
                if b.records:
                    got.records.extend(b.records)
                    self.on_records(b.records)
                self._counts[d.index] = b
                self._progress(job, t0, nodes)
                if b.last:
                    got.client, got.error = b.client, b.error
                    return got

    def _lose(self, d: _Handle, job: Job, got: _Got, label: str, reason: str) -> _Got:
        d.lost = got.lost = reason
        self._lost.append((d.node, label, reason))
        with contextlib.suppress(Exception):
            self._barrier.leave.remote(job.key, d.name)
        with contextlib.suppress(Exception):
            ray.kill(d.actor, no_restart=True)
        self.on_fault(
            f"lost {d.node.label()} during {label}: {reason}; its {len(got.records)} record(s) that arrived are kept"
            + ("" if job.warmup else ", the level is partial")
        )
        return got

    def _progress(self, job: Job, t0: float, nodes: int) -> None:
        if self.on_progress is None:
            return
        counts = list(self._counts.values())
        ttfts = [b.last_ttft_ms for b in counts if b.last_ttft_ms is not None]
        self.on_progress(
            Progress(
                mode=job.mode,
                level=job.level,
                level_index=job.level_index,
                levels=len(self.cfg.levels),
                done=sum(b.done for b in counts),
                total=self._level_total,
                errors=sum(b.errors for b in counts),
                in_flight=sum(b.in_flight for b in counts),
                elapsed_s=time.monotonic() - t0,
                warmup=job.warmup,
                last_ttft_ms=ttfts[-1] if ttfts else None,
                output_tokens=sum(b.output_tokens for b in counts),
                nodes=nodes,
            )
        )

    def _level_result(
        self, mode: Mode, level: float, used: Sequence[_Handle], jobs: Sequence[Job], got: Sequence[_Got]
    ) -> ClusterLevel:
        per_node: dict[str, list[tuple[_Handle, Job, _Got]]] = {}
        for item in zip(used, jobs, got, strict=True):
            per_node.setdefault(item[0].node.node_id, []).append(item)
        shares = []
        for items in per_node.values():
            clients = [g.client for _, _, g in items if g.client is not None]
            reasons = [g.lost for _, _, g in items if g.lost is not None]
            shares.append(
                Share(
                    node=items[0][0].node,
                    workers=len(items),
                    level=sum(j.share for _, j, _ in items),
                    asked=sum(j.requests for _, j, _ in items),
                    records=[r for _, _, g in items for r in g.records],
                    client=(clients[0] if len(clients) == 1 else merge_clients(clients)) if clients else None,
                    lost="; ".join(reasons) if reasons else None,
                )
            )
        records = sorted((r for g in got for r in g.records), key=lambda r: r["extra"]["bench"]["index"])
        wall = max(
            ((r["extra"]["bench"]["sent_at_ms"] + ((r.get("events_ms") or {}).get("end") or 0)) for r in records),
            default=0.0,
        )
        client = worst_client([s.client for s in shares]) or {}
        return ClusterLevel(mode, level, records, client, wall / 1000, shares=shares)


async def _awaitable(ref: Any) -> Any:
    """An ObjectRef as a coroutine (``asyncio.wait_for`` and ``gather`` take those)."""
    return await ref


async def _in_thread(fn: Callable[[], T], on_cancel: Callable[[], None] | None = None) -> T:
    """``fn`` in a thread; cancelled, it tells ``fn`` (``on_cancel``) and still waits for it to end, so what
    it started can be stopped."""
    task = asyncio.ensure_future(asyncio.to_thread(fn))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if on_cancel is not None:
            on_cancel()
        with contextlib.suppress(BaseException):
            await task
        raise
