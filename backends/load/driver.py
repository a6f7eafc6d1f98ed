"""The load driver behind ``ttft bench``: many concurrent turns, each recorded like any other.

Every request goes through :func:`backends.turn.stream_turn` with its own recorder, so every
request is a complete ``ttft.turn`` record (tagged ``extra.bench``), ended through
:mod:`backends.finish` (in batches, ``finish_turns``) and so seen by the same sinks (OpenTelemetry)
as a chat turn.
Requests start, and their records are ended, through a :class:`backends.load.spread.PassSpreader`:
a level's streams end together on a batching server, and that burst of work is spread over passes
of the event loop rather than stalling the streams still running. Two kinds of level:

- closed loop (``mode="concurrency"``): ``c`` users, each sending its next request as soon
  as the previous one ends, until ``requests`` are done;
- open loop (``mode="rate"``): ``requests`` sent on a seeded Poisson schedule at ``rate``/s,
  whatever the server does (``max_in_flight`` caps the streams in flight);
- a trace (``mode="trace"``): the trace's requests sent at its own offsets, divided by the level
  (the ``--speedup``), with its lengths and its shared blocks.

What each request is comes from the config's :class:`telemetry.bench.workload.plan.Workload`: drawn
lengths, a shared prefix, a dataset's prompt, a trace's blocks; with ``turns`` > 1 every user (or
every open-loop arrival) holds a conversation, each turn resending the whole history with the
model's real answers in it (the answer's text is in the recorder as soon as its stream ends).

The client watches itself: an event-loop lag monitor (a 10 ms ticker measuring how late it
wakes) and the process CPU (psutil) over each level, plus, in open loop, how late each
request left against its schedule. ``telemetry.bench.aggregate.client_bottleneck`` turns those into
a warning when the client rather than the server limited the figures. This module is one
process's level; :mod:`backends.load.runner` runs a bench's levels, here or over worker processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ...telemetry import events as ev
from ...telemetry.bench.arrivals import poisson_schedule
from ...telemetry.bench.probe import first_at_s, next_at_s, probe_index
from ...telemetry.bench.requests import Mode
from ...telemetry.bench.workload.lengths import Lengths
from ...telemetry.bench.workload.plan import PlannedConversation, PlannedTurn, Workload
from ...telemetry.cost import warm as warm_prices
from ...telemetry.metrics import percentiles
from ...telemetry.probe.saved import SavedProbe
from ...telemetry.settings import TurnSettings
from ..agent.host import ToolHost
from ..agent.loop import AgentSettings, AgentTurn
from ..base import Backend, ChatRequest, Message
from ..finish import finish_turn
from ..transport import pacing
from ..turn import new_recorder, stream_turn, target_probe
from .outcome import Finished, LevelCancelled, LevelResult, Progress, as_dicts
from .prompts import prefix_text, synthetic_prompt, trace_prompt
from .spread import PassSpreader
from .tools import ToolsConfig, open_host
from .tools import consent as bench_consent
from .watch import ClientWatch


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
    # Closed loop: the users start spread evenly over this many seconds rather than all at once (as
    # AIPerf's --concurrency-ramp-duration), so their openings, and so their endings, do not land in one
    # loop pass. 0: all at once. Each request is measured alike either way; the level's wall clock
    # (and so its throughput) includes the ramp.
    ramp_s: float = 0.0
    # Spread the level's openings and endings over loop passes (backends.load.spread). False: each
    # request opens at once and all ended records are ended in one pass, as before it existed (for
    # benchmarks that measure what spreading buys).
    spread: bool = True
    # What the requests are (lengths, prefixes, turns, a dataset or a trace); None: fixed-length unique
    # prompts of ``input_tokens`` and answers of ``max_output_tokens``, one turn each.
    workload: Workload | None = None
    # One more user beside each measured level's load, sending at this many requests/s (``--probe-rate``;
    # telemetry.bench.probe): its requests are tagged ``probe`` and are not the load's. None: no such user.
    probe_rate: float | None = None
    # Tools (``--tool-latency``, ``--mcp``; backends.load.tools): each request is an agent turn. None: plain requests.
    tools: ToolsConfig | None = None

    def plan(self) -> Workload:
        """The workload these requests follow (the plain one when none was given)."""
        return self.workload if self.workload is not None else _plain(self.input_tokens)

    def settings(self) -> TurnSettings:
        return (self.turn or TurnSettings()).with_(
            max_output_tokens=self.max_output_tokens,
            temperature=self.temperature,
            max_retries=self.max_retries,
        )


@functools.cache
def _plain(input_tokens: int) -> Workload:
    return Workload(input=Lengths.fixed(input_tokens))


@dataclass
class _Level:
    """What every request of one level shares: built once, not per request."""

    backend: Backend
    cfg: LoadConfig
    workload: Workload
    run_id: str
    mode: Mode
    level: float
    level_index: int
    origin_ns: int
    warmup: bool
    worker: int
    on_cancel: Callable[[Finished], None] | None
    on_finished: Callable[[Finished], None]
    spreader: PassSpreader
    settings: TurnSettings
    probe: SavedProbe | None
    system: tuple[Message, ...] = ()
    host: ToolHost | None = None  # the run's tools (cfg.tools), shared by every stream of the level
    by_length: dict[int, TurnSettings] = field(default_factory=dict)  # the settings per max_tokens asked

    def settings_for(self, output_tokens: int) -> TurnSettings:
        s = self.by_length.get(output_tokens)
        if s is None:
            s = self.by_length[output_tokens] = self.settings.with_(max_output_tokens=output_tokens)
        return s

    def messages(
        self, history: tuple[Message, ...], conv: PlannedConversation, turn: PlannedTurn, prefix: int | None
    ) -> tuple[Message, ...]:
        """What a turn sends: the history so far, then its new user text."""
        return (*history, Message("user", self.user_text(conv, turn, prefix, turn is conv.turns[0])))

    def user_text(self, conv: PlannedConversation, turn: PlannedTurn, prefix: int | None, first: bool) -> str:
        """A turn's new user text: the prefix (first turn only), then a dataset's, a trace's or synthetic text."""
        seed, w = self.cfg.seed, self.workload
        if turn.text is not None:
            body = turn.text
        elif w.trace:
            body = trace_prompt(turn.hash_ids, turn.input_tokens, seed, self.level_index, turn.index)
        else:
            body = synthetic_prompt(turn.index, turn.input_tokens, seed)
        if prefix is not None and first:
            return prefix_text(prefix, w.prefix_tokens, seed, self.level_index) + body
        return body


