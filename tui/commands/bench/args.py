"""``ttft bench``'s command line: its flags, their vLLM aliases and their parsing, read once into the
record the command runs (:class:`BenchArgs`, its plan a :class:`backends.load.plan.BenchPlan`)."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.agent.loop import DEFAULT_MAX_STEPS
from backends.load.bench import BenchAbort
from backends.load.driver import LoadConfig
from backends.load.plan import BenchPlan, Capacity, LocalServer, new_run_id
from backends.load.tools import ToolsConfig
from telemetry.bench import capacity as cap
from telemetry.bench.slo import SLO
from telemetry.settings import TurnSettings
from tui.commands.args import local_flags, settings_from_args
from tui.commands.bench import capacity as bench_capacity
from tui.commands.bench import workload as bench_workload
from tui.commands.bench.flag_types import (
    _count,
    _floats,
    _lengths,
    _probe_rate,
    _seconds,
    _tool_latency,
    check_start,
    cluster_address,
    start_time,
)
from tui.commands.flags import add_local_flags, add_mcp_flags, add_turn_flags, local_flags_problem, model_spec
from tui.commands.help import examples
from tui.commands.output import add_output_flags
from tui.commands.tools import MCP_HOST, NOT_INSTALLED, mcp_module
from tui.format import visible_controls

LOCAL_SERVER = "local-server"
DEFAULT_SLOTS = 4
DEFAULT_CTX = 4096
DEFAULT_MAX_IN_FLIGHT = 1024


def check_cluster(args: argparse.Namespace) -> str | None:
    """Why ``--cluster`` cannot go with the other flags given, or None."""
    if args.cluster is None:
        return None
    if args.start_at is not None:
        return "--cluster starts the drivers together at the cluster's barrier: leave out --start-at"
    if args.workers is not None and args.workers < 1:
        return "--workers with --cluster takes a number of drivers from 1 up"
    return None


def _goodput(text: str) -> str:
    """vLLM's ``--goodput ttft:500`` (milliseconds) as ttft's ``--slo ttft=500``."""
    key, sep, value = text.partition(":")
    item = f"{key}={value}"
    try:
        if not sep:
            raise ValueError("no colon")
        SLO.parse(item)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KEY:MS with KEY ttft, tpot or e2el, got {text!r}") from None
    return item


class _GoodputAction(argparse.Action):
    """``--goodput ttft:500 tpot:50`` fills ``--slo`` (one of the two; the later wins)."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any, opt: Any = None) -> None:
        setattr(ns, self.dest, ",".join(values))


def build(sub: argparse._SubParsersAction, description: str | None) -> argparse.ArgumentParser:
    """The ``bench`` subcommand's parser with every flag (its ``func`` is set by the caller)."""
    p = sub.add_parser(
        "bench",
        help="load-test a model: total throughput against each user's speed, across concurrency levels or rates",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples(
            "ttft bench -m compat:qwen3 --base-url http://127.0.0.1:8080/v1 --concurrency 1,2,4,8",
            "ttft bench -m local-server --slots 4 --concurrency 1,2,4",
            "ttft bench -m compat:m --base-url URL --rate 2,4,8 --slo ttft=500ms,tpot=50ms",
            "# vLLM's names work too: --num-prompts, --request-rate, --max-concurrency, --random-input-len, --goodput",
            "ttft bench -m compat:m --base-url URL --max-concurrency 8 --num-prompts 64 --goodput ttft:500 tpot:50",
            "ttft bench -m compat:m --base-url URL --json -q > summary.json",
            "ttft bench -m compat:m --base-url URL --concurrency 1,4,8 --probe-rate 0.5   # one chat user beside it",
            "ttft bench -m compat:m --base-url URL --concurrency 1,4 --tool-latency 200   # agent turns, a stub tool",
            "ttft bench -m compat:m --base-url URL --concurrency 4 --mcp 'uvx mcp-server-time'   # real tools",
            "ttft bench -m compat:m --base-url http://127.0.0.1:8000/v1 --server-metrics   # vLLM's queue and KV use",
            "ttft bench -m compat:m --base-url URL --cluster local:2 --concurrency 8 --requests 40",
            "ttft bench -m compat:m --base-url http://vllm.svc:8000/v1 --cluster auto --concurrency 64,256",
            "# workloads: spread lengths, shared prefixes, conversations, datasets, traces (docs/bench/workloads.md)",
            "ttft bench -m local-server --input-tokens 100:30 --output-tokens 32-96 --ignore-eos",
            "ttft bench -m local-server --prefix-tokens 256 --prefixes 2 --concurrency 4",
            "ttft bench -m compat:m --base-url URL --turns 3 --think-time 1",
            "ttft bench -m compat:m --base-url URL --trace mooncake.jsonl --speedup 1,2",
            "ttft bench -m compat:m --base-url URL --trace ~/.local/share/ttft/sessions/SESSION.jsonl --speedup 10",
        ),
    )
    p.add_argument("-m", "--model", type=model_spec, required=True, help="PROVIDER:MODEL, or local-server[:PATH.gguf]")
    p.add_argument("--base-url", help="server base URL (compat servers, or to point a provider at another host)")
    _add_load(p)
    _add_workload(p)
    _add_run(p)
    _add_client(p)
    return p


