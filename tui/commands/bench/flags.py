"""``ttft bench``'s flags as argparse declares them: the load, the workload, the run and the client,
with vLLM's names as aliases. Reading what was given is :mod:`tui.commands.bench.args`'s."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ....backends.agent.loop import DEFAULT_MAX_STEPS
from ....telemetry.bench.slo import SLO
from ....telemetry.log.quote import quoted
from ..flags import add_local_flags, add_mcp_flags, add_turn_flags, model_spec
from ..help import examples
from ..output import add_output_flags
from . import capacity as bench_capacity
from .flag_types import (
    _count,
    _floats,
    _lengths,
    _probe_rate,
    _seconds,
    _tool_latency,
    cluster_address,
    start_time,
)

LOCAL_SERVER = "local-server"
DEFAULT_SLOTS = 4
DEFAULT_CTX = 4096
DEFAULT_MAX_IN_FLIGHT = 1024


def _goodput(text: str) -> str:
    """vLLM's ``--goodput ttft:500`` (milliseconds) as ttft's ``--slo ttft=500``."""
    key, sep, value = text.partition(":")
    item = f"{key}={value}"
    try:
        if not sep:
            raise ValueError("no colon")
        SLO.parse(item)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KEY:MS with KEY ttft, tpot or e2el, got {quoted(text)}") from None
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