async def _one(
    lv: _Level,
    messages: tuple[Message, ...] | Callable[[], tuple[Message, ...]],
    turn: PlannedTurn,
    bench: dict[str, Any],
    tools: bool = True,
) -> tuple[bool, str, tuple[Message, ...]]:
    """One request: started when the spreader has room, its record ended by the spreader later
    (then ``on_finished``). Returns once its stream is over, with whether it ended ok, its answer and
    the messages it sent. ``messages``: ready, or made once the spreader lets it start (building a
    prompt is part of the pass's budget). With the level's tool host (and ``tools``), the request is one
    agent turn: model steps and tool calls until an answer (:func:`_agent_turn`)."""
    await lv.spreader.admit()
    sent = messages() if callable(messages) else messages
    request = ChatRequest(sent, lv.settings_for(turn.output_tokens))
    if tools and lv.host is not None:
        ok, answer = await _agent_turn(lv, lv.host, request, turn, bench)
        return ok, answer, sent
    recorder = new_recorder(
        lv.backend,
        request,
        session_id=lv.run_id,
        turn_index=turn.index,
        extra={"bench": bench},
        saved_probe=False,
        probe=lv.probe,
    )
    called = ev.now_ns()
    origin = lv.origin_ns
    try:
        await stream_turn(lv.backend, request, recorder)
    except asyncio.CancelledError:
        if lv.on_cancel is not None:  # stream_turn recorded it as cancelled, with what had arrived
            lv.on_cancel(Finished(finish_turn(recorder), called, origin))
        raise
    done = lv.on_finished
    lv.spreader.end_later(recorder, lambda record: done(Finished(record, called, origin)))
    return recorder.status == "ok", recorder.answer, sent


