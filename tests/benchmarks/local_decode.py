"""Local provider: decode speed against bare llama-cpp-python, the cost of a verify batch, prompt lookup on vs off.

    python tests/benchmarks/local_decode.py [--runs 5] [--edit-tokens 200] [--threads 1] [--skip-bare]

One process, the default model (SmolLM2 135M Instruct Q4_1), greedy decoding, the same
prompts and settings everywhere; the variants' trials are interleaved (the order rotates
each run) so background load hits them alike, and medians are printed.

1. Decode tokens/s of ttft's ``local`` backend (client side: stamped in the worker as
   each token came out, through the asyncio hand-off) against two bare llama-cpp-python
   loops on a second ``Llama`` with the same parameters: ``create_chat_completion(stream=True)``
   and the raw ``Llama.generate`` token loop. Target: ttft / bare >= 0.97.
2. The physics of speculation: llama.cpp's decode time for a batch of k tokens (all logits,
   as a verify batch needs) against one token, over the same cached context, for one-token
   steps on the load's threads and batches on ``--verify-threads`` and on the load's threads.
   A draft of k-1 tokens pays only if a step keeps more tokens than the batch costs.
3. Prompt lookup on vs off on code-edit prompts whose answers repeat their input, and on
   one that does not: speedup of the decode rate (same prompt, speculation off, same
   threads; and against the best plain run at any thread count), acceptance, tokens per
   decode step, and whether the text is identical. Every trial starts from an empty KV
   cache (greedy output may depend on what the cache held).
4. A replay of the plain answers through the drafter with other draft lengths and match
   sizes: the answer is the same with speculation on or off, so the tokens per step follow
   from it, and with section 2's costs the speedup each setting would get.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.backends.base import ChatRequest, Message  # noqa: E402
from ttft.backends.local.engine import create  # noqa: E402
from ttft.backends.local.speculative import SPEC_MIN_MATCH, SPEC_NUM_PRED, PromptLookup  # noqa: E402
from ttft.telemetry import events as ev  # noqa: E402
from ttft.telemetry.metrics import speculative_summary  # noqa: E402
from ttft.telemetry.settings import TurnSettings  # noqa: E402

DECODE_PROMPT = "Write a long story about a lighthouse keeper and a storm."
ORDERS = """def summarize_orders(orders, tax_rate, discount_codes):
    result = {"count": 0, "subtotal": 0.0, "tax": 0.0, "total": 0.0}
    for order in orders:
        if order.status == "cancelled":
            continue
        result["count"] += 1
        line_total = 0.0
        for line in order.lines:
            price = line.unit_price * line.quantity
            if line.sku in discount_codes:
                price = price * (1 - discount_codes[line.sku])
            line_total += price
        result["subtotal"] += line_total
        result["tax"] += line_total * tax_rate
    result["total"] = result["subtotal"] + result["tax"]
    if result["count"] == 0:
        return None
    return result
"""
CONFIG = """def parse_config(path):
    settings = {}
    with open(path) as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            if "=" not in text:
                raise ValueError(f"line {number}: expected key = value")
            key, value = text.split("=", 1)
            key = key.strip().lower()
            value = value.strip()
            if value.isdigit():
                value = int(value)
            elif value.lower() in ("true", "false"):
                value = value.lower() == "true"
            settings[key] = value
    return settings