def _add_load(p: argparse.ArgumentParser) -> None:
    """The load: its levels (closed or open loop), its requests and warm-up."""
    load = p.add_mutually_exclusive_group()
    load.add_argument(
        "--concurrency",
        "--max-concurrency",
        dest="concurrency",
        type=_floats,
        help="closed-loop users per level, e.g. 1,2,4,8 (default)",
    )
    load.add_argument(
        "--rate",
        "--request-rate",
        dest="rate",
        type=_floats,
        nargs="?",
        const=(1.0,),
        help="open-loop Poisson arrival rates in requests/s, e.g. 2,4,8 (alone, with --find-capacity: from 1/s)",
    )
    p.add_argument(
        "--requests",
        "--num-prompts",
        dest="requests",
        type=_count(1),
        help="measured requests per level (default 32; a trace: all of its requests; with --turns, rounded "
        "up to whole conversations)",
    )
    p.add_argument("--warmup", type=int, default=2, help="unmeasured requests before the first level (default 2)")


def _add_workload(p: argparse.ArgumentParser) -> None:
    """The workload group: what each request is."""
    work = p.add_argument_group(
        "workload (what each request is; docs/bench/workloads.md)",
    )
    work.add_argument(
        "--input-tokens",
        "--random-input-len",
        dest="input_tokens",
        type=_lengths,
        metavar="N|MEAN:STDDEV|A-B",
        help="synthetic prompt length: fixed, a normal clipped at 1, or uniform from A to B (default 128)",
    )
    work.add_argument(
        "--output-tokens",
        "--random-output-len",
        dest="output_tokens",
        type=_lengths,
        metavar="N|MEAN:STDDEV|A-B",
        help="answer length asked for through max_tokens, drawn per request (default --max-output-tokens; "
        "with --dataset, the dataset's answer lengths); a server stops sooner at its end-of-sequence token "
        "unless it ignores it (--ignore-eos)",
    )
    work.add_argument(
        "--prefix-tokens",
        "--random-prefix-len",
        dest="prefix_tokens",
        type=_count(1),
        metavar="N",
        help="every conversation starts with one of --prefixes shared texts of N tokens (the prefix-cache experiment)",
    )
    work.add_argument(
        "--prefixes",
        type=_count(1),
        metavar="K",
        help="how many shared prefixes; closed-loop users are spread over them, user u on prefix u mod K (default 1)",
    )
    work.add_argument(
        "--turns",
        type=_count(1),
        default=1,
        metavar="T",
        help="each user holds conversations of T turns; turn k resends the whole history with the model's "
        "real answers (with --dataset: up to T of each conversation's human turns)",
    )
    work.add_argument(
        "--think-time",
        type=_seconds,
        default=0.0,
        metavar="S",
        help="with --turns: seconds between an answer and the user's next turn (default 0)",
    )
    work.add_argument(
        "--dataset",
        type=Path,
        metavar="FILE",
        help="prompts from a file: ShareGPT JSON or JSONL (the first human turn; the whole conversation with "
        "--turns), chat messages, or JSONL with a prompt field",
    )
    work.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help="replay a trace: Mooncake JSONL (timestamp ms, input_length, output_length, hash_ids of 512-token "
        "blocks) or a ttft session log or id (its turns' sizes, answers and gaps); requests go at the trace's times",
    )
    work.add_argument(
        "--speedup",
        type=_floats,
        metavar="X[,Y...]",
        help="with --trace: replay it X times faster; several values are levels (default 1)",
    )