async def _agent_turn(
    lv: _Level, host: ToolHost, request: ChatRequest, turn: PlannedTurn, bench: dict[str, Any]
) -> tuple[bool, str]:
    """One request as a tool-using turn (``backends.agent.loop``): its one record joins every step and is
    handed on when the turn ends (also when cancelled). Returns whether it reached an answer, and that
    answer (the last model step's text: what the next turn of a conversation holds)."""
    assert lv.cfg.tools is not None
    agent = AgentTurn(
        lv.backend,
        request,
        host,
        bench_consent(),
        session_id=lv.run_id,
        turn_index=turn.index,
        settings=AgentSettings(
            max_steps=lv.cfg.tools.max_steps, extra={"bench": bench}, saved_probe=False, probe=lv.probe
        ),
    )
    called = ev.now_ns()
    try:
        record = await agent.run()
    except asyncio.CancelledError:
        if lv.on_cancel is not None and agent.result.record is not None:  # every step that arrived, as cancelled
            lv.on_cancel(Finished(agent.result.record, called, lv.origin_ns))
        raise
    lv.on_finished(Finished(record, called, lv.origin_ns))
    ok = record.status == "ok" and record.agent is not None and record.agent.stopped == "answer"
    models = agent.result.models
    return ok, models[-1].answer if models else ""


async def _conversation(
    lv: _Level,
    conv: PlannedConversation,
    prefix: int | None,
    user: int | None,
    scheduled_ms: float | None = None,
    first: tuple[Message, ...] | None = None,
) -> int:
    """Every turn of one conversation, in order: turn k sends the history (the earlier turns and the
    model's real answers to them) and its new user text. A turn that fails ends the conversation
    (its later turns would resend a history the user never got). Returns how many turns were not sent."""
    history: tuple[Message, ...] = lv.system
    many = len(conv.turns) > 1 or lv.workload.conversational
    for k, turn in enumerate(conv.turns):
        if k and lv.workload.think_time_s > 0:
            await asyncio.sleep(lv.workload.think_time_s)
        bench: dict[str, Any] = {
            "run_id": lv.run_id,
            "mode": lv.mode,
            "level": lv.level,
            "index": turn.index,
            "warmup": lv.warmup,
            "worker": lv.worker,
            "input_tokens": turn.input_tokens,  # the length drawn (a trace's: its whole prompt)
            "output_tokens": turn.output_tokens,  # the max_tokens asked
        }
        if many:
            bench.update(conversation=conv.number, turn=k + 1, turns=len(conv.turns))
        if prefix is not None:
            bench["prefix"] = prefix
        if user is not None:
            bench["user"] = user
        if scheduled_ms is not None and k == 0:
            bench["scheduled_at_ms"] = scheduled_ms
        messages: tuple[Message, ...] | Callable[[], tuple[Message, ...]]
        if k == 0 and first is not None:
            messages = first
        else:
            messages = functools.partial(lv.messages, history, conv, turn, prefix)
        ok, answer, sent = await _one(lv, messages, turn, bench)
        if not ok:
            return len(conv.turns) - k - 1
        # With tools, the next turn holds the final answer alone: the tool exchange stays inside its turn.
        history = (*sent, Message("assistant", answer))
    return 0


def probe_lengths(cfg: LoadConfig) -> tuple[int, int]:
    """What each probe request asks: the run's plain prompt length (the mean of a spread) and answer
    length (the mean of ``--output-tokens``, else ``max_output_tokens``)."""
    out = cfg.workload.output if cfg.workload is not None else None
    return cfg.input_tokens, (max(1, round(out.mean)) if out is not None else cfg.max_output_tokens)