"""
CODE_ONLY = "You are a code editor. Reply with only the complete updated code in one Python code block, nothing else."
# name -> (system prompt or None, user prompt)
EDIT_PROMPTS: dict[str, tuple[str | None, str]] = {
    "rename, show the whole function": (
        None,
        "Rename the variable result to totals in this Python function and show the whole function:\n\n" + ORDERS,
    ),
    "type hints, code-only system": (CODE_ONLY, "Add type hints to this function:\n\n" + CONFIG),
    "no repetition (a story)": (None, DECODE_PROMPT),
}


def decode_rate(first_ns: int, last_ns: int, tokens: int) -> float | None:
    if tokens < 2 or last_ns <= first_ns:
        return None
    return (tokens - 1) / ((last_ns - first_ns) / 1e9)


def clear_cache(backend: Any) -> None:
    """Empty the KV cache on the engine thread, so every trial starts from the same state."""

    def clear(lm: Any) -> None:
        if lm is not None:
            lm.llm.kv_clear()
            lm.kv_tokens = []

    backend._executor.submit(lambda: clear(backend.loaded)).result()


async def ttft_run(
    backend: Any, prompt: str, n: int, spec: dict | None, system: str | None = None, fresh: bool = False
) -> dict[str, Any]:
    if fresh:
        clear_cache(backend)
    settings = TurnSettings(max_output_tokens=n, temperature=0, speculative=spec)
    msgs = ((Message("system", system),) if system else ()) + (Message("user", prompt),)
    t0 = time.monotonic_ns()
    events = [e async for e in backend.stream(ChatRequest(msgs, settings))]
    if not isinstance(events[-1], ev.Finished):
        raise RuntimeError(f"turn failed: {events[-1]}")
    deltas = [e for e in events if isinstance(e, ev.TextDelta | ev.ReasoningDelta)]
    tokens = next(e for e in events if isinstance(e, ev.Usage)).output or 0
    sent = next(e.t_ns for e in events if isinstance(e, ev.AttemptSent))
    timings = next(e.data for e in events if isinstance(e, ev.ServerTimings))
    n_prompt = next(e for e in events if isinstance(e, ev.Usage)).input or 0
    kv = list(backend.loaded.kv_tokens)  # prompt + answer as decoded (read between turns: the engine is idle)
    return {
        "prompt_tokens": kv[:n_prompt],
        "answer_tokens": kv[n_prompt:],
        "text": "".join(d.text for d in deltas),
        "tokens": tokens,
        "decode_tps": decode_rate(deltas[0].t_ns, deltas[-1].t_ns, tokens),
        "e2e_tps": tokens / ((deltas[-1].t_ns - t0) / 1e9),
        "engine_decode_tps": timings["decode_tokens_per_s"],
        "e2e_ms": (deltas[-1].t_ns - sent) / 1e6,
        "spec": timings["speculative"],
        "draft": speculative_summary({"llama.cpp": timings}),
        "progress": sum(isinstance(e, ev.DraftProgress) for e in events),
    }


def bare_chat_run(llm: Any, prompt: str, n: int, tokens: int) -> dict[str, Any]:
    """What a user of llama-cpp-python writes: create_chat_completion(stream=True), timed per chunk."""
    stamps, text = [], []
    t0 = time.monotonic_ns()
    for chunk in llm.create_chat_completion(
        [{"role": "user", "content": prompt}], stream=True, temperature=0, max_tokens=n, repeat_penalty=1.0
    ):
        piece = chunk["choices"][0]["delta"].get("content")
        if piece:
            stamps.append(time.monotonic_ns())
            text.append(piece)
    return {
        "text": "".join(text),
        "decode_tps": decode_rate(stamps[0], stamps[-1], tokens),
        "e2e_tps": tokens / ((stamps[-1] - t0) / 1e9),
    }


def bare_generate_run(llm: Any, prompt_tokens: list[int], n: int) -> dict[str, Any]:
    """The engine's ceiling from Python: Llama.generate, one token a step, detokenized as it goes."""
    import llama_cpp

    stamps = []
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    t0 = time.monotonic_ns()
    for tok in llm.generate(prompt_tokens, temp=0.0, repeat_penalty=1.0, reset=True):
        if llama_cpp.llama_vocab_is_eog(vocab, tok):
            break
        llm.detokenize([tok])
        stamps.append(time.monotonic_ns())
        if len(stamps) == n:
            break
    return {
        "tokens": len(stamps),
        "decode_tps": decode_rate(stamps[0], stamps[-1], len(stamps)),
        "e2e_tps": len(stamps) / ((stamps[-1] - t0) / 1e9),
    }


def med(xs: list[float | None]) -> float:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else float("nan")


