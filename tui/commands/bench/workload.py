"""``ttft bench``'s workload flags as one :class:`telemetry.bench.workload.plan.Workload`, checked.

The flags combine only in ways that mean something: a trace brings its own arrival times, lengths
and shared blocks, so it takes no load levels, prefixes or turns (its levels are ``--speedup``s);
``--prefixes`` needs ``--prefix-tokens``, ``--think-time`` needs turns. A dataset or a trace is read
here, before anything is sent, so a file that does not read stops the run with one sentence.

A workload whose longest request would not fit the server's context (when ttft knows it: the
llama-server it starts), or ttft's cap (:data:`telemetry.bench.workload.lengths.MAX_TOKENS`), is
refused here too, naming the limit: a server would only answer each such request with an error, and
a figure measured on such requests means nothing. A dataset's conversations that do not fit are
left out (said), as ``vllm bench serve`` filters ShareGPT's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ....telemetry.bench.workload.dataset import DatasetError, read_dataset
from ....telemetry.bench.workload.lengths import MAX_TOKENS, Lengths
from ....telemetry.bench.workload.plan import Workload
from ....telemetry.bench.workload.trace import TraceError, read_trace
from ....telemetry.errors import TtftError
from ....telemetry.log.sessions import resolve

DEFAULT_INPUT_TOKENS = 128
DEFAULT_REQUESTS = 32


class WorkloadError(TtftError, ValueError):
    """Flags that do not make one workload, or a file that does not read: the message says which."""


@dataclass(frozen=True)
class ContextLimit:
    """The most tokens (prompt and answer) one request may hold on the target, and where that comes from."""

    tokens: int
    source: str  # e.g. "the context of each llama-server slot (--ctx 4096 over --slots 4)"


CAP = ContextLimit(MAX_TOKENS, "ttft's cap (no model's context is longer)")


@dataclass(frozen=True, slots=True)
class WorkloadFlags:
    """The flags that shape the workload, as given (None, 0 or empty: not given; read by
    ``tui.commands.bench.args.workload_flags``)."""

    input_tokens: Lengths | None
    output_tokens: Lengths | None
    max_output_tokens: int
    prefix_tokens: int | None
    prefixes: int | None
    turns: int
    think_time: float
    dataset: Path | None
    trace: Path | None
    speedup: tuple[float, ...] | None
    concurrency: tuple[float, ...] | None
    rate: tuple[float, ...] | None
    find_capacity: bool
    requests: int | None


@dataclass
class Chosen:
    """The workload, the mode and levels it runs at, the requests per level and what to tell the user."""

    workload: Workload
    input_tokens: int  # the fixed (or mean) synthetic length: warm-ups and the summary's plain key
    requests: int
    trace: bool = False
    notes: list[str] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)  # what the dataset or trace held, for summary.json


def choose(args: WorkloadFlags, limit: ContextLimit | None = None) -> Chosen:
    """The workload the flags ask for; WorkloadError naming the flag that does not fit, or the limit
    (``limit``, else ttft's cap) that its longest request passes."""
    inputs: Lengths | None = args.input_tokens
    trace = args.trace is not None
    if args.speedup and not trace:
        raise WorkloadError("--speedup replays a trace faster: it needs --trace FILE")
    if args.prefixes is not None and not args.prefix_tokens:
        raise WorkloadError("--prefixes K needs --prefix-tokens N (the length of each shared prefix)")
    if args.think_time and args.turns < 2:
        raise WorkloadError("--think-time is the pause between turns: it needs --turns 2 or more")
    if trace:
        clash = [
            flag
            for flag, given in (
                ("--concurrency", args.concurrency),
                ("--rate", args.rate),
                ("--find-capacity", args.find_capacity),
                ("--dataset", args.dataset),
                ("--prefix-tokens", args.prefix_tokens),
                ("--turns", args.turns > 1),
                ("--input-tokens", inputs),
            )
            if given
        ]
        if clash:
            raise WorkloadError(
                f"a trace brings its own arrival times, lengths and shared blocks: {', '.join(clash)} "
                "cannot go with --trace (its levels are --speedup X,Y)"
            )
    if args.dataset is not None and inputs is not None:
        raise WorkloadError("--input-tokens draws synthetic prompts: a --dataset brings its own")
    inputs = inputs or Lengths.fixed(DEFAULT_INPUT_TOKENS)
    notes: list[str] = []
    source: dict[str, Any] = {}
    w = Workload(
        input=inputs,
        output=args.output_tokens,
        prefix_tokens=args.prefix_tokens or 0,
        prefixes=args.prefixes or 1,
        turns=args.turns,
        think_time_s=args.think_time,
    )
    if args.dataset is not None:
        try:
            data = read_dataset(args.dataset.expanduser())
        except DatasetError as exc:
            raise WorkloadError(str(exc)) from None
        notes += data.notes()
        source = data.summary()
        w = replace(w, dataset=tuple(data.conversations), dataset_source=data.source)
    if args.trace is not None:
        try:
            tr = read_trace(resolve(str(args.trace.expanduser())))  # a file, or a session's id
        except FileNotFoundError as exc:
            raise WorkloadError(f"--trace: {exc}") from None
        except TraceError as exc:
            raise WorkloadError(str(exc)) from None
        notes += tr.notes()
        source = tr.summary()
        w = replace(w, trace=tuple(tr.requests), trace_source=tr.source, trace_kind=tr.kind)
        requests = min(args.requests or len(tr.requests), len(tr.requests))
    else:
        requests = w.requests_for(args.requests or DEFAULT_REQUESTS)
    w, dropped = fit(w, args.max_output_tokens, limit or CAP)
    if dropped:
        notes.append(dropped)
    return Chosen(w, max(1, round(inputs.mean)), requests, trace, notes, source)


def fit(w: Workload, default_output: int, limit: ContextLimit) -> tuple[Workload, str | None]:
    """``w`` when its longest request fits ``limit``; a dataset without the conversations that do not (and
    the note saying so); else WorkloadError naming the request, its tokens and the limit."""
    if default_output > MAX_TOKENS:
        raise WorkloadError(f"--max-output-tokens {default_output:,} is past {CAP.source}: {CAP.tokens:,} tokens")
    note = None
    if w.dataset and w.longest(default_output).total > limit.tokens:
        kept = tuple(c for c in w.dataset if sum(w.dataset_longest(c, default_output)) <= limit.tokens)
        if kept:
            s = "s" if len(w.dataset) - len(kept) != 1 else ""
            note = (
                f"left out {len(w.dataset) - len(kept):,} conversation{s} of {w.dataset_source} longer than "
                f"{limit.source}: {limit.tokens:,} tokens; {len(kept):,} kept"
            )
            w = replace(w, dataset=kept)
    longest = w.longest(default_output)
    if longest.total > limit.tokens:
        raise WorkloadError(
            f"{longest.what} needs {longest.total:,} tokens of context ({longest.prompt:,} of prompt, "
            f"{longest.output:,} of answer), past {limit.source}: {limit.tokens:,} tokens. Nothing was sent; "
            "ask for shorter lengths (--input-tokens, --output-tokens, --max-output-tokens, --turns)"
        )
    return w, note