async def _probe_user(lv: _Level, rate: float, load_over: asyncio.Event) -> None:
    """The user beside the load (``--probe-rate``; when it sends: telemetry.bench.probe): one plain,
    unique single-turn request at a time, from the level's start until ``load_over`` is set (a probe in
    flight then ends as it would). Its records go to ``lv.on_finished``, tagged ``probe``."""
    loop = asyncio.get_running_loop()
    base = loop.time() - (ev.now_ns() - lv.origin_ns) / 1e9  # the level's start on the loop's clock
    input_tokens, output_tokens = probe_lengths(lv.cfg)
    at = first_at_s(rate)
    for k in itertools.count():
        delay = base + at - loop.time()
        if delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(load_over.wait(), delay)
        if load_over.is_set():
            return
        index = probe_index(lv.level_index, k)
        bench: dict[str, Any] = {
            "run_id": lv.run_id,
            "mode": lv.mode,
            "level": lv.level,
            "index": index,
            "warmup": False,
            "worker": lv.worker,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "probe": True,
            "probe_rate": rate,
        }
        text = synthetic_prompt(index, input_tokens, lv.cfg.seed)
        await _one(
            lv, (*lv.system, Message("user", text)), PlannedTurn(index, input_tokens, output_tokens), bench, tools=False
        )
        at = next_at_s(at, loop.time() - base, rate)


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
    first_user: int = 0,
    part: tuple[int, int] = (0, 1),
    on_record: Callable[[Finished], None] | None = None,
    host: ToolHost | None = None,
) -> LevelResult:
    """Run one level in this process and return its records and the client's health.

    ``first_user``: the number of this process's first closed-loop user (with several worker
    processes, users are numbered across them: they pick the shared prefixes). ``part``: a trace is
    split over ``part[1]`` processes, this one sending every request whose place is ``part[0]``
    modulo that. With ``on_record``, each finished request (and, cancelled, each one in flight) goes to
    it as it ends instead of into the result, whose ``records`` are then empty: a caller that streams
    them on (a cluster's driver) converts them itself, in batches, and none is converted twice.
    ``host``: the run's tools (``cfg.tools``), started once and shared; without it a level with tools
    starts its own and ends it after."""
    if cfg.tools is not None and host is None:
        own = await open_host(cfg.tools)
        try:
            return await run_level(
                backend, cfg, level, run_id=run_id, level_index=level_index, start_index=start_index,
                requests=requests, warmup=warmup, start_at_ns=start_at_ns, worker=worker, on_progress=on_progress,
                first_user=first_user, part=part, on_record=on_record, host=own,
            )  # fmt: skip
        finally:
            await own.aclose()
    total = cfg.requests if requests is None else requests
    # The price table's import (0.2-0.3 s, once a process), before the level's clock: paid at the first
    # request's end, it stalled every stream in flight.
    warm_prices(getattr(backend, "price", None))
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
        return await LevelRun(
            backend=backend, cfg=cfg, level=level, run_id=run_id, level_index=level_index,
            start_index=start_index, total=total, warmup=warmup, start_at_ns=start_at_ns, worker=worker,
            on_progress=on_progress, first_user=first_user, part=part, on_record=on_record,
            host=host if cfg.tools is not None else None,
        ).run()  # fmt: skip
    finally:
        if gc_was_on:
            gc.enable()


@dataclass
class _Counts:
    """A level's running tallies, as its progress line shows them."""

    in_flight: int = 0
    errors: int = 0
    tokens: int = 0  # output tokens of the finished requests
    done: int = 0
    unsent: int = 0  # turns of conversations cut short


