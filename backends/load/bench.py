"""A bench run beneath the CLI: :func:`run_bench` runs a :class:`backends.load.plan.BenchPlan`.

The warm-up, the levels (or the capacity search's probes) through a :class:`backends.load.runner.Runner`,
the llama-server started for ``-m local-server``, the server's gauges, and the run's files: ``turns.jsonl``
as records arrive, ``summary.json`` and ``levels.csv`` at the end. What to show is the caller's: each
level's figures reach ``on_level``, each probe ``on_probe``, notes ``on_note`` (left out with -q) and
faults ``on_warn`` (said always). The CLI (``tui.commands.bench.command``) prints them; a notebook::

    import asyncio
    from .bench import run_bench
    from .plan import BenchPlan, Users

    plan = BenchPlan.of("compat:m", base_url="http://127.0.0.1:8000/v1", levels=(Users(1), Users(4)))
    result = asyncio.run(run_bench(plan))
    result.summary["conclusion"], [lv["output_throughput"] for lv in result.levels]
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...telemetry.bench import summary as bench_summary
from ...telemetry.bench.requests import read_bench
from ...telemetry.errors import TtftError
from ...telemetry.log import private_files
from ...telemetry.log.json_line import encode_line
from ...telemetry.log.secrets import masked_record
from ...telemetry.log.turns import write_all
from ...telemetry.log.urls import redact_url
from ...telemetry.server.gauges import level_summary
from ..providers.lean.transport import default_transport, through_proxy
from ..spec import split_spec
from . import event_loop
from .outcome import LevelCancelled, Progress
from .plan import BenchPlan
from .runner import BackendSpec, LoadRunner, Runner
from .scrape import INTERVAL_S, LevelScraper, scraped

if TYPE_CHECKING:
    from ..local.llama_server import LlamaServer
    from .capacity import Probe

Say = Callable[[str], None]
Keep = Callable[[list[dict[str, Any]]], None]


def _quiet(_: Any) -> None:
    """A callback that shows nothing."""


class BenchAbort(TtftError):
    """A step that cannot go on: its sentence (None when already said) and its outcome: ``usage`` (the
    set-up's), ``failed`` (the run's), ``not_saved`` (the results' folder), or a provider error's kind."""

    def __init__(self, outcome: str, sentence: str | None = None) -> None:
        super().__init__(sentence or "")
        self.outcome = outcome
        self.sentence = sentence


@dataclass(frozen=True)
class Hooks:
    """What the caller is shown as the run goes; every one shows nothing by default."""

    on_level: Callable[[dict[str, Any]], None] = _quiet
    on_probe: Callable[[Probe], None] = _quiet
    on_start: Callable[[], None] = lambda: None  # the warm-up is over; the levels begin
    on_progress: Callable[[Progress], None] | None = None
    on_note: Say = _quiet
    on_warn: Say = _quiet
    on_problem: Say = _quiet  # a worker's record that does not read, left out


@dataclass
class BenchResult:
    """A finished run: each level's figures, the run's facts, ``summary.json``'s dict, where it was written,
    and what could not be written (disk full: said, the run's outputs short)."""

    plan: BenchPlan
    levels: list[dict[str, Any]]
    meta: dict[str, Any]
    summary: dict[str, Any]
    unsaved: list[str] = field(default_factory=list)

    @property
    def out(self) -> Path:
        return self.plan.out

    def records(self) -> list[dict[str, Any]]:
        """Every turn of the run as ``turns.jsonl`` holds it (the warm-up's too: ``extra.bench.warmup``)."""
        from ...telemetry.log.turns import read_records

        path = self.out / "turns.jsonl"
        return list(read_records(path)) if path.exists() else []

    def turns_frame(self) -> Any:
        """Every turn as a pandas DataFrame typed as ``ttft export`` types it (needs pandas)."""
        from ...telemetry.export.formats import turns_frame

        return turns_frame(self.records())

    def save(self, to: str | Path) -> Path:
        """The run's files (``summary.json``, ``turns.jsonl``, ``levels.csv``) copied to ``to``, as ``ttft bench
        --out`` leaves them there (a run already writes them to its plan's ``out``; the charts are the CLI's)."""
        import shutil

        dest = Path(to)
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "turns.jsonl", "levels.csv"):
            src = self.out / name
            if src.exists() and src.resolve() != (dest / name).resolve():
                # 0600 and never through a link, as the run wrote them
                fd = private_files.open_private(dest / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                with src.open("rb") as f, os.fdopen(fd, "wb") as copy:
                    shutil.copyfileobj(f, copy)
        return dest


class TurnsFile:
    """``turns.jsonl``: every record as a valid UTF-8 line. A failed write (disk full) is kept, not raised:
    the run goes on, says so at the end and exits non-zero, and a short write is cut back off the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: OSError | None = None
        # the prompts and answers, as a session log holds them: 0600, never written through a link
        self._fd = private_files.open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)

    def write(self, records: list[dict[str, Any]]) -> None:
        if self.error is not None or not records:
            return
        start = os.lseek(self._fd, 0, os.SEEK_CUR)
        try:
            write_all(self._fd, b"".join(encode_line(masked_record(r)) for r in records))
        except OSError as exc:
            self.error = exc
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
                os.lseek(self._fd, start, os.SEEK_SET)

    def close(self) -> None:
        os.close(self._fd)


def write_results(out: Path, levels: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    summary = bench_summary.summary(levels, meta=meta)
    text = json.dumps(summary, indent=2, default=str) + "\n"
    private_files.replace(out / "summary.json", text.encode("utf-8"))
    table = io.StringIO(newline="")
    w = csv.DictWriter(table, fieldnames=list(bench_summary.CSV_COLUMNS))
    w.writeheader()
    for lv in levels:
        w.writerow(bench_summary.csv_row(lv))
    private_files.replace(out / "levels.csv", table.getvalue().encode("utf-8"))
    return summary


@dataclass(frozen=True)
class LoadTarget:
    """Where the load goes: the ``-m`` spec and base URL given, or the llama-server started for the run."""

    spec: str
    base_url: str | None
    server: LlamaServer | None = None


@dataclass(frozen=True)
class Reader:
    """How the client reads the streams: the lean reader on which transport, or the SDK."""

    lean: bool
    transport: str
    via_proxy: bool

    def describe(self, raw_stream: bool) -> str:
        if self.via_proxy:
            return "lean (orjson, httpx2 through the proxy)"
        if self.lean:
            return f"lean (orjson, {'httptools' if self.transport == 'proto' else 'aiohttp'})"
        return "sdk (raw stream)" if raw_stream else "sdk"


@dataclass
class _Run:
    """One run in flight: its plan, what it is shown, its turns file and its facts for ``summary.json``."""

    plan: BenchPlan
    hooks: Hooks
    turns: TurnsFile
    meta: dict[str, Any] = field(default_factory=dict)

    def keep(self, records: list[dict[str, Any]]) -> None:
        self.turns.write(records)
        if self.meta.get("model") is None and records:  # --workers, --cluster: the backends are the workers'
            self.meta.update({k: records[0].get(k) for k in ("provider", "api", "model")})


async def run_bench(
    plan: BenchPlan,
    *,
    on_level: Callable[[dict[str, Any]], None] = _quiet,
    on_probe: Callable[[Probe], None] = _quiet,
    on_progress: Callable[[Progress], None] | None = None,
    on_note: Say = _quiet,
    on_warn: Say = _quiet,
    hooks: Hooks | None = None,
) -> BenchResult:
    """Run ``plan``: its folder created, the target server's lifetime, the warm-up, the levels (or the capacity
    search), then ``summary.json`` and ``levels.csv``. Each level's figures reach ``on_level`` as it ends
    (``hooks``, when given, holds every callback and wins). :class:`BenchAbort` when a step cannot go on;
    a failure after some levels keeps those levels."""
    hooks = hooks or Hooks(
        on_level=on_level, on_probe=on_probe, on_progress=on_progress, on_note=on_note, on_warn=on_warn
    )
    try:
        plan.out.mkdir(parents=True, exist_ok=True)
        turns = TurnsFile(plan.out / "turns.jsonl")
    except OSError as exc:
        raise BenchAbort("not_saved", f"cannot write the results to {plan.out}/: {exc.strerror or exc}") from None
    run = _Run(plan, hooks, turns)
    try:
        async with target_server(plan, hooks.on_note) as target:
            reader = choose_reader(plan, target, hooks)
            run.meta = describe(plan, target, reader)
            levels = await measure(run, target, reader)
    finally:
        turns.close()
    meta = run.meta
    meta["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    unsaved: list[str] = []  # what could not be written (disk full, a folder gone read-only): said, exit 3
    if turns.error is not None:
        unsaved.append(f"{turns.path}: {turns.error.strerror or turns.error}")
    try:
        summary = write_results(plan.out, levels, meta)
    except OSError as exc:
        unsaved.append(f"summary.json / levels.csv: {exc.strerror or exc}")
        summary = bench_summary.summary(levels, meta=meta)
    return BenchResult(plan, levels, meta, summary, unsaved)


async def _wait_for_start(plan: BenchPlan, meta: dict[str, Any], hooks: Hooks) -> None:
    """``--start-at``: sleep until that wall-clock moment, after the warm-up; said in the summary."""
    if plan.start_at is None:
        return
    meta["start_at"] = datetime.fromtimestamp(plan.start_at, UTC).isoformat(timespec="milliseconds")
    ahead = plan.start_at - time.time()
    if ahead > 0:
        hooks.on_note(f"ttft bench: waiting {ahead:.1f} s for --start-at {meta['start_at']}")
        await asyncio.sleep(ahead)
        return
    meta["started_late_s"] = round(-ahead, 3)
    hooks.on_warn(
        f"ttft bench: the warm-up ran {-ahead:.1f} s past --start-at: starting now "
        "(ttft report --merge says how much the runs overlapped)"
    )


def _server_bin(given: str | None) -> str | None:
    """--server-bin, else [local] server_bin in config.toml, else None (the usual places)."""
    if given is not None:
        return given
    from ..providers.config import local_config

    return local_config().server_bin


@contextlib.asynccontextmanager
async def target_server(plan: BenchPlan, note: Say) -> AsyncIterator[LoadTarget]:
    """The run's target for as long as the run lasts: ``-m local-server`` starts llama.cpp's llama-server
    (its log in ``out``) and stops it on the way out, whatever ended the run; any other spec is as given."""
    local = plan.local
    if local is None:
        yield LoadTarget(plan.spec, plan.base_url)
        return
    from ..local.llama_server import (
        LlamaServer,
        LlamaServerError,
        LlamaServerFailed,
        default_model,
        find_binary,
    )

    try:
        path = split_spec(plan.spec)[1]
        model = Path(path).expanduser() if path else default_model()
        server = LlamaServer(
            model,
            slots=local.slots,
            ctx=local.ctx,
            threads=local.threads,
            gpu_layers=local.gpu_layers,
            flash_attn=local.flash_attn,
            extra_args=["--ignore-eos"] if local.ignore_eos else [],
            binary=find_binary(_server_bin(local.server_bin)),
        )
        server.log_path = plan.out / "llama-server.log"
        note(f"starting llama-server ({model.name}, {local.slots} slots) ...")
        await asyncio.to_thread(server.start)
    except LlamaServerError as exc:
        # Launched but never healthy is a failed run (1); no binary or no model file is the set-up's (2).
        raise BenchAbort("failed" if isinstance(exc, LlamaServerFailed) else "usage", str(exc)) from None
    note(f"llama-server healthy on {server.url}")
    try:
        yield LoadTarget(f"compat:{server.model_name}", server.base_url, server)
    finally:
        server.stop()


def choose_reader(plan: BenchPlan, target: LoadTarget, hooks: Hooks) -> Reader:
    """The stream reader for this target (said when a proxy in the environment makes it the slower one)."""
    lean = not (plan.sdk or plan.raw_stream)  # every hosted API has a lean reader; --sdk reads with the SDK
    transport = "aiohttp" if plan.aiohttp else default_transport()
    via_proxy = lean and through_proxy(target.spec, target.base_url)
    if via_proxy:  # said even with -q when --aiohttp was asked for: it cannot go through a proxy
        (hooks.on_warn if plan.aiohttp else hooks.on_note)(
            "ttft bench: a proxy is set for this server (HTTPS_PROXY/HTTP_PROXY/ALL_PROXY): the lean reader "
            "goes through it over httpx2, at more client CPU per chunk"
            + (", not over aiohttp (--aiohttp speaks no proxy)" if plan.aiohttp else "")
        )
    return Reader(lean, transport, via_proxy)


def describe(plan: BenchPlan, target: LoadTarget, reader: Reader) -> dict[str, Any]:
    """The run's facts for ``summary.json``: what was loaded, how, and how it was read."""
    cfg = plan.load
    assert cfg.workload is not None  # a plan's workload is always chosen
    plain_length = cfg.workload.kind == "synthetic" and not cfg.workload.input.spread
    meta: dict[str, Any] = {
        "run_id": plan.run_id,
        "model_spec": plan.spec,
        "base_url": redact_url(target.base_url),  # never its credentials or query values
        "mode": plan.mode,
        "requests_per_level": cfg.requests,
        "warmup": cfg.warmup,
        # the plain bench's keys (ttft report --merge checks them): None where a workload has no one length
        "input_tokens": cfg.input_tokens if plain_length else None,
        "max_output_tokens": cfg.max_output_tokens,
        "workload": {
            **cfg.workload.describe(cfg.max_output_tokens),
            **({"file": dict(plan.workload_source)} if plan.workload_source else {}),
            "notes": list(plan.workload_notes),
        },
        "seed": cfg.seed,
        "workers": cfg.workers,
        "raw_stream": plan.raw_stream,
        "lean": reader.lean,
        "reader": reader.describe(plan.raw_stream),
        "event_loop": event_loop.running(),  # "uvloop X.Y.Z" or "asyncio" (every worker runs the same)
        "slo": plan.slo.to_dict() if plan.slo else None,
        "probe_rate": cfg.probe_rate,  # the one user beside each level's load (--probe-rate), or None
        "tools": cfg.tools.describe() if cfg.tools is not None else None,  # --tool-latency, --mcp
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if (server := target.server) is not None and plan.local is not None:
        bufts = server.bufts()
        meta["server"] = {
            "kind": "llama-server",
            "model": str(server.model),
            "slots": plan.local.slots,
            "ctx": plan.local.ctx,
            "threads": server.threads_used,
            "gpu_layers": server.gpu_layers,  # None: the build's default
            "flash_attn": server.flash_attn,
            **server.build(),  # binary, version, commit, built_with, backend: which llama-server ran
            "extra_bufts": bufts.use,  # off (--no-repack) on AMX CPUs: see backends.local.amx
            "extra_bufts_reason": bufts.reason,
        }
    return meta


def make_runner(run: _Run, target: LoadTarget, reader: Reader) -> Runner:
    """The runner of the levels: in this process, over ``--workers`` processes, or on a cluster's drivers
    (whose records reach ``keep`` as they arrive; Ray is imported only then)."""
    plan, hooks = run.plan, run.hooks
    spec = BackendSpec(
        target.spec,
        target.base_url,
        raw_stream=plan.raw_stream,
        options={
            **({"lean": True} if reader.lean else {}),
            **({"timeout_s": plan.timeout_s} if plan.timeout_s else {}),
        },
        aiohttp=reader.lean and not reader.via_proxy,
        transport=reader.transport,
        fast_loop=event_loop.running() != "asyncio",
    )
    fault = lambda text: hooks.on_warn(f"ttft bench: {text}")  # noqa: E731 - said even with -q
    if plan.cluster is None:  # an MCP server that did not start, or is gone: a server's words
        return LoadRunner(plan.load, spec=spec, run_id=plan.run_id, on_progress=hooks.on_progress, on_notice=fault)
    try:
        from .cluster.runner import ClusterRunner
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "ray":
            raise
        raise BenchAbort("usage", "--cluster needs Ray: pip install 'ttft[cluster]'") from None
    return ClusterRunner(
        plan.load,
        spec=spec,
        address=plan.cluster,
        workers=plan.cluster_workers,
        run_id=plan.run_id,
        on_progress=hooks.on_progress,
        on_records=run.keep,
        on_note=lambda text: hooks.on_note(f"ttft bench: {text}"),
        on_fault=fault,
        ray_log=plan.out / "ray.log",
    )


def _beside_api(spec: str, base_url: str | None) -> str | None:
    """The ``/metrics`` beside the API the bench loads, or None when no address is known."""
    from ..providers.registry import ProviderError, resolve
    from ..transport.prometheus import metrics_url

    try:
        url = resolve(spec, base_url=base_url).base_url
    except ProviderError:
        return None  # the bench says what is wrong with the spec when it builds the backend
    return metrics_url(url) if url else None


async def scraper(
    asked: str | None, spec: str, base_url: str | None, local_url: str | None, meta: dict[str, Any], hooks: Hooks
) -> LevelScraper | None:
    """``--server-metrics`` (always, for the llama-server started here): the endpoint read once now, to know
    which server it is. One that does not answer, or has no gauge ttft reads, is a note and the run goes
    on without (said in ``summary.json``'s ``server_metrics``), never an error."""
    from ..transport.prometheus import MetricsEndpoint, MetricsUnavailable

    if asked is None and local_url is None:
        return None
    # Asked for and not read: said even with -q (the run is not what was asked); for the llama-server
    # started here, where it is on without asking, a note.
    say = hooks.on_warn if asked is not None else hooks.on_note
    url = asked or local_url or _beside_api(spec, base_url)
    if not url:
        why = "no address to find /metrics beside: give it, --server-metrics URL"
        meta["server_metrics"] = {"url": None, "note": why}
        say(f"ttft bench: not reading the server's gauges: {why}")
        return None
    endpoint = MetricsEndpoint(url)
    try:
        await asyncio.to_thread(endpoint.probe)
    except MetricsUnavailable as exc:
        meta["server_metrics"] = {"url": endpoint.shown_url, "note": str(exc)}
        say(f"ttft bench: not reading the server's gauges: {exc}; the run goes on without them")
        return None
    assert endpoint.dialect is not None  # probe() found it
    meta["server_metrics"] = {"url": endpoint.shown_url, "server": endpoint.dialect.name, "interval_s": INTERVAL_S}
    hooks.on_note(
        f"reading {endpoint.dialect.name}'s gauges from {endpoint.shown_url} every {INTERVAL_S * 1000:.0f} ms"
    )
    return LevelScraper(endpoint)


async def measure(run: _Run, target: LoadTarget, reader: Reader) -> list[dict[str, Any]]:
    """The warm-up, then the levels (or the capacity search's probes), each level shown as it ends; every
    record goes to ``turns.jsonl``. A failure after some levels keeps those levels."""
    plan, hooks, meta = run.plan, run.hooks, run.meta
    levels: list[dict[str, Any]] = []
    runner: Runner | None = None
    try:
        local_metrics = target.server.metrics_url if target.server is not None else None
        scrape = await scraper(plan.server_metrics, target.spec, target.base_url, local_metrics, meta, hooks)
        runner = make_runner(run, target, reader)
        async with runner:
            if runner.backend is not None:
                meta.update(provider=runner.backend.provider, api=runner.backend.api, model=runner.backend.model)
            kept: Keep = (lambda _records: None) if runner.streams_records else run.keep  # a streaming runner's
            await warm_up(runner, kept)
            await _wait_for_start(plan, meta, hooks)
            hooks.on_start()
            if plan.capacity is not None:
                await search_capacity(plan, runner, kept, hooks, levels, meta, scrape)
            for i in range(0 if plan.capacity is not None else len(plan.load.levels)):
                levels.append(await run_one_level(runner, i, scrape, plan, kept, hooks))
    except BenchAbort:
        raise
    except Exception as exc:  # a bad spec or a missing key: one sentence, no traceback
        hint = getattr(exc, "hint", None)
        hooks.on_warn(f"ttft bench: {exc}" + (f" {hint}" if hint else ""))
        if not levels:
            raise BenchAbort(str(getattr(exc, "kind", "bad_spec"))) from None
    finally:
        if runner is not None:
            meta.update(runner.describe())  # a cluster's nodes and drivers (nothing for this machine alone)
    return levels


async def warm_up(runner: Runner, keep: Keep) -> None:
    """The unmeasured requests first; a run whose every warm-up request failed stops here (exit 1)."""
    try:
        warm = await runner.warmup()
    except LevelCancelled as exc:  # the turns in flight are kept, as cancelled
        keep(exc.records)
        raise
    keep(warm.records if warm else [])
    warmed = read_bench(warm.records).turns if warm else []
    if warmed and all(t.record.status != "ok" for t in warmed):
        err = warmed[0].record.error
        raise BenchAbort("failed", f"every warm-up request failed: {err.message if err else None}")


async def search_capacity(
    plan: BenchPlan,
    runner: Runner,
    keep: Keep,
    hooks: Hooks,
    levels: list[dict[str, Any]],
    meta: dict[str, Any],
    scrape: LevelScraper | None = None,
) -> None:
    """``--find-capacity``: the probes, each shown as it ends; their levels and the search's verdict kept."""
    from .capacity import find_capacity

    assert plan.capacity is not None
    search = await find_capacity(
        runner,
        plan.capacity.objectives,
        start=plan.capacity.start,
        limit=plan.capacity.limit,
        requests=runner.cfg.requests,  # the workload's (a conversation is never cut), from the flags
        max_requests=plan.capacity.max_requests,
        on_records=keep,
        on_probe=hooks.on_probe,
        scraper=scrape,
    )
    levels.extend(search.levels())
    meta["capacity"] = search.summary()


async def run_one_level(
    runner: Runner, i: int, scrape: LevelScraper | None, plan: BenchPlan, keep: Keep, hooks: Hooks
) -> dict[str, Any]:
    """Level ``i``: its records kept, its figures (with the server's own gauges over it, when read) shown."""
    try:
        res, gauges = await scraped(scrape, runner.level(i))
    except LevelCancelled as exc:
        keep(exc.records)
        raise
    keep(res.records)
    a, problems = runner.figures(res, plan.slo)
    for problem in problems:  # a worker's record that does not read: left out, said
        hooks.on_problem(f"ttft bench: {problem}")
    if gauges is not None:
        a["server_metrics"] = level_summary(gauges)
    hooks.on_level(a)
    return a