async def bare_comparison(backend: Any, info: dict[str, Any], args: argparse.Namespace) -> None:
    from llama_cpp import Llama
    from ttft.backends.local.llama_adapter import model_params

    with model_params(use_extra_bufts=info["extra_bufts"]):  # the same weight buffers (AMX CPUs: off, or it crashes)
        bare = Llama(
            info["model_path"],
            n_ctx=info["n_ctx"],
            n_gpu_layers=info["n_gpu_layers"],
            n_threads=info["n_threads"],
            n_threads_batch=info["n_threads_batch"],
            flash_attn=info["flash_attn"],
            verbose=False,
        )
    fp = backend.loaded.template.format((Message("user", DECODE_PROMPT),))
    prompt_tokens = bare.tokenize(fp.text.encode(), add_bos=fp.add_bos, special=True)
    await ttft_run(backend, DECODE_PROMPT, 8, None)  # warm both
    bare_generate_run(bare, prompt_tokens, 8)
    rows: dict[str, list[dict[str, Any]]] = {"ttft": [], "bare_chat": [], "bare_generate": []}
    same_text = True
    for i in range(args.runs):
        # rotate the order each run so a slow moment or a cold cache does not always hit the same variant
        order = ["ttft", "bare_chat", "bare_generate"]
        order = order[i % 3 :] + order[: i % 3]
        got: dict[str, dict[str, Any]] = {}
        for name in order:
            if name == "ttft":
                got[name] = await ttft_run(backend, DECODE_PROMPT, args.tokens, None)
            elif name == "bare_chat":
                got[name] = bare_chat_run(bare, DECODE_PROMPT, args.tokens, args.tokens)
            else:
                got[name] = bare_generate_run(bare, prompt_tokens, args.tokens)
        got["bare_chat"]["e2e_tps"] *= got["ttft"]["tokens"] / args.tokens  # same text: same token count
        got["bare_chat"]["decode_tps"] = got["bare_chat"]["decode_tps"] and got["bare_chat"]["decode_tps"] * (
            (got["ttft"]["tokens"] - 1) / (args.tokens - 1)
        )
        same_text &= got["ttft"]["text"] == got["bare_chat"]["text"]
        for name in order:
            rows[name].append(got[name])
    bare.close()
    d = {k: med([r["decode_tps"] for r in v]) for k, v in rows.items()}
    e = {k: med([r["e2e_tps"] for r in v]) for k, v in rows.items()}
    print(f"\n1. decode speed, median of {args.runs} runs, {args.tokens} tokens, greedy (tokens/s)")
    print(f"   {'':40} {'decode':>8} {'E2E':>8}")
    print(f"   {'ttft local backend (client side)':40} {d['ttft']:8.2f} {e['ttft']:8.2f}")
    print(f"   {'ttft local backend (engine reported)':40} {med([r['engine_decode_tps'] for r in rows['ttft']]):8.2f}")
    print(f"   {'bare create_chat_completion(stream=True)':40} {d['bare_chat']:8.2f} {e['bare_chat']:8.2f}")
    print(f"   {'bare Llama.generate loop':40} {d['bare_generate']:8.2f} {e['bare_generate']:8.2f}")
    ratio_chat = f"{d['ttft'] / d['bare_chat']:8.3f} {e['ttft'] / e['bare_chat']:8.3f}"
    print(f"   {'ratio ttft / bare chat stream':40} {ratio_chat}")
    print(
        f"   {'ratio ttft / bare generate loop':40} {d['ttft'] / d['bare_generate']:8.3f} "
        f"{e['ttft'] / e['bare_generate']:8.3f}   (target >= 0.97)"
    )
    print(f"   same text as llama-cpp-python: {same_text}. 'decode' = (tokens-1)/(last-first chunk); the chat")
    print("   stream holds text back while it could be a stop string, so its first chunk is late and its")
    print("   'decode' reads high; 'E2E' = tokens/(last chunk - call) has no such bias.")


BATCH_SIZES = tuple(range(1, 10))  # a verify batch of 1 + up to 8 drafted tokens


def batch_costs(lm: Any, thread_sets: dict[str, int], context: int, reps: int) -> dict[str, dict[int, list[float]]]:
    """Wall time of one decode of k tokens (all logits) over the same cached ``context`` tokens (engine thread)."""
    llm, info = lm.llm, lm.info
    text = "".join(p.read_text() for p in sorted((ROOT / "backends" / "local").glob("*.py")))
    toks = llm.tokenize(text.encode(), add_bos=True, special=False)[: context + max(BATCH_SIZES)]
    llm.kv_clear()
    lm.kv_tokens = []
    for i in range(0, context, llm.n_batch):
        llm.decode(toks[i : min(i + llm.n_batch, context)], i, False)
    out: dict[str, dict[int, list[float]]] = {name: {k: [] for k in BATCH_SIZES} for name in thread_sets}
    try:
        for _ in range(reps):
            for name, batch_threads in thread_sets.items():  # interleaved: load hits every size alike
                llm.set_threads(info["n_threads"], batch_threads)
                for k in BATCH_SIZES:
                    t0 = time.perf_counter()
                    llm.decode(toks[context : context + k], context, k > 1)
                    llm.synchronize()
                    out[name][k].append(time.perf_counter() - t0)
                    llm.kv_keep(context)
    finally:
        llm.set_threads(info["n_threads"], info["n_threads_batch"])
        llm.kv_clear()
        lm.kv_tokens = []
    return out


