"""ttft bench against AIPerf on the same loopback servers, in one run; prints both side by side.

    python tests/benchmarks/bench_vs_peer.py [--aiperf /tmp/aiperf-venv/bin/aiperf] [--rounds 3] [--skip-llama]
        [--workload plain|turns|prefix] [--turns 3] [--prefix-tokens 256 --prefixes 2]

1. The simulated batching server (tests/fakes/batching_server.py, a separate process) and, when
   llama-server is installed (extra ``server``), the real llama-server with the default local
   model (``--ignore-eos`` so both tools get exactly the requested output length).
2. For each concurrency level: ``ttft bench`` and ``aiperf profile``, one run each, same output
   length, similar prompt length, closed loop, prompts of their own in every run (a repeated
   prompt would come from llama-server's prompt cache).
   ``--rounds N`` runs each tool N times per level, ttft first in odd rounds and AIPerf first in even
   ones, so a server whose speed drifts over a level favours neither tool.
3. Prints TTFT p50, TPOT p50 (AIPerf calls it ITL) and output tokens/s per level for both tools
   (each the median over the rounds, min-max beside it) with the ratio ttft/AIPerf (target: within
   5%), and each tool's CPU seconds (its whole process tree, user + system) per 1,000 streamed
   chunks (one token per chunk on both servers). On the fake, each tool against its schedule.
   On llama-server, also each run against the server's own figures for that same run, read from
   its log (tests/benchmarks/llama_log.py: its TPOT and tokens/s over the requests that run sent),
   and ttft/AIPerf of those normalised figures: the comparison that cancels the server's drift
   between one tool's run and the next. TTFT is normalised per request: each request's TTFT over
   the server's wait for it (its launch against the request's send time: on the server's single
   loop a request that arrives during another's prefill waits for the rest of it) plus its prompt
   eval; the median over a run's requests, then its median and range over the rounds. (A ratio of
   p50 TTFT to p50 prompt time compares two medians of different requests, and swung 0.73-1.30 at
   concurrency 2 with whether requests happened to wait.) History reuse is counted from llama-server's
   ``cache_n`` (the prompt tokens a slot kept: a conversation's earlier turns), read from its log.
   Both servers run on the first half of the cores, both tools on the other half (``--no-pin``
   to share them), so a tool's own CPU use cannot slow the server it measures.
4. The most concurrent streams one ttft process holds with event-loop lag p99 under 5 ms
   (a fake server with unlimited slots, 20 ms per token).

``--workload`` sends the same kind of load from both tools: ``turns`` (conversations of ``--turns``
turns, each resending the history with the live answers: ``ttft bench --turns T`` against AIPerf's
``--conversation-turn-mean T --conversation-turn-stddev 0``, whose synthetic multi-turn threads the
live responses into the history too) or ``prefix`` (``ttft bench --prefix-tokens N --prefixes K``
against AIPerf's ``--prefix-prompt-length N --prefix-prompt-pool-size K``). What differs: ttft gives
closed-loop user u the prefix u mod K, AIPerf draws one from its pool per request; ttft counts
``--input-tokens`` after the prefix, AIPerf's prompt length also comes after it. Both draw
prefixes of their own per run (seeded), so neither run reads the other's from llama-server's cache.

AIPerf runs offline here with a word-level tokenizer built from its own corpus with the
``tokenizers`` package (in AIPerf's venv); ``HF_HUB_OFFLINE`` must stay unset for it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks import llama_log  # noqa: E402
from tests.fakes.batching_server import free_port, wait_http  # noqa: E402

TOKENIZER_CODE = r"""
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
corpus = Path(sys.argv[2])
tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]"], vocab_size=30000)
extra = out / "extra.txt"
extra.write_text(" ".join(f"w{i:02d}" for i in range(1000)))
tok.train([str(corpus), str(extra)], trainer)
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
    "unk_token": "[UNK]", "model_max_length": 100000}))
