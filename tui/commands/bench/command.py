"""``ttft bench``: the batching trade-off, measured (aggregate tokens/s against each user's speed).

Runs closed-loop concurrency levels or open-loop Poisson rates against any provider, or
against llama.cpp's ``llama-server`` started here (``-m local-server[:PATH.gguf] --slots 4``),
from this process, ``--workers`` processes, or the drivers of a Ray cluster (``--cluster``).
Every request is a ``ttft.turn`` record; the run leaves ``turns.jsonl``, ``summary.json``
(vLLM bench key names), ``levels.csv`` and the charts in ``--out``.

The command is four steps: :func:`configure` (the load, the run's id and folder), :func:`target_server`
(the server's lifetime: llama-server started and stopped here, or the one given), :func:`measure`
(the warm-up and the levels through a :class:`backends.load.runner.Runner`) and :func:`write`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.load import event_loop
from backends.load.driver import LevelCancelled, LoadConfig
from backends.load.runner import BackendSpec, LoadRunner, Runner, default_transport, through_proxy
from backends.load.scrape import INTERVAL_S, LevelScraper, scraped
from backends.load.tools import ToolsConfig
from backends.spec import split_spec
from telemetry.bench import summary as bench_summary
from telemetry.bench.cluster import partial_line
from telemetry.bench.requests import read_bench
from telemetry.bench.slo import SLO
from telemetry.errors import TtftError
from telemetry.log.json_line import encode_line
from telemetry.log.turns import write_all
from telemetry.log.urls import redact_url
from telemetry.server.gauges import level_summary
from telemetry.settings import TurnSettings
from tui import signals
from tui.commands.bench import args as bench_args
from tui.commands.bench import capacity as bench_capacity
from tui.commands.bench import workload as bench_workload
from tui.commands.bench.output import (
    HEADER,
    ProgressLine,
    agent_line,
    bench_charts,
    cost_line,
    gauges_line,
    level_row,
    probe_line,
    server_latency_line,
    server_line,
    token_line,
    ttft_split_line,
    wait_line,
    workload_lines,
)
from tui.commands.exits import Exit, for_error_kind
from tui.commands.flags import local_flags_problem, settings_from_args
from tui.commands.output import note, print_json, warn
from tui.commands.tools import MCP_HOST, NOT_INSTALLED, mcp_module
from tui.format import visible_controls
from tui.report import charts

if TYPE_CHECKING:
    from backends.local.llama_server import LlamaServer


def register(sub: argparse._SubParsersAction) -> None:
    bench_args.build(sub, __doc__).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if refused := bench_args.misfits(args, _kind(args.model, args.base_url)):
        for why in refused:  # a flag that would do nothing here: said, nothing sent
            print(visible_controls(f"ttft bench: {why}"), file=sys.stderr)
        return Exit.USAGE
    bench_args.settle(args)
    try:
        if args.find_capacity:
            args.objectives = bench_capacity.parse_objectives(args)
            slo: SLO | None = args.objectives.slo()
        else:
            slo = SLO.parse(args.slo)
    except ValueError as exc:
        print(f"ttft bench: {exc}", file=sys.stderr)
        return 2
    try:
        if not args.json:
            # SIGTERM and SIGHUP stop it like Ctrl-C; on uvloop when installed (backends.load.event_loop)
            return signals.run(bench(args, slo), event_loop.loop_factory())
        # --json: stdout holds the summary alone; the tables and charts go to stderr (or nowhere, -q)
        with contextlib.ExitStack() as stack:
            sink = stack.enter_context(open(os.devnull, "w")) if args.quiet else sys.stderr
            stack.enter_context(contextlib.redirect_stdout(sink))
            rc = signals.run(bench(args, slo), event_loop.loop_factory())
        if (summary := getattr(args, "summary", None)) is not None:
            print_json(summary)
        return rc
    except KeyboardInterrupt as exc:
        print("\nttft bench: interrupted; results so far are in the output folder", file=sys.stderr)
        return signals.exit_code(exc)


def _kind(spec: str, base_url: str | None) -> str | None:
    """The provider kind ``-m`` names (openai, anthropic, compat, ...), or None when it does not resolve (the
    run says why when it builds the backend)."""
    from backends.providers.registry import ProviderError, resolve

    if bench_args.is_local_server(spec):
        return None
    try:
        return resolve(spec, base_url=base_url).kind
    except ProviderError:
        return None


def context_limit(args: argparse.Namespace) -> bench_workload.ContextLimit | None:
    """The most tokens one request may hold on the target, where ttft knows it: each slot's share of the
    context of the llama-server it starts (``-c`` is split over the ``-np`` slots)."""
    if not bench_args.is_local_server(args.model):
        return None
    return bench_workload.ContextLimit(
        args.ctx // args.slots, f"the context of each llama-server slot (--ctx {args.ctx} over --slots {args.slots})"
    )


def turn_settings(args: argparse.Namespace) -> TurnSettings:
    """The turn flags' settings, with ``--ignore-eos`` as the request's ``ignore_eos`` (sent to a Chat
    Completions server that is not OpenAI's; :func:`tui.commands.bench.args.misfits` refused the others)."""
    turn = settings_from_args(args)
    return turn.with_(extra={**turn.extra, "ignore_eos": True}) if args.ignore_eos else turn


# --- the run's files ------------------------------------------------------------------
class TurnsFile:
    """``turns.jsonl``: every record as a valid UTF-8 line. A failed write (disk full) is kept, not raised:
    the run goes on, says so at the end and exits non-zero, and a short write is cut back off the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: OSError | None = None
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)

    def write(self, records: list[dict[str, Any]]) -> None:
        if self.error is not None or not records:
            return
        start = os.lseek(self._fd, 0, os.SEEK_CUR)
        try:
            write_all(self._fd, b"".join(encode_line(r) for r in records))
        except OSError as exc:
            self.error = exc
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
                os.lseek(self._fd, start, os.SEEK_SET)

    def close(self) -> None:
        os.close(self._fd)


def write_results(out: Path, levels: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    summary = bench_summary.summary(levels, meta=meta)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    with (out / "levels.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(bench_summary.CSV_COLUMNS))
        w.writeheader()
        for lv in levels:
            w.writerow(bench_summary.csv_row(lv))
    return summary


async def _wait_for_start(args: argparse.Namespace, meta: dict[str, Any]) -> None:
    """``--start-at``: sleep until that wall-clock moment, after the warm-up; said in the summary."""
    if args.start_at is None:
        return
    meta["start_at"] = datetime.fromtimestamp(args.start_at, UTC).isoformat(timespec="milliseconds")
    ahead = args.start_at - time.time()
    if ahead > 0:
        note(args, f"ttft bench: waiting {ahead:.1f} s for --start-at {meta['start_at']}")
        await asyncio.sleep(ahead)
        return
    meta["started_late_s"] = round(-ahead, 3)
    print(
        f"ttft bench: the warm-up ran {-ahead:.1f} s past --start-at: starting now "
        "(ttft report --merge says how much the runs overlapped)",
        file=sys.stderr,
    )


class Abort(TtftError):
    """A step that cannot go on: its sentence for stderr (None when already said) and the exit code."""

    def __init__(self, code: int, sentence: str | None = None) -> None:
        super().__init__(sentence or "")
        self.code = code
        self.sentence = sentence

    def report(self) -> int:
        if self.sentence is not None:  # a server's words, maybe: shown, never run
            print(visible_controls(f"ttft bench: {self.sentence}"), file=sys.stderr)
        return self.code


@dataclass
class Plan:
    """What :func:`configure` settles before anything runs: the load, the run's id, its folder and log."""

    cfg: LoadConfig
    mode: str
    run_id: str
    out: Path
    turns: TurnsFile
    slo: SLO | None
    chosen: bench_workload.Chosen


@dataclass(frozen=True)
class Target:
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


# --- step 1: configure -----------------------------------------------------------------
def configure(args: argparse.Namespace, slo: SLO | None) -> Plan:
    """The load from the flags, the run's id and its results folder (created, ``turns.jsonl`` opened)."""
    try:
        chosen = bench_workload.choose(args, context_limit(args))
    except bench_workload.WorkloadError as exc:
        raise Abort(Exit.USAGE, str(exc)) from None  # a file's name or bytes: shown, never run
    for said in chosen.notes:
        print(visible_controls(f"ttft bench: {said}"), file=sys.stderr)
    mode = "trace" if chosen.trace else "rate" if args.rate else "concurrency"
    # a trace's levels are its speedups
    levels_in = (args.speedup or (1.0,)) if chosen.trace else (args.rate or args.concurrency or (1.0, 2.0, 4.0, 8.0))
    if args.find_capacity:  # the levels are the search's; the HTTP pool is sized for its limit
        levels_in = (args.capacity_limit,)
    cfg = LoadConfig(
        mode=mode,  # type: ignore[arg-type]
        levels=tuple(levels_in),
        requests=chosen.requests,
        warmup=args.warmup,
        input_tokens=chosen.input_tokens,
        workload=chosen.workload,
        max_output_tokens=args.max_output_tokens,
        seed=args.seed,
        workers=1 if args.cluster else max(1, args.workers or 1),  # a cluster's drivers are its own
        max_in_flight=args.max_in_flight,
        max_retries=args.max_retries,
        temperature=args.temperature,
        turn=turn_settings(args),
        system=args.system,
        probe_rate=args.probe_rate,
        tools=tools_config(args),
    )
    if (why := bench_args.check_start(args.start_at, time.time()) or bench_args.check_cluster(args)) is not None:
        raise Abort(Exit.USAGE, why)
    if (why := _local_flags_problem(args)) is not None:
        raise Abort(Exit.USAGE, why)
    # A random tail as session ids have: two runs started in the same second must not share an id
    # (their turns would collide in a merged report or a trace store) nor a default folder.
    run_id = "bench-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
    out: Path = args.out or Path(f"ttft-{run_id}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        turns = TurnsFile(out / "turns.jsonl")
    except OSError as exc:
        raise Abort(Exit.NOT_SAVED, f"cannot write the results to {out}/: {exc.strerror or exc}") from None
    return Plan(cfg, mode, run_id, out, turns, slo, chosen)


def tools_config(args: argparse.Namespace) -> ToolsConfig | None:
    """The run's tools: the stub of ``--tool-latency``, the servers of ``--mcp`` (their specs resolved here, so a
    spec that names nothing is a usage error before anything runs), or None."""
    if args.tool_latency is not None:
        return ToolsConfig(latency_ms=args.tool_latency, max_steps=args.max_steps)
    if not args.mcp:
        return None
    config, host = mcp_module(), mcp_module(MCP_HOST)
    if config is None or host is None:
        raise Abort(Exit.USAGE, NOT_INSTALLED)
    try:
        servers = config.resolve_specs(args.mcp)
    except config.McpSpecError as exc:
        raise Abort(Exit.USAGE, str(exc)) from None
    return ToolsConfig(
        servers=tuple(servers),
        max_steps=args.max_steps,
        start_timeout_s=args.mcp_start_timeout,
        call_timeout_s=args.mcp_call_timeout,
    )


def _local_flags_problem(args: argparse.Namespace) -> str | None:
    """--gpu-layers, --threads, --flash-attn: for -m local and -m local-server; --server-bin: local-server."""
    from backends.providers.registry import ProviderError, is_local_spec

    if bench_args.is_local_server(args.model):
        return None
    try:
        local = is_local_spec(args.model)
    except ProviderError:  # a config that does not read: the run's start says so
        local = True
    problem = local_flags_problem(args, local)
    return f"{problem} (or -m local-server)" if problem and "--server-bin" not in problem else problem


def _server_bin(args: argparse.Namespace) -> str | None:
    """--server-bin, else [local] server_bin in config.toml, else None (the usual places)."""
    if args.server_bin is not None:
        return str(args.server_bin)
    from backends.providers.config import local_config

    return local_config().server_bin


# --- step 2: the server's lifetime -------------------------------------------------------
@contextlib.asynccontextmanager
async def target_server(args: argparse.Namespace, out: Path) -> AsyncIterator[Target]:
    """The run's target for as long as the run lasts: ``-m local-server`` starts llama.cpp's llama-server
    (its log in ``out``) and stops it on the way out, whatever ended the run; any other spec is as given."""
    spec = args.model
    if not bench_args.is_local_server(spec):
        yield Target(spec, args.base_url)
        return
    from backends.local.llama_server import (
        LlamaServer,
        LlamaServerError,
        LlamaServerFailed,
        default_model,
        find_binary,
    )

    try:
        path = split_spec(spec)[1]
        model = Path(path).expanduser() if path else default_model()
        server = LlamaServer(
            model,
            slots=args.slots,
            ctx=args.ctx,
            threads=args.threads,
            gpu_layers=args.gpu_layers,
            flash_attn=args.flash_attn,
            extra_args=["--ignore-eos"] if args.ignore_eos else [],
            binary=find_binary(_server_bin(args)),
        )
        server.log_path = out / "llama-server.log"
        note(args, f"starting llama-server ({model.name}, {args.slots} slots) ...")
        await asyncio.to_thread(server.start)
    except LlamaServerError as exc:
        # Launched but never healthy is a failed run (1); no binary or no model file is the set-up's (2).
        raise Abort(Exit.FAILED if isinstance(exc, LlamaServerFailed) else Exit.USAGE, str(exc)) from None
    note(args, f"llama-server healthy on {server.url}")
    try:
        yield Target(f"compat:{server.model_name}", server.base_url, server)
    finally:
        server.stop()


def choose_reader(args: argparse.Namespace, target: Target) -> Reader:
    """The stream reader for this target (said when a proxy in the environment makes it the slower one)."""
    lean = not (args.sdk or args.raw_stream)  # every hosted API has a lean reader; --sdk reads with the SDK
    transport = "aiohttp" if args.aiohttp else default_transport()
    via_proxy = lean and through_proxy(target.spec, target.base_url)
    if via_proxy:  # said even with -q when --aiohttp was asked for: it cannot go through a proxy
        (warn if args.aiohttp else lambda text: note(args, text))(
            "ttft bench: a proxy is set for this server (HTTPS_PROXY/HTTP_PROXY/ALL_PROXY): the lean reader "
            "goes through it over httpx2, at more client CPU per chunk"
            + (", not over aiohttp (--aiohttp speaks no proxy)" if args.aiohttp else "")
        )
    return Reader(lean, transport, via_proxy)


def describe(args: argparse.Namespace, plan: Plan, target: Target, reader: Reader) -> dict[str, Any]:
    """The run's facts for ``summary.json``: what was loaded, how, and how it was read."""
    cfg, chosen = plan.cfg, plan.chosen
    plain_length = chosen.workload.kind == "synthetic" and not chosen.workload.input.spread
    meta: dict[str, Any] = {
        "run_id": plan.run_id,
        "model_spec": args.model,
        "base_url": redact_url(target.base_url),  # never its credentials or query values
        "mode": plan.mode,
        "requests_per_level": cfg.requests,
        "warmup": cfg.warmup,
        # the plain bench's keys (ttft report --merge checks them): None where a workload has no one length
        "input_tokens": cfg.input_tokens if plain_length else None,
        "max_output_tokens": cfg.max_output_tokens,
        "workload": {
            **chosen.workload.describe(cfg.max_output_tokens),
            **({"file": chosen.source} if chosen.source else {}),
            "notes": chosen.notes,
        },
        "seed": cfg.seed,
        "workers": cfg.workers,
        "raw_stream": args.raw_stream,
        "lean": reader.lean,
        "reader": reader.describe(args.raw_stream),
        "event_loop": event_loop.running(),  # "uvloop X.Y.Z" or "asyncio" (every worker runs the same)
        "slo": plan.slo.to_dict() if plan.slo else None,
        "probe_rate": cfg.probe_rate,  # the one user beside each level's load (--probe-rate), or None
        "tools": cfg.tools.describe() if cfg.tools is not None else None,  # --tool-latency, --mcp
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if (server := target.server) is not None:
        bufts = server.bufts()
        meta["server"] = {
            "kind": "llama-server",
            "model": str(server.model),
            "slots": args.slots,
            "ctx": args.ctx,
            "threads": server.threads_used,
            "gpu_layers": server.gpu_layers,  # None: the build's default
            "flash_attn": server.flash_attn,
            **server.build(),  # binary, version, commit, built_with, backend: which llama-server ran
            "extra_bufts": bufts.use,  # off (--no-repack) on AMX CPUs: see backends.local.amx
            "extra_bufts_reason": bufts.reason,
        }
    return meta


# --- step 3: run -------------------------------------------------------------------------
Keep = Callable[[list[dict[str, Any]]], None]


def make_runner(
    args: argparse.Namespace, plan: Plan, target: Target, reader: Reader, progress: ProgressLine, keep: Keep
) -> Runner:
    """The runner of the levels: in this process, over ``--workers`` processes, or on a cluster's drivers
    (whose records reach ``keep`` as they arrive; Ray is imported only then)."""
    spec = BackendSpec(
        target.spec,
        target.base_url,
        raw_stream=args.raw_stream,
        options={
            **({"lean": True} if reader.lean else {}),
            **({"timeout_s": args.timeout} if args.timeout else {}),
        },
        aiohttp=reader.lean and not reader.via_proxy,
        transport=reader.transport,
        fast_loop=event_loop.running() != "asyncio",
    )
    if args.cluster is None:

        def tool_notice(text: str) -> None:  # an MCP server that did not start, or is gone: a server's words
            progress.end()
            print(visible_controls(f"ttft bench: {text}"), file=sys.stderr, flush=True)

        return LoadRunner(plan.cfg, spec=spec, run_id=plan.run_id, on_progress=progress, on_notice=tool_notice)
    try:
        from backends.load.cluster.runner import ClusterRunner
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "ray":
            raise
        raise Abort(Exit.USAGE, "--cluster needs Ray: pip install 'ttft[cluster]'") from None

    def say(text: str) -> None:
        progress.end()
        note(args, f"ttft bench: {text}")

    def fault(text: str) -> None:  # said even with -q: the run is not what was asked
        progress.end()
        print(visible_controls(f"ttft bench: {text}"), file=sys.stderr, flush=True)

    return ClusterRunner(
        plan.cfg,
        spec=spec,
        address=args.cluster,
        workers=args.workers,
        run_id=plan.run_id,
        on_progress=progress,
        on_records=keep,
        on_note=say,
        on_fault=fault,
        ray_log=plan.out / "ray.log",
    )


def _beside_api(spec: str, base_url: str | None) -> str | None:
    """The ``/metrics`` beside the API the bench loads, or None when no address is known."""
    from backends.providers.registry import ProviderError, resolve
    from backends.transport.prometheus import metrics_url

    try:
        url = resolve(spec, base_url=base_url).base_url
    except ProviderError:
        return None  # the bench says what is wrong with the spec when it builds the backend
    return metrics_url(url) if url else None


async def _scraper(
    args: argparse.Namespace, spec: str, base_url: str | None, local_url: str | None, meta: dict[str, Any]
) -> LevelScraper | None:
    """``--server-metrics`` (always, for the llama-server started here): the endpoint read once now, to know
    which server it is. One that does not answer, or has no gauge ttft reads, is a note and the run goes
    on without (said in ``summary.json``'s ``server_metrics``), never an error."""
    from backends.transport.prometheus import MetricsEndpoint, MetricsUnavailable

    if args.server_metrics is None and local_url is None:
        return None
    # Asked for and not read: said even with -q (the run is not what was asked); for the llama-server
    # started here, where it is on without asking, a note.
    say = warn if args.server_metrics is not None else (lambda text: note(args, text))
    url = args.server_metrics or local_url or _beside_api(spec, base_url)
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
    note(args, f"reading {endpoint.dialect.name}'s gauges from {endpoint.shown_url} every {INTERVAL_S * 1000:.0f} ms")
    return LevelScraper(endpoint)


async def measure(
    args: argparse.Namespace, plan: Plan, target: Target, reader: Reader, meta: dict[str, Any]
) -> list[dict[str, Any]]:
    """The warm-up, then the levels (or the capacity search's probes), each level's row printed as it
    ends; every record goes to ``turns.jsonl``. A failure after some levels keeps those levels."""
    progress = ProgressLine(args.quiet, search=bool(args.find_capacity))
    levels: list[dict[str, Any]] = []

    def keep(records: list[dict[str, Any]]) -> None:
        plan.turns.write(records)
        if meta.get("model") is None and records:  # --workers, --cluster: the backends are the workers'
            meta.update({k: records[0].get(k) for k in ("provider", "api", "model")})

    runner: Runner | None = None
    try:
        local_metrics = target.server.metrics_url if target.server is not None else None
        scraper = await _scraper(args, target.spec, target.base_url, local_metrics, meta)
        runner = make_runner(args, plan, target, reader, progress, keep)
        async with runner:
            if runner.backend is not None:
                meta.update(provider=runner.backend.provider, api=runner.backend.api, model=runner.backend.model)
            kept = (lambda _records: None) if runner.streams_records else keep  # a streaming runner kept them
            await warm_up(runner, kept, progress)
            await _wait_for_start(args, meta)
            print(HEADER)
            if args.find_capacity:
                await search_capacity(args, runner, kept, progress, levels, meta, scraper)
            for i in range(0 if args.find_capacity else len(plan.cfg.levels)):
                levels.append(await run_one_level(runner, i, scraper, plan.slo, kept, progress))
    except Abort:
        raise
    except Exception as exc:  # a bad spec or a missing key: one sentence, no traceback
        progress.end()
        hint = getattr(exc, "hint", None)
        print(visible_controls(f"ttft bench: {exc}" + (f" {hint}" if hint else "")), file=sys.stderr)
        if not levels:
            raise Abort(for_error_kind(getattr(exc, "kind", "bad_spec"))) from None
    finally:
        if runner is not None:
            meta.update(runner.describe())  # a cluster's nodes and drivers (nothing for this machine alone)
    return levels


async def warm_up(runner: Runner, keep: Keep, progress: ProgressLine) -> None:
    """The unmeasured requests first; a run whose every warm-up request failed stops here (exit 1)."""
    try:
        warm = await runner.warmup()
    except LevelCancelled as exc:  # the turns in flight are kept, as cancelled
        keep(exc.records)
        raise
    keep(warm.records if warm else [])
    warmed = read_bench(warm.records).turns if warm else []
    if warmed and all(t.record.status != "ok" for t in warmed):
        progress.end()
        err = warmed[0].record.error
        raise Abort(Exit.FAILED, f"every warm-up request failed: {err.message if err else None}")


async def search_capacity(
    args: argparse.Namespace,
    runner: Runner,
    keep: Keep,
    progress: ProgressLine,
    levels: list[dict[str, Any]],
    meta: dict[str, Any],
    scraper: LevelScraper | None = None,
) -> None:
    """``--find-capacity``: the probes, each printed as it ends (with the server's gauges over it, when
    read); their levels and the search's verdict kept."""

    def probed(p: Any) -> None:
        progress.end()
        if p.unreadable:  # a worker's record that does not read: left out of the verdict
            print(f"ttft bench: left out {p.unreadable} unreadable record(s)", file=sys.stderr)
        row, verdict = bench_capacity.probe_lines(p, level_row)
        print(row, flush=True)
        a = p.aggregate
        for line in (
            agent_line(a),
            server_line(a),
            gauges_line(a),
            server_latency_line(a),
            ttft_split_line(a),
            token_line(a),
        ):
            if line is not None:
                print(visible_controls(line), flush=True)
        print(verdict, flush=True)

    search = await bench_capacity.run_search(
        runner, args, args.objectives, on_records=keep, on_probe=probed, scraper=scraper
    )
    levels.extend(search.levels())
    meta["capacity"] = search.summary()


async def run_one_level(
    runner: Runner, i: int, scraper: LevelScraper | None, slo: SLO | None, keep: Keep, progress: ProgressLine
) -> dict[str, Any]:
    """Level ``i``: its records kept, its figures (with the server's own gauges over it, when read) printed
    as a row and the lines under it."""
    try:
        res, gauges = await scraped(scraper, runner.level(i))
    except LevelCancelled as exc:
        keep(exc.records)
        raise
    keep(res.records)
    a, problems = runner.figures(res, slo)
    for problem in problems:  # a worker's record that does not read: left out, said
        print(visible_controls(f"ttft bench: {problem}"), file=sys.stderr)
    if gauges is not None:
        a["server_metrics"] = level_summary(gauges)
    progress.end()
    print(level_row(a), flush=True)
    if (line := probe_line(a)) is not None:  # the one user beside the load (--probe-rate)
        print(line, flush=True)
    if (line := agent_line(a)) is not None:  # tool-using turns (--tool-latency, --mcp)
        print(line, flush=True)
    for line in (server_line(a), gauges_line(a), server_latency_line(a)):
        if line is not None:
            print(visible_controls(line), flush=True)
    for line in (wait_line(a), ttft_split_line(a)):
        if line is not None:
            print(visible_controls(line), flush=True)
    if (line := token_line(a)) is not None:  # a tokens/s resting on estimates, or on counts beyond the text
        print(visible_controls(line), flush=True)
    if (line := cost_line(a)) is not None:
        print(line, flush=True)
    for text in workload_lines(a):
        print(text, flush=True)
    if (line := partial_line(a)) is not None:
        print("          " + line, flush=True)
    return a


# --- step 4: write -----------------------------------------------------------------------
def write(args: argparse.Namespace, plan: Plan, levels: list[dict[str, Any]], meta: dict[str, Any]) -> int:
    """``summary.json``, ``levels.csv`` and the charts, then the conclusion; the exit code says how it went
    (an output that could not be written is said, exit 3)."""
    out, turns, slo = plan.out, plan.turns, plan.slo
    meta["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    unsaved: list[str] = []  # what could not be written (disk full, a folder gone read-only): said, exit 3
    if turns.error is not None:
        unsaved.append(f"{turns.path}: {turns.error.strerror or turns.error}")
    try:
        summary = write_results(out, levels, meta)
    except OSError as exc:
        unsaved.append(f"summary.json / levels.csv: {exc.strerror or exc}")
        summary = bench_summary.summary(levels, meta=meta)
    args.summary = {**summary, "out": str(out)}  # for --json
    title = meta.get("model") or args.model
    width = 78
    if args.charts == "png" and not charts.png_available():
        print("ttft bench: PNG charts need matplotlib (pip install matplotlib); writing SVG", file=sys.stderr)
    drawn = bench_charts(levels, str(title), meta.get("capacity"))
    for name, chart in drawn:
        print()
        print(chart.terminal(width, 18))
        try:
            charts.write_chart(chart, out / name, args.charts)
        except OSError as exc:
            unsaved.append(f"the {name} chart: {exc.strerror or exc}")
    print()
    print(summary["conclusion"])
    if meta.get("capacity"):
        print()
        print(meta["capacity"]["conclusion"])
    if slo:
        print(f"SLOs: {slo.describe()}")
    if unsaved:
        for what in unsaved:
            print(f"ttft bench: could not write {what}", file=sys.stderr)
        return Exit.NOT_SAVED
    names = " + ".join(name for name, _ in drawn)
    print(f"\nresults in {out}/ (turns.jsonl, summary.json, levels.csv, {names} charts)")
    if not levels or not all(lv["completed"] for lv in levels):
        return Exit.FAILED
    lost = (meta.get("cluster") or {}).get("lost")
    return Exit.PARTIAL if lost or any(lv.get("partial") for lv in levels) else Exit.OK


async def bench(args: argparse.Namespace, slo: SLO | None) -> int:
    """The run in its four steps: configure, the target server's lifetime, run, write."""
    try:
        plan = configure(args, slo)
    except Abort as exc:
        return exc.report()
    try:
        async with target_server(args, plan.out) as target:
            reader = choose_reader(args, target)
            meta = describe(args, plan, target, reader)
            levels = await measure(args, plan, target, reader, meta)
    except Abort as exc:
        return exc.report()
    finally:
        plan.turns.close()
    return write(args, plan, levels, meta)
