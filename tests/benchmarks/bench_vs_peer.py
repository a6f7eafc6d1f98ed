"""ttft bench against AIPerf on the same loopback servers, in one run; prints both side by side.

    python tests/benchmarks/bench_vs_peer.py [--aiperf /tmp/aiperf-venv/bin/aiperf] [--skip-llama]

1. The simulated batching server (tests/fakes/batching_server.py, a separate process) and, when
   llama-server is installed (extra ``server``), the real llama-server with the default Gemma
   3 270M model (``--ignore-eos`` so both tools get exactly the requested output length).
2. For each concurrency level: ``ttft bench`` (one run over all levels) and ``aiperf profile``
   (one run per level), same output length, similar prompt length, closed loop.
3. Prints TTFT p50, TPOT p50 (AIPerf calls it ITL) and output tokens/s per level for both tools
   with the ratio ttft/AIPerf (target: within 5%), and each tool's CPU seconds (its whole process
   tree, user + system) per 1,000 streamed chunks (one token per chunk on both servers).
   Both servers run on the first half of the cores, both tools on the other half (``--no-pin``
   to share them), so a tool's own CPU use cannot slow the server it measures.
4. The most concurrent streams one ttft process holds with event-loop lag p99 under 5 ms
   (a fake server with unlimited slots, 20 ms per token).

AIPerf runs offline here with a word-level tokenizer built from its own corpus with the
``tokenizers`` package (in AIPerf's venv); ``HF_HUB_OFFLINE`` must stay unset for it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

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


def run_ttft(base_url: str, model: str, levels: list[int], a: argparse.Namespace, out: Path) -> dict[float, dict]:
    cmd = [
        sys.executable, "-m", "tui.cli", "bench", "-m", f"compat:{model}", "--base-url", base_url,
        "--concurrency", ",".join(map(str, levels)), "--requests", str(a.requests), "--warmup", str(a.warmup),
        "--input-tokens", str(a.input_tokens), "--max-output-tokens", str(a.output_tokens), "--out", str(out),
        "--quiet",
    ]  # fmt: skip
    subprocess.run(cmd, check=False, cwd=ROOT, stdout=subprocess.DEVNULL)
    summary = json.loads((out / "summary.json").read_text())
    return {float(d["level"]): d for d in summary["details"]}


def run_aiperf(
    aiperf: Path, url: str, model: str, c: int, tokenizer: Path, a: argparse.Namespace, out: Path
) -> dict[str, Any] | None:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    cmd = [
        str(aiperf), "profile", "-m", model, "--url", url, "--endpoint-type", "chat", "--streaming",
        "--tokenizer", str(tokenizer), "--concurrency", str(c), "--request-count", str(a.requests),
        "--warmup-request-count", str(a.warmup), "--prompt-input-tokens-mean", str(a.input_tokens),
        "--prompt-input-tokens-stddev", "0", "--prompt-output-tokens-mean", str(a.output_tokens),
        "--prompt-output-tokens-stddev", "0", "--extra-inputs", f"max_tokens:{a.output_tokens}",
        "--use-server-token-count", "--artifact-dir", str(out), "--ui-type", "simple", "--random-seed", "0",
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


def interleaved(
    url: str, base_url: str, model: str, levels: list[int], a: argparse.Namespace, tokenizer: Path | None, out: Path
) -> tuple[dict[float, dict], dict[int, dict | None]]:
    """Level by level, ttft then AIPerf, so both see the same machine at about the same time."""
    ours: dict[float, dict] = {}
    peer: dict[int, dict | None] = {}
    for c in levels:
        t0 = child_cpu_s()
        ours.update(run_ttft(base_url, model, [c], a, out / f"ttft-{c}"))
        t1 = child_cpu_s()
        peer[c] = run_aiperf(a.aiperf, url, model, c, tokenizer, a, out / f"aiperf-{c}") if tokenizer else None
        t2 = child_cpu_s()
        chunks = (a.requests + a.warmup) * a.output_tokens  # one token per chunk; warm-up requests stream too
        ours[float(c)]["tool_cpu_s"] = t1 - t0
        ours[float(c)]["cpu_per_1k_chunks"] = (t1 - t0) / chunks * 1000
        if peer[c] is not None:
            peer[c]["tool_cpu_s"] = t2 - t1  # type: ignore[index]
            peer[c]["cpu_per_1k_chunks"] = (t2 - t1) / chunks * 1000  # type: ignore[index]
        print(f"  c={c} done (load average {os.getloadavg()[0]:.2f})", flush=True)
    return ours, peer


def _pick(d: dict[str, Any], key: str) -> float | None:
    m = d.get(key)
    if isinstance(m, dict):
        return m.get("p50") if m.get("p50") is not None else m.get("avg")
    for rec in d.get("records", []) if isinstance(d.get("records"), list) else []:
        if rec.get("tag") == key:
            return rec.get("p50") or rec.get("avg")
    return None


def _ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "   -  "
    return f"{a / b:6.3f}"


def compare(name: str, ours: dict[float, dict], peer: dict[int, dict | None]) -> list[float]:
    print(f"\n== {name} ==")
    print(
        f"{'c':>3} | {'TTFT p50 ttft':>13} {'AIPerf':>8} {'ratio':>6} | {'TPOT p50 ttft':>13} {'AIPerf':>8} "
        f"{'ratio':>6} | {'tok/s ttft':>10} {'AIPerf':>8} {'ratio':>6} | {'CPU s/1k chunks ttft':>20} {'AIPerf':>6} "
        "| ttft lag"
    )
    devs = []
    for c, p in peer.items():
        o = ours.get(float(c))
        if o is None:
            continue
        t_o, t_p = o["ttft_ms"]["p50"], _pick(p or {}, "time_to_first_token")
        i_o, i_p = o["tpot_ms"]["p50"], _pick(p or {}, "inter_token_latency")
        x_o = o["output_throughput"]
        x_p = (p or {}).get("output_token_throughput", {}).get("avg") if p else None
        lag = ((o.get("client") or {}).get("loop_lag_ms") or {}).get("p99")
        print(
            f"{c:>3} | {t_o or 0:13.1f} {t_p or 0:8.1f} {_ratio(t_o, t_p)} | {i_o or 0:13.2f} {i_p or 0:8.2f} "
            f"{_ratio(i_o, i_p)} | {x_o or 0:10.1f} {x_p or 0:8.1f} {_ratio(x_o, x_p)} | "
            f"{o.get('cpu_per_1k_chunks') or 0:20.2f} {(p or {}).get('cpu_per_1k_chunks') or 0:6.2f} | "
            f"p99 {lag or 0:.1f} ms"
        )
        for x, y in ((t_o, t_p), (i_o, i_p), (x_o, x_p)):
            if x and y:
                devs.append(abs(x / y - 1))
    if devs:
        within = sum(d <= 0.05 for d in devs)
        print(f"{within}/{len(devs)} figures within 5% (worst {max(devs):.1%})")
    return devs


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
                sys.executable, "-m", "tui.cli", "bench", "-m", "compat:fake", "--base-url",
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
            ours, peer = interleaved(url, url + "/v1", "batching-fake", levels, a, tokenizer, tmp / "fake")
            print("\nsimulated truth (token_ms 10, alpha 0.25): TPOT = 10 * (1 + 0.25 * (c - 1)) ms; TTFT 20 ms")
            compare("simulated batching server (8 slots)", ours, peer or dict.fromkeys(levels))
        finally:
            srv.terminate()
            srv.wait(5)
            os.sched_setaffinity(0, cpus)

    if not a.skip_llama:
        from backends.llama_server import LlamaServer, LlamaServerError, default_model

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
                ours, peer = interleaved(
                    server.url, server.base_url, server.model_name, levels, a, tokenizer, tmp / "llama"
                )
                compare(f"llama-server, {server.model.name}, {a.slots} slots", ours, peer or dict.fromkeys(levels))
            finally:
                server.stop()
                os.sched_setaffinity(0, cpus)

    if not a.skip_streams:
        max_streams(a, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