def _add_run(p: argparse.ArgumentParser) -> None:
    """The run's seed, objectives, folder, processes, cluster, start and probe user."""
    p.add_argument("--seed", type=int, default=0, help="prompts and arrival times repeat with the same seed")
    p.add_argument("--slo", help="goodput objectives, e.g. ttft=500ms,tpot=50ms,e2e=10s (errors count as misses)")
    p.add_argument(
        "--goodput",
        dest="slo",
        nargs="+",
        type=_goodput,
        action=_GoodputAction,
        metavar="KEY:MS",
        help="vLLM's spelling of --slo: ttft:500 tpot:50 e2el:10000 (milliseconds)",
    )
    p.add_argument("--out", type=Path, help="results folder (default ./ttft-bench-<time>)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="split the load across this many client processes (with --cluster: drivers spread over the nodes; "
        "default one per node)",
    )
    p.add_argument(
        "--cluster",
        type=cluster_address,
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="run the load drivers on a Ray cluster: auto (RAY_ADDRESS, or the one started here), HOST:PORT, "
        "ray://HOST:PORT, or local:N for a throwaway cluster of N nodes on this machine (needs ttft[cluster])",
    )
    p.add_argument(
        "--start-at",
        type=start_time,
        metavar="TIME",
        help="start the first measured level at this wall-clock time (ISO 8601 with a zone, or Unix seconds), "
        "after the warm-up: several machines then load the server together (merge with ttft report --merge)",
    )
    p.add_argument(
        "--max-in-flight",
        type=_count(1),
        help=f"with --rate: most streams at once (default {DEFAULT_MAX_IN_FLIGHT}; closed loop, the users are the cap)",
    )
    p.add_argument(
        "--probe-rate",
        type=_probe_rate,
        metavar="R",
        help="one more chat user beside each level's load, sending one plain request at a time R times a second "
        "until the load ends; its TTFT and TPOT are reported apart (the probe line, summary.json's probe) and "
        "kept out of the load's figures",
    )


def _add_client(p: argparse.ArgumentParser) -> None:
    """Tools, how the client reads, the server's gauges, charts and llama-server's flags."""
    tools = p.add_argument_group("tools: each request an agent turn (docs/bench/index.md, Tools under load)")
    tools.add_argument(
        "--tool-latency",
        type=_tool_latency,
        metavar="MS",
        help="offer the model one stub tool, lookup(query), that answers a fixed short text after MS ms; each "
        "request is then an agent turn (model, tools, model ...), and each level reports steps per turn and the "
        "time to the final answer",
    )
    tools.add_argument(
        "--max-steps",
        type=_count(1),
        metavar="N",
        help=f"with --tool-latency or --mcp: at most N model steps per turn (default {DEFAULT_MAX_STEPS})",
    )
    add_mcp_flags(p)  # --mcp SPEC: real tool servers instead of the stub (every tool runs without asking)
    client = p.add_mutually_exclusive_group()
    client.add_argument(
        "--sdk",
        action="store_true",
        help="read through the API's SDK (typed events, httpx2) instead of ttft's lean reader (orjson, "
        "httptools); the same records at several times the client CPU per chunk",
    )
    client.add_argument(
        "--aiohttp",
        action="store_true",
        help="the lean reader on aiohttp rather than on its own asyncio Protocol + httptools transport (the "
        "default when httptools is installed); the same records at more client CPU per chunk",
    )
    client.add_argument(
        "--raw-stream",
        action="store_true",
        help="Chat Completions: the SDK's HTTP call, its stream read as JSON without typed chunks",
    )
    client.add_argument("--lean", action="store_true", help=argparse.SUPPRESS)  # the default; scripts may still pass it
    p.add_argument(
        "--server-metrics",
        nargs="?",
        const="",
        metavar="URL",
        help="read the server's own gauges (requests waiting and running, KV cache use, prefix-cache hits) from "
        "its Prometheus endpoint every 250 ms during each level: vLLM, SGLang, llama-server, TGI (URL: default "
        "/metrics beside the API); always on with -m local-server",
    )
    p.add_argument("--charts", choices=("svg", "png"), default="svg", help="chart files (png needs matplotlib)")
    p.add_argument("--slots", type=_count(1), help=f"local-server: parallel slots (-np; default {DEFAULT_SLOTS})")
    p.add_argument(
        "--ctx",
        type=_count(1),
        help=f"local-server: context shared by the slots (-c; default {DEFAULT_CTX}); a request holds at most "
        "CTX / SLOTS tokens, and a workload whose longest request does not fit is refused",
    )
    p.add_argument(
        "--ignore-eos",
        action="store_true",
        help="every answer runs to the max_tokens asked (--max-output-tokens or --output-tokens): llama-server's "
        "--ignore-eos with -m local-server, ignore_eos: true in each request to a compat: server (vLLM, SGLang, "
        "llama-server); an error for OpenAI's and Anthropic's APIs, which have no such switch",
    )
    add_turn_flags(p, max_output_tokens=64, max_retries=0)  # a retry would hide an error a load test counts
    add_local_flags(p, server=True)  # -m local's engine, and -m local-server's -t, -ngl, -fa and binary
    add_output_flags(p, "print the ttft.bench/1 summary (summary.json, with the results folder) instead of the tables")
    bench_capacity.add_arguments(p)


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
    from backends.providers.registry import ProviderError, resolve

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
    config, host = mcp_module(), mcp_module(MCP_HOST)
    if config is None or host is None:
        raise BenchAbort("usage", NOT_INSTALLED)
    try:
        servers = config.resolve_specs(args.mcp)
    except config.McpSpecError as exc:
        raise BenchAbort("usage", str(exc)) from None
    return ToolsConfig(
        servers=tuple(servers),
        max_steps=args.max_steps,
        start_timeout_s=args.mcp_start_timeout,
        call_timeout_s=args.mcp_call_timeout,
    )


def local_problem(args: argparse.Namespace) -> str | None:
    """--gpu-layers, --threads, --flash-attn: for -m local and -m local-server; --server-bin: local-server."""
    from backends.providers.registry import ProviderError, is_local_spec

    if is_local_server(args.model):
        return None
    try:
        local = is_local_spec(args.model)
    except ProviderError:  # a config that does not read: the run's start says so
        local = True
    problem = local_flags_problem(local_flags(args), local)
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