(out / "special_tokens_map.json").write_text(json.dumps({"unk_token": "[UNK]"}))
"""


def child_cpu_s() -> float:
    """CPU seconds of all finished child processes so far (a tool's whole process tree once it exits)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def build_tokenizer(aiperf: Path, folder: Path) -> Path:
    py = aiperf.parent / "python"
    corpus = next((aiperf.parent.parent / "lib").glob("python3*/site-packages/aiperf/dataset/generator/assets/*.txt"))
    subprocess.run([str(py), "-c", TOKENIZER_CODE, str(folder), str(corpus)], check=True)
    return folder


def run_ttft(
    base_url: str, model: str, levels: list[int], a: argparse.Namespace, out: Path, seed: int = 0
) -> dict[float, dict]:
    cmd = [
        sys.executable, "-m", "ttft.tui.cli", "bench", "-m", f"compat:{model}", "--base-url", base_url,
        "--concurrency", ",".join(map(str, levels)), "--requests", str(a.requests), "--warmup", str(a.warmup),
        "--input-tokens", str(a.input_tokens), "--max-output-tokens", str(a.output_tokens), "--out", str(out),
        "--quiet", "--seed", str(seed), *workload_flags(a, "ttft"),
    ]  # fmt: skip
    subprocess.run(cmd, check=False, cwd=ROOT, stdout=subprocess.DEVNULL)
    summary = json.loads((out / "summary.json").read_text())
    return {float(d["level"]): d for d in summary["details"]}


def run_aiperf(
    aiperf: Path, url: str, model: str, c: int, tokenizer: Path, a: argparse.Namespace, out: Path, seed: int = 0
) -> dict[str, Any] | None:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    cmd = [
        str(aiperf), "profile", "-m", model, "--url", url, "--endpoint-type", "chat", "--streaming",
        "--tokenizer", str(tokenizer), "--concurrency", str(c), "--request-count", str(a.requests),
        "--warmup-request-count", str(a.warmup), "--prompt-input-tokens-mean", str(a.input_tokens),
        "--prompt-input-tokens-stddev", "0", "--prompt-output-tokens-mean", str(a.output_tokens),
        "--prompt-output-tokens-stddev", "0", "--extra-inputs", f"max_tokens:{a.output_tokens}",
        "--use-server-token-count", "--artifact-dir", str(out), "--ui-type", "simple", "--random-seed", str(seed),
        # one conversation per request, drawn without replacement: with fewer, AIPerf repeats prompts (and
        # restarts the warm-up's conversations) and llama-server answers the repeats from its prompt cache (a
        # TTFT ttft's unique prompts never get); a multi-turn run uses a third of them
        "--conversation-num", str(a.requests + a.warmup), "--dataset-sampling-strategy", "shuffle",
        *workload_flags(a, "aiperf"),
    ]  # fmt: skip
    log = out.with_suffix(".log")
    out.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as f:
        subprocess.run(cmd, check=False, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=a.aiperf_timeout)
    found = sorted(out.rglob("profile_export_aiperf.json"))
    if not found:
        print(f"  AIPerf c={c}: no results (see {log})", flush=True)
        return None
    return json.loads(found[-1].read_text())


def workload_flags(a: argparse.Namespace, tool: str) -> list[str]:
    """The same workload in each tool's words (see the module doc for what still differs)."""
    if a.workload == "turns":
        if tool == "ttft":
            return ["--turns", str(a.turns)]
        return ["--conversation-turn-mean", str(a.turns), "--conversation-turn-stddev", "0"]
    if a.workload == "prefix":
        if tool == "ttft":
            return ["--prefix-tokens", str(a.prefix_tokens), "--prefixes", str(a.prefixes)]
        return ["--prefix-prompt-length", str(a.prefix_tokens), "--prefix-prompt-pool-size", str(a.prefixes)]
    return []


Run = dict[str, Any]  # one tool run's figures: ttft, tpot, tput, cpu, lag, and the server's own (srv_*)


def _settled(log: Path | None, start: int, a: argparse.Namespace) -> int:
    return llama_log.settle(log, start, a.requests + a.warmup) if log else 0


def _server_figures(run: Run, log: Path | None, start: int, end: int, a: argparse.Namespace) -> None:
    """The server's own figures over the log slice this run wrote (warm-up requests dropped)."""
    if log is None:
        return
    tasks = llama_log.parse(llama_log.read_slice(log, start, end))
    # a prompt mostly taken from the server's cache has a TTFT of another kind: counted, to be seen
    srv = llama_log.summarise(tasks, skip=a.warmup, fresh_prompt_n=a.input_tokens / 2)
    run.update(srv_tasks=srv.tasks, srv_tpot=srv.tpot_p50_ms, srv_prompt=srv.prompt_p50_ms)
    run.update(srv_tput=srv.tokens_per_s, srv_cache_hits=srv.cache_hits)
    run.update(srv_reused=srv.reused, srv_reused_tokens=list(srv.reused_tokens))
    norm = normalised_run(tasks, run.get("sent") or [], a.warmup)
    if norm is not None:
        run.update(norm_ratio=norm.ratio_p50, norm_rest=norm.rest_p50_ms, norm_rest_max=norm.rest_max_ms)
        run.update(norm_n=norm.requests, norm_waited=norm.waited, norm_wait_max=norm.wait_max_ms)


def normalised_run(tasks: list[llama_log.Task], sent: list[llama_log.Sent], warmup: int) -> llama_log.Normalised | None:
    """One run's requests joined with the server's tasks (by their timings, or in order once the warm-up
    tasks, the first by id, are dropped) and normalised per request; None when they do not join."""
    if not sent:
        return None
    measured = sorted(tasks, key=lambda t: t.task)
    if len(measured) == len(sent) + warmup:
        measured = measured[warmup:]
    pairs = llama_log.join(measured, sent)
    if not pairs:
        return None
    return llama_log.summarise_requests(llama_log.normalise(pairs))


def _records_server(out: Path) -> tuple[float | None, float | None]:
    """llama-server's own TPOT and prompt time p50 as ttft's records carry them (measured requests only):
    the same figures the log gives, if the log was read right."""
    tpots, prompts = [], []
    for line in (out / "turns.jsonl").read_text().splitlines():
        rec = json.loads(line)
        srv = (rec.get("server") or {}).get("llama-server")
        if not srv or ((rec.get("extra") or {}).get("bench") or {}).get("warmup"):
            continue
        if srv.get("predicted_n", 0) > 1:
            tpots.append(srv["predicted_ms"] / (srv["predicted_n"] - 1))
        prompts.append(srv["prompt_ms"])
    return (
        statistics.median(tpots) if tpots else None,
        statistics.median(prompts) if prompts else None,
    )


def ttft_sent(out: Path) -> tuple[list[llama_log.Sent], list[int]]:
    """ttft's measured requests as sent (send time, TTFT, and llama-server's prompt timings to join by),
    and the ``cache_n`` its records carry (llama-server's own ``timings``)."""
    sent, cache_n = [], []
    for line in (out / "turns.jsonl").read_text().splitlines():
        rec = json.loads(line)
        bench = (rec.get("extra") or {}).get("bench") or {}
        ttft = (rec.get("metrics") or {}).get("ttft_ms")
        if bench.get("warmup") or bench.get("sent_at_ms") is None or ttft is None:
            continue
        srv = (rec.get("server") or {}).get("llama-server") or {}
        sent.append(llama_log.Sent(bench["sent_at_ms"] / 1000, ttft, srv.get("prompt_ms"), srv.get("prompt_n")))
        if isinstance(srv.get("cache_n"), int):
            cache_n.append(srv["cache_n"])
    return sent, cache_n


def aiperf_sent(out: Path) -> list[llama_log.Sent]:
    """AIPerf's measured requests as sent, from its per-request ``profile_export.jsonl`` (its
    ``request_start_ns`` and ``time_to_first_token``; warm-up and failed requests left out)."""
    found = sorted(out.rglob("profile_export.jsonl"))
    sent = []
    for line in found[-1].read_text().splitlines() if found else []:
        rec = json.loads(line)
        meta, metrics = rec.get("metadata") or {}, rec.get("metrics") or {}
        ttft = (metrics.get("time_to_first_token") or {}).get("value")
        if rec.get("error") or meta.get("benchmark_phase") == "warmup" or ttft is None:
            continue
        if meta.get("request_start_ns") is not None:
            sent.append(llama_log.Sent(meta["request_start_ns"] / 1e9, float(ttft)))
    return sent


def _ttft_run(base_url: str, model: str, c: int, a: argparse.Namespace, out: Path, seed: int) -> Run:
    d = run_ttft(base_url, model, [c], a, out, seed)[float(c)]
    rec_tpot, rec_prompt = _records_server(out)
    sent, rec_cache_n = ttft_sent(out)
    return {
        "ttft": d["ttft_ms"]["p50"],
        "tpot": d["tpot_ms"]["p50"],
        "tput": d["output_throughput"],
        "lag": ((d.get("client") or {}).get("loop_lag_ms") or {}).get("p99"),
        "rec_tpot": rec_tpot,
        "rec_prompt": rec_prompt,
        "rec_cache_n": rec_cache_n,
        "sent": sent,
    }


def _aiperf_run(url: str, model: str, c: int, tok: Path, a: argparse.Namespace, out: Path, seed: int) -> Run | None:
    p = run_aiperf(a.aiperf, url, model, c, tok, a, out, seed)
    if p is None:
        return None
    return {
        "ttft": _pick(p, "time_to_first_token"),
        "tpot": _pick(p, "inter_token_latency"),
        "tput": (p.get("output_token_throughput") or {}).get("avg"),
        "sent": aiperf_sent(out),
    }


def interleaved(
    url: str,
    base_url: str,
    model: str,
    levels: list[int],
    a: argparse.Namespace,
    tokenizer: Path | None,
    out: Path,
    log: Path | None = None,
) -> dict[int, dict[str, list[Run]]]:
    """Level by level, ``a.rounds`` rounds of one run per tool: ttft first in odd rounds, AIPerf first in
    even ones, so a server that drifts one way over a level favours neither tool. With ``log`` (the
    server's log) each run also carries the server's own figures for the requests it sent."""
    chunks = (a.requests + a.warmup) * a.output_tokens  # one token per chunk; warm-up requests stream too
    runs: dict[int, dict[str, list[Run]]] = {}
    for c in levels:
        runs[c] = {"ttft": [], "aiperf": []}
        for r in range(1, a.rounds + 1):
            order = ["ttft", "aiperf"] if r % 2 else ["aiperf", "ttft"]
            for tool in order:
                if tool == "aiperf" and tokenizer is None:
                    continue
                at = llama_log.size(log) if log else 0
                t0 = child_cpu_s()
                name = f"{tool}-{c}-r{r}"
                # prompts of their own in every run: a repeated one would come from llama-server's prompt cache
                seed = 1000 * r + c
                if tool == "ttft":
                    run: Run | None = _ttft_run(base_url, model, c, a, out / name, seed)
                else:
                    run = _aiperf_run(url, model, c, tokenizer, a, out / name, seed)  # type: ignore[arg-type]
                cpu = child_cpu_s() - t0
                end = _settled(log, at, a)
                if run is None:
                    continue
                run.update(round=r, first=tool == order[0], cpu=cpu / chunks * 1000)
                _server_figures(run, log, at, end, a)
                runs[c][tool].append(run)
            print(f"  c={c} round {r} done (load average {os.getloadavg()[0]:.2f})", flush=True)
    return runs


def _pick(d: dict[str, Any], key: str) -> float | None:
    m = d.get(key)
    if isinstance(m, dict):
        return m.get("p50") if m.get("p50") is not None else m.get("avg")
    for rec in d.get("records", []) if isinstance(d.get("records"), list) else []:
        if rec.get("tag") == key:
            return rec.get("p50") or rec.get("avg")
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _med(xs: list[float | None]) -> tuple[float, float, float] | None:
    got = [x for x in xs if x is not None]
    return (statistics.median(got), min(got), max(got)) if got else None


def _cell(m: tuple[float, float, float] | None, digits: int) -> str:
    if m is None:
        return f"{'-':>24}"
    return f"{m[0]:9.{digits}f} [{m[1]:.{digits}f}-{m[2]:.{digits}f}]".rjust(24)


def _rs(x: float | None) -> str:
    return f"{x:6.3f}" if x is not None else "     -"


FIGURES = (("ttft", "TTFT p50 ms", 1), ("tpot", "TPOT p50 ms", 2), ("tput", "output tok/s", 1))


def _tally(name: str, devs: list[float]) -> None:
    if devs:
        within = sum(d <= 0.05 for d in devs)
        print(f"{name}: {within}/{len(devs)} figures within 5% (worst {max(devs):.1%})")


def compare(name: str, runs: dict[int, dict[str, list[Run]]]) -> list[float]:
    """Per level and figure, each tool's median over the rounds with its min-max, and the ratio of medians."""
    n = max((len(v["ttft"]) for v in runs.values()), default=0)
    print(f"\n== {name}: median of {n} round(s) [min-max] ==")
    print(f"{'c':>3} | {'figure':<16} | {'ttft':>24} | {'AIPerf':>24} | ratio")
    devs = []
    for c, by in runs.items():
        for key, label, digits in (*FIGURES, ("cpu", "CPU s/1k chunks", 2)):
            o, p = _med([r[key] for r in by["ttft"]]), _med([r[key] for r in by["aiperf"]])
            ratio = _ratio(o and o[0], p and p[0])
            print(f"{c:>3} | {label:<16} | {_cell(o, digits)} | {_cell(p, digits)} | {_rs(ratio)}")
            if ratio is not None and key != "cpu":
                devs.append(abs(ratio - 1))
        print(f"{c:>3} | {'ttft lag p99 ms':<16} | {_cell(_med([r['lag'] for r in by['ttft']]), 1)} |")
    _tally("raw medians", devs)
    return devs


NORMALISED = (
    ("tpot", "srv_tpot", "TPOT / server TPOT"),
    ("tput", "srv_tput", "tok/s / server tok/s"),
)
PER_REQUEST = "TTFT/(wait+prompt)"  # each request's, its median over the run (llama_log.normalise)


def compare_to_server(name: str, runs: dict[int, dict[str, list[Run]]]) -> list[float]:
    """Each tool run against the server's own figures for that same run, then ttft/AIPerf of those.

    A server that is slower during one tool's run slows what that tool sees and what the server
    logs alike, so the normalised figures cancel the drift between runs that raw ratios measure."""
    print(f"\n== {name}: each run / the server's own figure for that run (from its log) ==")
    print(f"{'c':>3} {'rnd':>3} {'1st':>6} | {'figure':<20} | {'ttft':>7} {'AIPerf':>7} | {'ttft/AIPerf':>11}")
    devs = []
    for c, by in runs.items():
        per_round = {r["round"]: r for r in by["aiperf"]}
        pairs = [(o, per_round.get(o["round"])) for o in by["ttft"]]
        for key, srv_key, label in NORMALISED:
            ratios = []
            for o, p in pairs:
                no = _ratio(o[key], o.get(srv_key))
                np_ = _ratio(p[key], p.get(srv_key)) if p else None
                ratios.append(_ratio(no, np_))
                first = "ttft" if o["first"] else "AIPerf"
                print(
                    f"{c:>3} {o['round']:>3} {first:>6} | {label:<20} | {_rs(no):>7} {_rs(np_):>7} | "
                    f"{_rs(ratios[-1]):>11}"
                )
            m = _med(ratios)
            if m:
                print(f"{c:>3} {'med':>3} {'':>6} | {label:<20} | {'':>15} | {_rs(m[0]):>11} [{m[1]:.3f}-{m[2]:.3f}]")
                devs.append(abs(m[0] - 1))
        devs += per_request_rows(c, pairs)
        for tool, label in (("ttft", "ttft"), ("aiperf", "AIPerf")):
            rs = by[tool]
            srv_tpot, srv_prompt = _med([r.get("srv_tpot") for r in rs]), _med([r.get("srv_prompt") for r in rs])
            tasks = [r.get("srv_tasks") for r in rs]
            hits = sum(r.get("srv_cache_hits") or 0 for r in rs)
            reused = sum(r.get("srv_reused") or 0 for r in rs)
            tokens = [n for r in rs for n in r.get("srv_reused_tokens") or []]
            reuse = f"{reused} of {sum(t or 0 for t in tasks)}"
            if tokens:
                reuse += f" ({min(tokens)}-{max(tokens)} tokens, median {statistics.median(tokens):g})"
            line = (
                f"    c={c} {label:<6} server TPOT {_cell(srv_tpot, 2).strip()} ms, "
                f"prompt {_cell(srv_prompt, 1).strip()} ms, tasks per run {tasks}, prompt from the slot's cache "
                f"(cache_n > 0) {reuse}, prompt mostly cached {hits}"
            )
            if tool == "ttft":  # ttft's records carry the server's timings per request: the same figures?
                rt = _med([_ratio(r.get("rec_tpot"), r.get("srv_tpot")) for r in rs])
                rp = _med([_ratio(r.get("rec_prompt"), r.get("srv_prompt")) for r in rs])
                line += f"; ttft's records / log: TPOT {_rs(rt and rt[0]).strip()}, prompt {_rs(rp and rp[0]).strip()}"
                rec_reused = sum(1 for r in rs for n in r.get("rec_cache_n") or [] if n)
                line += f", cache_n > 0 on {rec_reused} records"
            print(line)
    _tally("normalised to the server's own figures", devs)
    return devs


def per_request_rows(c: int, pairs: list[tuple[Run, Run | None]]) -> list[float]:
    """TTFT normalised per request, each round: each tool's median of TTFT / (the server's wait + its
    prompt eval) and ttft/AIPerf of those; then the ratio's median and range over the rounds. And what
    the server's account leaves of ttft's TTFT (HTTP, tokenizing, the reader): p50 and most, in ms."""
    ratios = []
    for o, p in pairs:
        no, np_ = o.get("norm_ratio"), p.get("norm_ratio") if p else None
        ratios.append(_ratio(no, np_))
        first = "ttft" if o["first"] else "AIPerf"
        waited = f"waited {o.get('norm_waited', '-')}/{o.get('norm_n', '-')}"
        if p:
            waited += f", {p.get('norm_waited', '-')}/{p.get('norm_n', '-')}"
        print(f"{c:>3} {o['round']:>3} {first:>6} | {PER_REQUEST:<20} | {_rs(no):>7} {_rs(np_):>7} | "
              f"{_rs(ratios[-1]):>11}   {waited}")  # fmt: skip
    m = _med(ratios)
    if m:
        print(f"{c:>3} {'med':>3} {'':>6} | {PER_REQUEST:<20} | {'':>15} | {_rs(m[0]):>11} [{m[1]:.3f}-{m[2]:.3f}]")
    for tool, rs in (("ttft", [o for o, _ in pairs]), ("AIPerf", [p for _, p in pairs if p])):
        rest, most = _med([r.get("norm_rest") for r in rs]), _med([r.get("norm_rest_max") for r in rs])
        if rest:
            print(f"    c={c} {tool:<6} TTFT - wait - prompt eval: p50 {rest[1]:.1f}-{rest[2]:.1f} ms over the rounds, "
                  f"at most {most[2] if most else float('nan'):.1f} ms")  # fmt: skip
    return [abs(m[0] - 1)] if m else []


def compare_to_truth(runs: dict[int, dict[str, list[Run]]], output_tokens: int) -> None:
    """The fake's schedule is known: each tool's median TTFT, TPOT and tokens/s over the rounds against it.

    Its tokens/s is the closed loop's with no gap between one request and the next, c * N / (TTFT +
    (N - 1) * TPOT): a tool that takes longer to send the next request reads a little under it."""
    print(
        "\neach tool's median / the fake's schedule (TTFT 20 ms, TPOT 10 * (1 + 0.25 * (c - 1)) ms, "
        f"{output_tokens} tokens)"
    )
    print(
        f"{'c':>3} | {'TTFT ttft':>9} {'AIPerf':>7} | {'TPOT ttft':>9} {'AIPerf':>7} | {'tok/s ttft':>10} {'AIPerf':>7}"
    )
    for c, by in runs.items():
        tpot = 10 * (1 + 0.25 * (c - 1))
        truth = {"ttft": 20.0, "tpot": tpot, "tput": c * output_tokens / (20.0 + (output_tokens - 1) * tpot) * 1000}
        cells = []
        for key in ("ttft", "tpot", "tput"):
            for tool in ("ttft", "aiperf"):
                m = _med([r[key] for r in by[tool]])
                cells.append(_rs(m and m[0] / truth[key]).rjust((10 if key == "tput" else 9) if tool == "ttft" else 7))
        print(f"{c:>3} | {cells[0]} {cells[1]} | {cells[2]} {cells[3]} | {cells[4]} {cells[5]}")


def max_streams(a: argparse.Namespace, tmp: Path) -> None:
    """Ramp concurrent streams against an unlimited fake server; report the largest with lag p99 < 5 ms."""
    port = free_port()
    srv = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.batching_server", "--port", str(port), "--slots", "100000",
         "--token-ms", "20", "--alpha", "0", "--prefill-ms", "20"],
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/health")
        levels = [int(x) for x in a.stream_levels.split(",")]
        print(f"\n== streams one ttft process holds (fake server, 20 ms/token, {a.stream_tokens} tokens) ==")
        best = 0
        misses = 0
        for c in levels:
            out = tmp / f"streams-{c}"
            cmd = [
                sys.executable, "-m", "ttft.tui.cli", "bench", "-m", "compat:fake", "--base-url",
                f"http://127.0.0.1:{port}/v1", "--concurrency", str(c), "--requests", str(2 * c), "--warmup", "4",
                "--input-tokens", "16", "--max-output-tokens", str(a.stream_tokens), "--out", str(out), "--quiet",
            ]  # fmt: skip
            subprocess.run(cmd, check=False, cwd=ROOT, stdout=subprocess.DEVNULL)
            d = json.loads((out / "summary.json").read_text())["details"][0]
            cl = d["client"]
            lag = cl["loop_lag_ms"]["p99"]
            print(
                f"c={c:>4}: loop lag p99 {lag:6.2f} ms, client CPU {cl['cpu_percent']:5.1f}%, machine "
                f"{cl.get('host_cpu_percent') or 0:5.1f}%, TPOT p50 {d['tpot_ms']['p50']:.2f} ms (truth 20), "
                f"{d['output_throughput']:.0f} tok/s, errors {d['failed']}",
                flush=True,
            )
            if lag < 5.0 and d["failed"] == 0:
                best = c
                misses = 0
            else:
                misses += 1
                if misses == 2:
                    break
        print(f"most concurrent streams with loop lag p99 < 5 ms: {best}")
    finally:
        srv.terminate()
        srv.wait(5)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--aiperf", type=Path, default=Path(os.environ.get("AIPERF", "/tmp/aiperf-venv/bin/aiperf")))
    p.add_argument("--levels", default="1,2,4,8")
    p.add_argument(
        "--rounds", type=int, default=1, help="runs per tool per level, the order alternated; medians reported"
    )
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--input-tokens", type=int, default=64)
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--slots", type=int, default=4, help="llama-server slots")
    p.add_argument("--skip-fake", action="store_true")
    p.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pin llama-server and the load tools to separate cores, so a tool's own CPU use cannot slow the server",
    )
    p.add_argument("--skip-llama", action="store_true")
    p.add_argument("--skip-streams", action="store_true")
    p.add_argument("--stream-levels", default="8,16,32,64,128,256,512")
    p.add_argument("--stream-tokens", type=int, default=32)
    p.add_argument("--aiperf-timeout", type=float, default=300)
    p.add_argument("--workload", choices=("plain", "turns", "prefix"), default="plain")
    p.add_argument("--turns", type=int, default=3, help="--workload turns: turns per conversation")
    p.add_argument("--prefix-tokens", type=int, default=256, help="--workload prefix: tokens per shared prefix")
    p.add_argument("--prefixes", type=int, default=2, help="--workload prefix: shared prefixes")
    a = p.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="ttft-vs-peer-"))
    os.environ.setdefault("TTFT_DATA_DIR", str(tmp / "data"))
    have_aiperf = a.aiperf.exists()
    tokenizer = build_tokenizer(a.aiperf, tmp / "tokenizer") if have_aiperf else None
    if not have_aiperf:
        print(f"AIPerf not found at {a.aiperf}: ttft figures only")
    print(f"results under {tmp}")

    cpus = sorted(os.sched_getaffinity(0))
    split = a.pin and len(cpus) >= 2
    server_cpus, tool_cpus = (cpus[: len(cpus) // 2], cpus[len(cpus) // 2 :]) if split else (cpus, cpus)
    if not a.skip_fake:
        port = free_port()
        srv = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.batching_server", "--port", str(port), "--slots", "8",
             "--token-ms", "10", "--alpha", "0.25", "--prefill-ms", "20"],
            cwd=ROOT, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        os.sched_setaffinity(srv.pid, server_cpus)
        os.sched_setaffinity(0, tool_cpus)  # both tools are children of this process: they inherit it
        if split:
            print(f"fake server pinned to CPUs {server_cpus}, clients to {tool_cpus}")
        try:
            wait_http(f"http://127.0.0.1:{port}/health")
            url = f"http://127.0.0.1:{port}"
            runs = interleaved(url, url + "/v1", "batching-fake", levels, a, tokenizer, tmp / "fake")
            print("\nsimulated truth (token_ms 10, alpha 0.25): TPOT = 10 * (1 + 0.25 * (c - 1)) ms; TTFT 20 ms")
            compare("simulated batching server (8 slots)", runs)
            compare_to_truth(runs, a.output_tokens)
        finally:
            srv.terminate()
            srv.wait(5)
            os.sched_setaffinity(0, cpus)

    if not a.skip_llama:
        from ttft.backends.local.llama_server import LlamaServer, LlamaServerError, default_model

        try:
            threads = max(1, len(cpus) // 2) if split else None
            server = LlamaServer(default_model(), slots=a.slots, threads=threads, extra_args=["--ignore-eos"])
            server.log_path = tmp / "llama-server.log"
            if split:  # the server gets the first half of the cores, both tools the other half
                os.sched_setaffinity(0, cpus[: len(cpus) // 2])
            server.start()
            if split:
                os.sched_setaffinity(0, cpus[len(cpus) // 2 :])
                print(f"\nllama-server pinned to CPUs {cpus[: len(cpus) // 2]}, clients to {cpus[len(cpus) // 2 :]}")
        except LlamaServerError as exc:
            print(f"\nllama-server: {exc}")
        else:
            try:
                runs = interleaved(
                    server.url, server.base_url, server.model_name, levels, a, tokenizer, tmp / "llama", server.log_path
                )
                name = f"llama-server, {server.model.name}, {a.slots} slots"
                compare(name, runs)
                compare_to_server(name, runs)
            finally:
                server.stop()
                os.sched_setaffinity(0, cpus)

    if not a.skip_streams:
        max_streams(a, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
