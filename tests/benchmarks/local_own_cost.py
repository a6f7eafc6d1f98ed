"""ttft's own cost per token on the local engine: TPOT against the engine's own time per token.

    python tests/benchmarks/local_own_cost.py [--runs 3] [--tokens 200] [--threads 1] [--chat] [--temperature T]
                                              [--versus DIR]

One process per run (a fresh engine), the default model (SmolLM2 135M Instruct Q4_1), greedy decoding
(or ``--temperature T``, seed 1) of a ``--tokens`` answer from an empty KV cache, after one unmeasured
turn. For each run it prints:

- ttft's TPOT (the stamps of the first and last tokens, as ``metrics.tpot_ms`` reads them);
- llama.cpp's own decode ms per token (``t_eval``), and the sampler chain's ms per token where the
  checkout records it (``sample_ms``: llama.cpp's work too, timed around its call);
- the gap: TPOT minus decode per token (the issue's figure), and minus sampling as well (ttft's loop);
- the process's CPU per token while decoding (user + system, µs).

``--chat`` runs the engine as the chat does, in its backend process (:mod:`backends.ask.isolated`), whose event
loop pickles each event and sends it over the pipe beside the decoding thread; the CPU is that process's.

``--versus DIR`` runs the checkout in DIR (main before a change, say) in the same way, alternating
run by run, and prints both; compare the medians of one such run, not figures from separate runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]
PROMPT = "Write a long story about a dragon who learns to bake bread. Use many short paragraphs."


def one_run(tokens: int, threads: int, chat: bool = False, temperature: float = 0.0) -> dict[str, Any]:
    """In the child: a warm turn, then the measured one; its figures as a dict."""
    import asyncio
    import resource

    import llama_cpp  # noqa: F401  (before numpy, as every entry point that runs -m local does)
    from ttft.backends.base import ChatRequest, Message
    from ttft.backends.local.engine import LocalLlamaBackend
    from ttft.telemetry import events as ev
    from ttft.telemetry.settings import TurnSettings

    async def turn(backend: Any, n: int) -> tuple[list[Any], float]:
        def clear(lm: Any) -> None:
            if lm is not None:
                lm.llm.kv_clear()
                lm.kv_tokens = []

        backend._executor.submit(lambda: clear(backend.loaded)).result()
        settings = TurnSettings(max_output_tokens=n, temperature=temperature, extra={"seed": 1})
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        events = [e async for e in backend.stream(ChatRequest((Message("user", PROMPT),), settings))]
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        return events, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)

    async def chat_turn(backend: Any, n: int) -> tuple[list[Any], float]:
        """The turn as the chat runs it: the engine in the backend process, its events sent over the pipe."""
        import psutil

        settings = TurnSettings(max_output_tokens=n, temperature=temperature, extra={"n_threads": threads, "seed": 1})
        request = ChatRequest((Message("user", PROMPT),), settings)
        if backend.pid is None:  # the process starts with the first turn
            return [e async for e in backend.stream(request)], 0.0
        proc = psutil.Process(backend.pid)
        c0 = proc.cpu_times()
        events = [e async for e in backend.stream(request)]
        c1 = proc.cpu_times()
        return events, (c1.user + c1.system) - (c0.user + c0.system)

    async def main() -> dict[str, Any]:
        if chat:
            from ttft.backends.ask.isolated import ProcessBackend

            backend: Any = ProcessBackend("local")
            run = chat_turn
        else:
            backend = LocalLlamaBackend(n_threads=threads)
            run = turn
        try:
            await run(backend, 16)
            events, cpu_s = await run(backend, tokens)
        finally:
            await backend.aclose()
        if not isinstance(events[-1], ev.Finished):
            raise RuntimeError(f"the turn did not finish: {events[-1]}")
        deltas = [e for e in events if isinstance(e, ev.TextDelta | ev.ReasoningDelta)]
        usage = next(e for e in events if isinstance(e, ev.Usage))
        t = next(e.data for e in events if isinstance(e, ev.ServerTimings))
        n_out = usage.output or 0
        tpot = (deltas[-1].t_ns - deltas[0].t_ns) / 1e6 / max(1, n_out - 1)
        decode = t["decode_ms"] / max(1, t["decode_tokens"])
        sample = t["sample_ms"] / max(1, t["decode_tokens"]) if "sample_ms" in t else None
        return {
            "tokens": n_out,
            "tpot_ms": tpot,
            "decode_ms_per_token": decode,
            "sample_ms_per_token": sample,
            "gap_ms": tpot - decode,
            "loop_ms": tpot - decode - (sample or 0.0),
            "cpu_us_per_token": cpu_s * 1e6 / max(1, n_out),
        }

    return asyncio.run(main())


def run_child(code: str, tokens: int, threads: int, chat: bool = False, temperature: float = 0.0) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": code, "TTFT_DATA_DIR": tempfile.mkdtemp(prefix="ttft-own-")}
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one-run",
        "--tokens",
        str(tokens),
        "--threads",
        str(threads),
        *(["--chat"] if chat else []),
        "--temperature",
        str(temperature),
    ]
    out = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise SystemExit(f"a run in {code} failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def cells(r: dict[str, Any]) -> str:
    sample = "-" if r["sample_ms_per_token"] is None else f"{r['sample_ms_per_token']:.3f}"
    return (
        f"TPOT {r['tpot_ms']:.3f}  decode {r['decode_ms_per_token']:.3f}  sample {sample}  "
        f"gap {r['gap_ms']:.3f}  loop {r['loop_ms']:.3f} ms/token  CPU {r['cpu_us_per_token']:.0f} us/token"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--versus", metavar="DIR", help="also run the checkout in DIR, alternating run by run")
    ap.add_argument(
        "--chat", action="store_true", help="the engine in the chat's backend process (events over its pipe)"
    )
    ap.add_argument(
        "--temperature", type=float, default=0.0, help="0: greedy; the chat samples at 0.2 (top-k 40) by default"
    )
    ap.add_argument("--one-run", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_run:
        print(json.dumps(one_run(args.tokens, args.threads, args.chat, args.temperature)))
        return
    codes = {"this checkout": str(HERE)}
    if args.versus:
        codes[f"--versus {args.versus}"] = str(Path(args.versus).resolve())
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in codes}
    where = "in the chat's backend process" if args.chat else "in this process"
    how = "greedy" if args.temperature == 0 else f"temperature {args.temperature}"
    print(f"{args.tokens}-token {how} answers, {args.threads} thread(s), {where}, load {os.getloadavg()[0]:.2f}")
    for r in range(args.runs):
        for name in list(codes) if r % 2 == 0 else list(reversed(codes)):
            res = run_child(codes[name], args.tokens, args.threads, args.chat, args.temperature)
            results[name].append(res)
            print(f"  run {r + 1} {name:<24} {cells(res)}", flush=True)
    print(f"medians of {args.runs} runs (load average now {os.getloadavg()[0]:.2f}):")
    for name, runs in results.items():
        med = {k: statistics.median(x[k] for x in runs) if runs[0][k] is not None else None for k in runs[0]}
        print(f"  {name:<30} {cells(med)}")


if __name__ == "__main__":
    main()
