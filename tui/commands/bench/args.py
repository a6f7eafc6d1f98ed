"""``ttft bench``'s parsed flags read once into the record the command runs (:class:`BenchArgs`, its plan
a :class:`backends.load.plan.BenchPlan`); the flags themselves are declared in :mod:`tui.commands.bench.flags`."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from ....backends.agent.loop import DEFAULT_MAX_STEPS
from ....backends.load.bench import BenchAbort
from ....backends.load.driver import LoadConfig
from ....backends.load.plan import BenchPlan, Capacity, LocalServer, new_run_id
from ....backends.load.tools import ToolsConfig
from ....telemetry.bench import capacity as cap
from ....telemetry.bench.slo import SLO
from ....telemetry.settings import TurnSettings
from ...format import visible_controls
from ..args import local_flags, settings_from_args
from ..flags import local_flags_problem
from . import capacity as bench_capacity
from . import workload as bench_workload
from .flag_types import (
    check_start,
)
from .flags import DEFAULT_CTX, DEFAULT_MAX_IN_FLIGHT, DEFAULT_SLOTS, LOCAL_SERVER


def check_cluster(args: argparse.Namespace) -> str | None:
    """Why ``--cluster`` cannot go with the other flags given, or None."""
    if args.cluster is None:
        return None
    if args.start_at is not None:
        return "--cluster starts the drivers together at the cluster's barrier: leave out --start-at"
    if args.workers is not None and args.workers < 1:
        return "--workers with --cluster takes a number of drivers from 1 up"
    return None


def is_local_server(spec: str) -> bool:
    """``-m local-server`` or ``-m local-server:PATH.gguf``: the llama-server this run starts."""
    return spec == LOCAL_SERVER or spec.startswith(LOCAL_SERVER + ":")


CAPACITY_FLAGS = (
    ("--attainment", "attainment"),
    ("--capacity-limit", "capacity_limit"),
    ("--probe-max-requests", "probe_max_requests"),
)
NO_IGNORE_EOS = frozenset({"openai", "openai-responses", "anthropic"})  # hosted APIs without the switch
TURN_FLAG_APIS = (  # a turn flag, its namespace name, and the only provider kind whose API takes it
    ("--thinking-budget", "thinking_budget", "anthropic"),
    ("--thinking-display", "thinking_display", "anthropic"),
    ("--reasoning-summary", "reasoning_summary", "openai-responses"),
)


def misfits(args: argparse.Namespace, kind: str | None) -> list[str]:
    """Each flag given that would do nothing for this target (``kind``: the provider kind of ``-m``, None
    when it does not resolve) or this load, with why: the bench refuses them rather than run something
    else than was asked (run :func:`settle` after, to fill the defaults)."""
    local = is_local_server(args.model)
    out: list[str] = []
    if local:
        kind = "compat"  # llama-server speaks Chat Completions
        if args.base_url:
            out.append("--base-url: -m local-server loads the llama-server it starts; leave --base-url out")
    else:
        out += [
            f"{flag} sets the llama-server ttft starts with -m local-server; {args.model}'s server is set up "
            "where it runs (leave it out)"
            for flag, given in (("--slots", args.slots), ("--ctx", args.ctx))
            if given is not None
        ]
    if args.ignore_eos and kind in NO_IGNORE_EOS:
        out.append(
            f"--ignore-eos: the {kind} API has no ignore_eos, so answers would stop at the model's end token; "
            "it works with -m local-server and with compat:MODEL --base-url URL (vLLM, SGLang, llama-server)"
        )
    if args.raw_stream and kind in ("openai-responses", "anthropic"):
        out.append(f"--raw-stream reads Chat Completions; the {kind} API is read by its lean reader or --sdk")
    for flag, dest, only in TURN_FLAG_APIS:
        if getattr(args, dest, None) is not None and kind is not None and kind != only:
            out.append(f"{flag} is for the {only} API; the {kind} API has no such setting")
    if not args.find_capacity:
        out += [
            f"{flag} shapes --find-capacity's search: add --find-capacity, or leave it out"
            for flag, dest in CAPACITY_FLAGS
            if getattr(args, dest) is not None
        ]
    if args.probe_rate is not None and args.find_capacity:
        out.append("--probe-rate goes beside a run's levels; --find-capacity's probes are a search: leave one out")
    if args.probe_rate is not None and args.cluster is not None:
        out.append(
            "--probe-rate sends from this process beside the load; --cluster's drivers load from elsewhere: "
            "leave one out"
        )
    out += tools_misfits(args, kind)
    if args.max_in_flight is not None and not (args.rate or args.trace):
        out.append(
            "--max-in-flight caps an open loop's streams (--rate, --trace); with --concurrency the users are the cap"
        )
    return out


def tools_misfits(args: argparse.Namespace, kind: str | None) -> list[str]:
    """Why the tool flags (``--tool-latency``, ``--mcp``, ``--max-steps``) cannot make this run."""
    stub, mcp = args.tool_latency is not None, bool(args.mcp)
    if not (stub or mcp):
        return ["--max-steps counts the steps of a tool-using turn: add --tool-latency MS or --mcp SPEC"] * (
            args.max_steps is not None
        )
    if stub and mcp:
        return ["--tool-latency answers with a stub, --mcp with real tool servers: pick one"]
    flag = "--tool-latency" if stub else "--mcp"
    if kind == "local":
        return [f"{flag}: the local engine has no tool support; use -m local-server (llama-server with --jinja) "
                "or a hosted model"]  # fmt: skip
    if args.cluster is not None:
        return [f"{flag} runs the tools in this machine's load processes; --cluster's drivers run elsewhere: "
                "leave one out"]  # fmt: skip
    return []


def settle(args: argparse.Namespace) -> None:
    """The defaults of the flags left as None so :func:`misfits` can tell whether they were given."""
    for dest, default in (
        ("slots", DEFAULT_SLOTS),
        ("ctx", DEFAULT_CTX),
        ("max_in_flight", DEFAULT_MAX_IN_FLIGHT),
        ("attainment", cap.DEFAULT_ATTAINMENT),
        ("capacity_limit", bench_capacity.DEFAULT_LIMIT),
        ("max_steps", DEFAULT_MAX_STEPS),
    ):
        if getattr(args, dest) is None:
            setattr(args, dest, default)


# --- the plan: the flags read once into a backends.load.plan.BenchPlan ------------------------------
def kind(spec: str, base_url: str | None) -> str | None:
    """The provider kind ``-m`` names (openai, anthropic, compat, ...), or None when it does not resolve (the
    run says why when it builds the backend)."""
    from ....backends.providers.registry import ProviderError, resolve

    if is_local_server(spec):
        return None
    try:
        return resolve(spec, base_url=base_url).kind
    except ProviderError:
        return None


def context_limit(args: argparse.Namespace) -> bench_workload.ContextLimit | None:
    """The most tokens one request may hold on the target, where ttft knows it: each slot's share of the
    context of the llama-server it starts (``-c`` is split over the ``-np`` slots)."""
    if not is_local_server(args.model):
        return None
    return bench_workload.ContextLimit(
        args.ctx // args.slots, f"the context of each llama-server slot (--ctx {args.ctx} over --slots {args.slots})"
    )


def turn_settings(args: argparse.Namespace) -> TurnSettings:
    """The turn flags' settings, with ``--ignore-eos`` as the request's ``ignore_eos`` (sent to a Chat
    Completions server that is not OpenAI's; :func:`misfits` refused the others)."""
    turn = settings_from_args(args)
    return turn.with_(extra={**turn.extra, "ignore_eos": True}) if args.ignore_eos else turn


def tools_config(args: argparse.Namespace) -> ToolsConfig | None:
    """The run's tools: the stub of ``--tool-latency``, the servers of ``--mcp`` (their specs resolved here, so a
    spec that names nothing is a usage error before anything runs), or None."""
    if args.tool_latency is not None:
        return ToolsConfig(latency_ms=args.tool_latency, max_steps=args.max_steps)
    if not args.mcp:
        return None
    from ....backends.mcp.config import McpSpecError, resolve_specs

    try:
        servers = resolve_specs(args.mcp)
    except McpSpecError as exc:
        raise BenchAbort("usage", str(exc)) from None
    return ToolsConfig(
        servers=tuple(servers),
        max_steps=args.max_steps,
        start_timeout_s=args.mcp_start_timeout,
        call_timeout_s=args.mcp_call_timeout,
    )


def local_problem(args: argparse.Namespace) -> str | None:
    """--gpu-layers, --threads, --flash-attn: for -m local and -m local-server; --server-bin: local-server."""
    from ....backends.providers.registry import names_local_engine

    if is_local_server(args.model):
        return None
    # a config that does not read (None): the run's start says so
    problem = local_flags_problem(local_flags(args), names_local_engine(args.model) is not False)
    return f"{problem} (or -m local-server)" if problem and "--server-bin" not in problem else problem


def workload(args: argparse.Namespace) -> bench_workload.Chosen:
    """The workload the flags ask for; :class:`BenchAbort` (a usage error) naming the flag that does not fit."""
    try:
        return bench_workload.choose(workload_flags(args), context_limit(args))
    except bench_workload.WorkloadError as exc:
        raise BenchAbort("usage", str(exc)) from None  # a file's name or bytes: shown, never run


def workload_flags(args: argparse.Namespace) -> bench_workload.WorkloadFlags:
    return bench_workload.WorkloadFlags(
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        max_output_tokens=args.max_output_tokens,
        prefix_tokens=args.prefix_tokens,
        prefixes=args.prefixes,
        turns=args.turns,
        think_time=args.think_time,
        dataset=args.dataset,
        trace=args.trace,
        speedup=args.speedup,
        concurrency=args.concurrency,
        rate=args.rate,
        find_capacity=args.find_capacity,
        requests=args.requests,
    )


def load_config(args: argparse.Namespace, chosen: bench_workload.Chosen) -> LoadConfig:
    """The driver's configuration: the mode and levels (a trace's are its speedups; a capacity search's, its
    limit, which sizes the HTTP pool), the workload and the turn flags."""
    mode = "trace" if chosen.trace else "rate" if args.rate else "concurrency"
    levels = (args.speedup or (1.0,)) if chosen.trace else (args.rate or args.concurrency or (1.0, 2.0, 4.0, 8.0))
    return LoadConfig(
        mode=mode,  # type: ignore[arg-type]
        levels=(args.capacity_limit,) if args.find_capacity else tuple(levels),
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


def parse_objectives(args: argparse.Namespace) -> cap.Objectives:
    """The search's objectives, or ValueError with the words to print."""
    if not args.slo:
        raise ValueError("--find-capacity needs --slo, e.g. --slo ttft_p90=500ms,tpot_p90=50ms")
    return cap.Objectives.parse(args.slo, args.attainment)


def start_level(args: argparse.Namespace) -> float:
    """Where the capacity search starts: the first --rate or --concurrency given, else 1."""
    given = args.rate or args.concurrency
    return float(given[0]) if given else 1.0


def plan(
    args: argparse.Namespace, chosen: bench_workload.Chosen, slo: SLO | None, objectives: cap.Objectives | None
) -> BenchPlan:
    """The run's plan from the flags, read once; :class:`BenchAbort` (a usage error) for flags that cannot
    go together. The run's id and its folder's name are settled here."""
    load = load_config(args, chosen)
    if (why := check_start(args.start_at, time.time()) or check_cluster(args) or local_problem(args)) is not None:
        raise BenchAbort("usage", why)
    run_id = new_run_id()
    local = None
    if is_local_server(args.model):
        server_bin = str(args.server_bin) if args.server_bin is not None else None
        local = LocalServer(
            args.slots, args.ctx, args.threads, args.gpu_layers, args.flash_attn, args.ignore_eos, server_bin
        )
    capacity = None
    if args.find_capacity and objectives is not None:
        start = start_level(args)
        capacity = Capacity(objectives, start, args.capacity_limit, args.probe_max_requests)
    return BenchPlan(
        args.model,
        load,
        args.out or Path(f"ttft-{run_id}"),
        run_id,
        base_url=args.base_url,
        local=local,
        slo=slo,
        capacity=capacity,
        cluster=args.cluster,
        cluster_workers=args.workers,
        raw_stream=args.raw_stream,
        sdk=args.sdk,
        aiohttp=args.aiohttp,
        timeout_s=args.timeout,
        server_metrics=args.server_metrics,
        start_at=args.start_at,
        workload_source=chosen.source or None,
        workload_notes=tuple(chosen.notes),
    )


# --- the record the command runs ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BenchArgs:
    """The flags read: what to say first, then the plan, or why there is none; and how results show."""

    said: tuple[str, ...]  # whole lines for stderr, before anything runs: refused flags, the workload's notes
    plan: BenchPlan | BenchAbort  # the run's plan, or why the flags make none (its exit, any sentence left)
    json: bool
    quiet: bool
    charts: str  # the chart files' format


def read(args: argparse.Namespace) -> BenchArgs:
    """The flags, checked against the target (``-m`` resolved: after ``tui.cli``'s config check) and read
    once into the plan; flags that do not fit are refused before anything is sent."""
    said: list[str] = []

    def refused(abort: BenchAbort) -> BenchArgs:
        return BenchArgs(tuple(said), abort, args.json, args.quiet, args.charts)

    if misfit := misfits(args, kind(args.model, args.base_url)):  # a flag that would do nothing here
        said += [visible_controls(f"ttft bench: {why}") for why in misfit]
        return refused(BenchAbort("usage"))
    settle(args)
    objectives = None
    try:
        if args.find_capacity:
            objectives = parse_objectives(args)
            slo: SLO | None = objectives.slo()
        else:
            slo = SLO.parse(args.slo)
    except ValueError as exc:
        said.append(f"ttft bench: {exc}")
        return refused(BenchAbort("usage"))
    try:
        chosen = workload(args)
        said += [visible_controls(f"ttft bench: {note}") for note in chosen.notes]
        return BenchArgs(tuple(said), plan(args, chosen, slo, objectives), args.json, args.quiet, args.charts)
    except BenchAbort as exc:
        return refused(exc)