def print_batch_costs(costs: dict[str, dict[int, list[float]]], context: int, reps: int) -> None:
    print(f"\n2. decode time of a batch of k tokens vs one token, {context} tokens cached, median of {reps} (min)")
    for name, by_k in costs.items():
        one, one_min = statistics.median(by_k[1]), min(by_k[1])
        print(f"   {name}: one token {one * 1000:.1f} ms (min {one_min * 1000:.1f})")
        for k in BATCH_SIZES[1:]:
            m, n = statistics.median(by_k[k]), min(by_k[k])
            print(
                f"     k={k}: {m * 1000:6.1f} ms = {m / one:4.2f}x one step ({n / one_min:4.2f}x by min), "
                f"{m / one / k:4.2f} of a step per token"
            )
    print("   A step verifying k-1 drafted tokens keeps 1 + those accepted: it pays when that exceeds its ratio.")


def replay(prompt: list[int], answer: list[int], num_pred: int, min_match: int) -> list[tuple[int, int]]:
    """(drafted, accepted) per decode step, had the engine drafted with these settings: the answer is
    the same with or without speculation, so the steps follow from it without running the model."""
    lk = PromptLookup([*prompt, *answer[:1]], min_match)
    steps, i = [], 0
    while i < len(answer) - 1:
        draft = lk.draft(min(num_pred, len(answer) - 2 - i))
        accepted = 0
        while accepted < len(draft) and draft[accepted] == answer[i + 1 + accepted]:
            accepted += 1
        for t in answer[i + 1 : i + 2 + accepted]:
            lk.append(t)
        i += accepted + 1
        steps.append((len(draft), accepted))
    return steps


def predicted_speedup(steps: list[tuple[int, int]], cost: dict[int, float]) -> float:
    """Decode speed against one-token steps, from the measured cost of each batch size (one step = 1)."""
    kept = sum(1 + a for _, a in steps)
    return kept / sum(cost[1 + d] for d, _ in steps) if steps else float("nan")


def print_replays(
    res: dict[str, dict[str, list[dict[str, Any]]]], base: str, costs: dict[str, dict[int, float]]
) -> None:
    preds, mins = (1, 2, 3, 4, 6, 8), (2, 3, 4)
    print("\n4. replay of the plain answers: tokens per step and the speedup the measured batch costs predict,")
    print(f"   by longest draft N and shortest match (engine default N={SPEC_NUM_PRED}, match {SPEC_MIN_MATCH})")
    for prompt, by_variant in res.items():
        plain = by_variant[base][0]
        print(f"   {prompt}")
        print(f"     {'':22}" + "".join(f"{'N=' + str(n):>16}" for n in preds))
        for m in mins:
            cells = []
            for n in preds:
                st = replay(plain["prompt_tokens"], plain["answer_tokens"], n, m)
                tps = sum(1 + a for _, a in st) / len(st) if st else float("nan")
                sp = "/".join(f"{predicted_speedup(st, c):.2f}" for c in costs.values())
                cells.append(f"{tps:.2f} {sp}")
            print(f"     match >= {m}, tok/step {'':3}" + "".join(f"{c:>16}" for c in cells))
    print("   each cell: tokens per step, then the predicted speedup for " + " / ".join(costs))