@dataclass
class LevelRun:
    """One level in this process (``run_level``'s arguments, named): :meth:`run` sends its requests,
    closed loop (:meth:`_closed`) or open loop and traces (:meth:`_open`), and collects their records."""

    backend: Backend
    cfg: LoadConfig
    level: float
    run_id: str
    level_index: int
    start_index: int
    total: int
    warmup: bool
    start_at_ns: int | None
    worker: int
    on_progress: Callable[[Progress], None] | None
    first_user: int
    part: tuple[int, int]
    on_record: Callable[[Finished], None] | None
    host: ToolHost | None
    counts: _Counts = field(default_factory=_Counts)
    records: list[Finished] = field(default_factory=list)
    late: list[float] = field(default_factory=list)  # open loop and traces: how late each request left
    tasks: list[asyncio.Task[None]] = field(default_factory=list)  # open loop: the sends started
    # Set as run() starts, in the order the level's clock needs (the watch first, then the origin):
    workload: Workload = field(init=False)
    origin: int = field(init=False)
    hand_on: Callable[[Finished], None] = field(init=False)
    spreader: PassSpreader = field(init=False)
    turns: int = field(init=False)
    lv: _Level = field(init=False)

    async def run(self) -> LevelResult:
        cfg, level, warmup = self.cfg, self.level, self.warmup
        mode = cfg.mode
        self.workload = workload = cfg.plan()
        watch = ClientWatch()
        watch.start()
        self.origin = self.start_at_ns if self.start_at_ns is not None else ev.now_ns()
        records = self.records
        self.hand_on = hand_on = records.append if self.on_record is None else self.on_record
        self.spreader = spreader = PassSpreader() if cfg.spread else PassSpreader(1 << 30, 1 << 30, 0, 0.0)
        self.turns = 1 if mode == "trace" else max(1, workload.turns)
        self.lv = lv = _Level(
            backend=self.backend,
            cfg=cfg,
            workload=workload,
            run_id=self.run_id,
            mode=mode,
            level=level,
            level_index=self.level_index,
            origin_ns=self.origin,
            warmup=warmup,
            worker=self.worker,
            on_cancel=hand_on,
            on_finished=self.finished,
            spreader=spreader,
            # the same for every request of the level: built and looked up once, not per request
            settings=cfg.settings(),
            probe=target_probe(self.backend),
            system=(Message("system", cfg.system),) if cfg.system else (),
            host=self.host,
        )
        t0 = time.monotonic()
        tasks = self.tasks
        active = pacing.ACTIVE.set(spreader)  # the transport's responses share the openings' budget
        load_over = asyncio.Event()
        side: list[asyncio.Task[None]] = []  # the probe user beside the load (made here: it shares the context)
        if cfg.probe_rate and not warmup:
            # its records are handed on as they end, never counted in the load's progress or lateness
            side.append(asyncio.create_task(_probe_user(replace(lv, on_finished=hand_on), cfg.probe_rate, load_over)))
        try:
            await (self._closed() if mode == "concurrency" else self._open())
            wall = time.monotonic() - t0  # the requests' span; ending the last records is not the server's time
            load_over.set()  # no probe leaves after the load's last request
            await asyncio.gather(*side)
            await spreader.drain()
        except asyncio.CancelledError:
            for t in (*tasks, *side):  # open loop: the sends already started are not children of a gather yet
                t.cancel()
            await asyncio.gather(*tasks, *side, return_exceptions=True)
            with contextlib.suppress(Exception):
                spreader.end_now()
            with contextlib.suppress(Exception):
                await watch.stop()
            raise LevelCancelled(as_dicts(records)) from None
        finally:
            for t in side:  # a load that failed leaves no user sending beside it
                t.cancel()
            pacing.ACTIVE.reset(active)
        client = await watch.stop()
        dicts = as_dicts(records)
        if self.late:
            client["send_late_ms"] = percentiles(self.late).to_dict()
        client["workers"] = 1
        return LevelResult(mode, level, dicts, client, wall)

    def finished(self, f: Finished) -> None:
        """A load request's record is ended: hand it on, count it, show the progress."""
        self.hand_on(f)
        state = self.counts
        state.done += 1
        if (scheduled := f.record.extra["bench"].get("scheduled_at_ms")) is not None:
            self.late.append(f.sent_at_ms - scheduled)
        if f.record.status != "ok":
            state.errors += 1
        state.tokens += int(f.record.tokens.output or 0)
        if self.on_progress is not None:
            self.on_progress(
                Progress(
                    mode=self.cfg.mode,
                    level=self.level,
                    level_index=self.level_index,
                    levels=len(self.cfg.levels),
                    done=state.done,
                    total=self.total - state.unsent,
                    errors=state.errors,
                    in_flight=state.in_flight,
                    elapsed_s=(ev.now_ns() - self.origin) / 1e9,
                    warmup=self.warmup,
                    last_ttft_ms=f.record.metrics.ttft_ms,
                    output_tokens=state.tokens,
                )
            )

    def plan(self, c: int, position: int | None = None) -> PlannedConversation:
        """The level's conversation number ``c`` (a trace's: at ``position`` in it)."""
        return self.workload.conversation(
            self.start_index + c * self.turns,
            seed=self.cfg.seed,
            default_output=self.cfg.max_output_tokens,
            position=position,
        )

    async def _closed(self) -> None:
        """Closed loop: ``level`` users, each sending its next conversation as soon as the last ends."""
        conversations = -(-self.total // self.turns)
        numbers = iter(range(conversations))
        users = max(1, min(int(self.level), conversations))
        await asyncio.gather(*(self._user(k, users, numbers) for k in range(users)))

    async def _user(self, k: int, users: int, numbers: Iterator[int]) -> None:
        if self.cfg.ramp_s > 0 and k:
            await asyncio.sleep(self.cfg.ramp_s * k / users)
        prefix = self.workload.prefix_of(self.first_user + k)
        for c in numbers:
            self.counts.in_flight += 1
            try:
                self.counts.unsent += await _conversation(self.lv, self.plan(c), prefix, self.first_user + k)
            finally:
                self.counts.in_flight -= 1

    async def _open(self) -> None:
        """Open loop and traces: each conversation sent at its moment on the schedule, whatever the server does."""
        cfg, level, workload, turns = self.cfg, self.level, self.workload, self.turns
        conversations = -(-self.total // turns)
        gate = asyncio.Semaphore(cfg.max_in_flight)
        loop = asyncio.get_running_loop()
        base = loop.time() - (ev.now_ns() - self.origin) / 1e9
        arrivals: list[tuple[PlannedConversation, int | None]]
        if cfg.mode == "trace":
            speedup = level if level > 0 else 1.0
            part = self.part
            mine = [c for c in range(min(self.total, len(workload.trace))) if c % part[1] == part[0]]
            arrivals = [(self.plan(c, position=c), None) for c in mine]
            schedule = [(conv.at_s or 0.0) / speedup for conv, _ in arrivals]
        else:
            schedule = poisson_schedule(level, conversations, cfg.seed + self.level_index * 1000 + self.worker)
            arrivals = [(self.plan(c), workload.prefix_of(self.start_index // turns + c)) for c in range(conversations)]
        lv = self.lv
        for (conv, prefix), at in zip(arrivals, schedule, strict=True):
            # The request is made before its moment comes (a trace's long prompts take milliseconds to
            # draw), so at its moment only the send is left.
            first = lv.messages(lv.system, conv, conv.turns[0], prefix)
            delay = base + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.tasks.append(asyncio.create_task(self._send(gate, conv, at, first, prefix)))
        await asyncio.gather(*self.tasks)

    async def _send(
        self,
        gate: asyncio.Semaphore,
        conv: PlannedConversation,
        at_s: float,
        first: tuple[Message, ...],
        prefix: int | None,
    ) -> None:
        async with gate:
            self.counts.in_flight += 1
            try:
                self.counts.unsent += await _conversation(self.lv, conv, prefix, None, at_s * 1000, first)
            finally:
                self.counts.in_flight -= 1