async def prompt_lookup(args: argparse.Namespace) -> None:
    threads, vt = args.threads, args.verify_threads
    on = {"kind": "prompt-lookup", "num_pred_tokens": args.num_pred}
    # name -> (the backend's threads, speculative setting); the first is the baseline
    variants: dict[str, tuple[int, dict | None]] = {
        f"off, {threads} thread(s)": (threads, None),
        f"on, N={args.num_pred}, verify on {vt} threads": (threads, {**on, "verify_threads": vt}),
        f"on, N={args.num_pred}, verify on {threads} thread(s)": (threads, {**on, "verify_threads": threads}),
    }
    if vt != threads:
        variants[f"off, {vt} threads"] = (vt, None)
    backends = {t: create(None, n_threads=t, n_gpu_layers=args.n_gpu_layers) for t in {threads, vt}}
    for b in backends.values():
        await b.load()
    base_name = next(iter(variants))

    costs = (
        backends[threads]
        ._executor.submit(
            lambda: batch_costs(
                backends[threads].loaded,
                {
                    f"one-token steps on {threads}, batches on {vt} threads": vt,
                    f"one-token steps and batches on {threads} thread(s)": threads,
                },
                args.context,
                args.batch_reps,
            )
        )
        .result()
    )
    print_batch_costs(costs, args.context, args.batch_reps)
    cost_ratio = {
        name: {k: statistics.median(v) / statistics.median(by_k[1]) for k, v in by_k.items()}
        for name, by_k in costs.items()
    }

    for t, spec in variants.values():  # the batch-invariance checks run here, outside timing
        await ttft_run(backends[t], "Say hi.", 4, spec, fresh=True)
    res: dict[str, dict[str, list[dict[str, Any]]]] = {p: {v: [] for v in variants} for p in EDIT_PROMPTS}
    names = list(variants)
    for i in range(args.runs):
        for prompt, (system, user) in EDIT_PROMPTS.items():
            for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate: no variant always goes first
                t, spec = variants[name]
                res[prompt][name].append(await ttft_run(backends[t], user, args.edit_tokens, spec, system, fresh=True))
    refused: dict[str, dict[str, Any]] = {}
    if vt != threads:  # one-token steps on several threads too: shown once, untimed
        for prompt, (system, user) in EDIT_PROMPTS.items():
            refused[prompt] = await ttft_run(
                backends[vt], user, args.edit_tokens, {**on, "verify_threads": vt}, system, True
            )
    for b in backends.values():
        await b.aclose()

    print(f"\n3. prompt lookup, greedy, up to {args.edit_tokens} tokens, {args.runs} interleaved runs")
    print("   tok/s: median decode rate; speedup: median of each run's ratio to the baseline run next to it;")
    print("   vs best off: median tok/s over the best plain variant's; same: text identical to plain on its threads")
    plain_on = {t: name for name, (t, spec) in variants.items() if spec is None}  # threads -> plain variant
    for prompt, by_variant in res.items():
        base = by_variant[base_name]
        best_off = max(med([r["decode_tps"] for r in runs]) for n, runs in by_variant.items() if n.startswith("off"))
        print(f"   {prompt} ({base[0]['tokens']} tokens)")
        print(
            f"     {'variant':36} {'tok/s':>6} {'speedup':>7} {'vs best off':>11} {'accept':>6} "
            f"{'tok/step':>8} {'vb':>3} same"
        )
        for name, runs in by_variant.items():
            tps = med([r["decode_tps"] for r in runs])
            paired = med([r["decode_tps"] / b["decode_tps"] for r, b in zip(runs, base, strict=True)])
            d = runs[-1]["draft"] or {}
            spec = runs[-1]["spec"] or {}
            acc = f"{d['acceptance_rate']:.0%}" if d else "-"
            per_step = f"{d['tokens_per_step']:.2f}" if d.get("tokens_per_step") else "-"
            plain = by_variant[plain_on[variants[name][0]]]
            same = all(r["text"] == plain[0]["text"] for r in runs)
            print(
                f"     {name:36} {tps:6.1f} {paired:7.2f} {tps / best_off:11.2f} {acc:>6} {per_step:>8} "
                f"{spec.get('verify_batch', '-'):>3} {same}"
            )
        if prompt in refused:
            r, plain = refused[prompt], by_variant[plain_on[vt]][0]
            print(
                f"     on, one-token steps on {vt} threads too: verify batch {r['spec']['verify_batch']} "
                f"(the check refuses), same text as plain on {vt} threads: {r['text'] == plain['text']}; "
                f"plain on {vt} vs {threads} thread(s) same text: {plain['text'] == base[0]['text']}"
            )
    short = {"batches on " + name.split("batches on ")[-1].split(" thread")[0]: c for name, c in cost_ratio.items()}
    print_replays(res, base_name, short)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--edit-tokens", type=int, default=200)
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="the backend's default")
    ap.add_argument("--verify-threads", type=int, default=os.cpu_count() or 1, help="the engine's default")
    ap.add_argument("--n-gpu-layers", type=int, default=None)
    ap.add_argument("--num-pred", type=int, default=4, help="longest prompt-lookup draft")
    ap.add_argument("--context", type=int, default=300, help="cached tokens for the batch-cost figures")
    ap.add_argument("--batch-reps", type=int, default=20)
    ap.add_argument("--skip-bare", action="store_true", help="skip the comparison with bare llama-cpp-python")
    args = ap.parse_args()

    backend = create(None, n_threads=args.threads, n_gpu_layers=args.n_gpu_layers)
    info = await backend.load()
    print(
        f"model {info['model_name']} sha256 {info['model_sha256'][:16]}… backend {info['backend']} "
        f"n_gpu_layers {info['n_gpu_layers']} (offloaded {info['layers_offloaded']}) threads {info['n_threads']} "
        f"flash_attn {info['flash_attn']} extra_bufts {info['extra_bufts']}; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    if not args.skip_bare:
        await bare_comparison(backend, info, args)
    await backend.aclose()
    await prompt_lookup(args)
    print(f"\nload average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
