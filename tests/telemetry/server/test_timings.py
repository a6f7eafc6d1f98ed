"""telemetry.server.timings: llama-server, Ollama and the local engine read into one typed shape."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ttft.telemetry.server.timings import ServerTimings, load_import_ms, server_timings


def test_llama_server_timings_keep_their_ms() -> None:
    (s,) = server_timings(
        {
            "llama-server": {
                "prompt_n": 120,
                "prompt_ms": 80.0,
                "prompt_per_second": 1500.0,
                "predicted_n": 50,
                "predicted_ms": 900.0,
                "predicted_per_second": 55.5,
                "cache_n": 64,
            }
        }
    )
    assert (s.source, s.label, s.is_engine) == ("llama-server", "llama-server", False)
    assert (s.prefill_tokens, s.prefill_ms, s.prefill_tokens_per_s) == (120, 80.0, 1500.0)
    assert (s.decode_tokens, s.decode_ms, s.decode_tokens_per_s) == (50, 900.0, 55.5)
    assert s.cache_reused_tokens == 64 and s.load_ms is None


def test_ollama_nanoseconds_become_ms() -> None:
    (s,) = server_timings(
        {
            "ollama": {
                "prompt_eval_count": 30,
                "prompt_eval_duration": 50_000_000,
                "eval_count": 9,
                "eval_duration": 2_000_000_000,
                "load_duration": 1_500_000,
            }
        }
    )
    assert (s.prefill_tokens, s.prefill_ms, s.decode_tokens, s.decode_ms) == (30, 50.0, 9, 2000.0)
    assert s.load_ms == 1.5 and s.prefill_tokens_per_s is None


def test_ollama_zero_durations_are_unmeasured_not_instant() -> None:
    (s,) = server_timings({"ollama": {"prompt_eval_count": 30, "prompt_eval_duration": 0, "eval_duration": 0}})
    assert s.prefill_ms is None and s.decode_ms is None


def test_the_engine_reports_cache_reuse_and_kv_use() -> None:
    engine = {
        "prompt_eval_tokens": 27,
        "prompt_eval_ms": 260.5,
        "prompt_tokens_reused": 135,
        "decode_tokens": 119,
        "decode_ms": 4743.0,
        "kv_used_tokens": 282,
        "kv_used_bytes": 3 * 2**20,
        "n_ctx": 4096,
        "backend": "CPU",
        "model_name": "SmolLM2",
        "speculative": {"verify_batch": 1},
    }
    (s,) = server_timings({"llama.cpp": engine, "model": {"n_ctx": 4096}})
    assert s.is_engine and s.source == "llama.cpp"
    assert (s.prefill_tokens, s.prefill_ms, s.cache_reused_tokens) == (27, 260.5, 135)
    assert (s.decode_tokens, s.decode_ms) == (119, 4743.0)
    assert (s.kv_used_tokens, s.kv_used_bytes, s.n_ctx) == (282, 3 * 2**20, 4096)
    assert s.engine == "CPU · SmolLM2" and s.draft_refused


def test_an_unknown_source_keeps_its_scalars_as_text() -> None:
    (s,) = server_timings({"vllm": {"queue_ms": 4, "nested": {"x": 1}, "note": "hi"}})
    assert s.other == (("queue_ms", "4"), ("note", "hi")) and s.prefill_ms is None


@pytest.mark.parametrize("server", [None, 3, "x", [], {"a": 1}, {"a": [1]}, {"model": {"n_ctx": 1}}])
def test_no_timings_from_what_is_not_a_source_object(server: object) -> None:
    assert server_timings(server) == []


@pytest.mark.parametrize("bad", ["80", True, None, math.nan, math.inf, [1]])
def test_a_field_of_the_wrong_type_reads_as_absent(bad: object) -> None:
    (s,) = server_timings({"llama-server": {"prompt_ms": bad, "prompt_n": bad, "predicted_ms": 5.0}})
    assert s.prefill_ms is None and s.prefill_tokens is None and s.decode_ms == 5.0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
known_keys = st.sampled_from(["prompt_ms", "eval_duration", "prompt_eval_ms", "prompt_n", "n_ctx", "backend", "x"])


@settings(deadline=None)  # no per-example time limit: a loaded CI machine would trip it (Flaky)
@given(st.dictionaries(st.text(max_size=6), st.dictionaries(known_keys | st.text(max_size=4), json_values)))
def test_any_server_object_reads_without_error(server: dict[str, dict[str, object]]) -> None:
    for s in server_timings(server):
        assert isinstance(s, ServerTimings)
        for v in (s.prefill_ms, s.decode_ms, s.load_ms, s.prefill_tokens_per_s):
            assert v is None or math.isfinite(v)


def test_server_given_text_reaches_no_terminal_as_control_codes() -> None:
    # names and values come from the server (or an old log): an escape sequence must not survive
    esc = "\x1b]0;owned\x07\x1b[2J"
    (unknown, engine) = server_timings(
        {
            f"vllm{esc}": {f"note{esc}": f"hi{esc}", "long": "x" * 10_000},
            "llama.cpp": {"decode_ms": 1.0, "backend": esc},
        }
    )
    texts = [unknown.source, unknown.label, engine.engine, *(t for kv in unknown.other for t in kv)]
    assert all(t.isprintable() for t in texts), texts
    assert unknown.source.startswith("vllm") and ("long", "x" * 80) in unknown.other


ENGINE = {"prompt_eval_ms": 40.0, "decode_ms": 300.0, "n_threads": 2, "n_layers": 31}


@pytest.mark.parametrize(
    ("facts", "shown"),
    [
        ({"backend": "CPU", "layers_offloaded": 0}, "CPU, 2 threads"),
        (
            {"backend": "CPU", "layers_offloaded": 0, "flash_attn": True, "flash_attn_requested": "auto"},
            "CPU, 2 threads, flash attn on (auto)",
        ),
        (
            {"backend": "CUDA", "layers_offloaded": 31, "flash_attn": True, "flash_attn_requested": "on"},
            "CUDA 31/31 layers, flash attn on",
        ),
        (
            {"backend": "CUDA", "layers_offloaded": 31, "flash_attn": False, "flash_attn_requested": "auto"},
            "CUDA 31/31 layers, flash attn off (auto)",
        ),
        ({"backend": "Vulkan", "layers_offloaded": 10}, "Vulkan 10/31 layers, the rest on CPU (2 threads)"),
        (
            {"backend": "CUDA", "layers_offloaded": 31, "flash_attn": True, "layers_split": True},
            "CUDA 31/31 layers, flash attn on, part of every layer on CPU",
        ),
        ({"layers_offloaded": 31}, ""),  # no backend named: nothing said rather than a guess
    ],
)
def test_the_engine_says_where_its_layers_ran(facts: dict[str, object], shown: str) -> None:
    (s,) = server_timings({"llama.cpp": {**ENGINE, **facts}})
    assert s.placement == shown


def test_where_the_layers_ran_is_text_a_terminal_can_show() -> None:
    (s,) = server_timings({"llama.cpp": {**ENGINE, "backend": "CU\x1b[2JDA", "layers_offloaded": 3}})
    assert "\x1b" not in s.placement and s.placement.startswith("CU")


def test_the_llama_cpp_import_is_read_from_the_load_entry() -> None:
    assert load_import_ms({"model": {"llama_import_ms": 1612.5}}) == 1612.5
    assert load_import_ms({"model": {"llama_import_ms": "slow"}}) is None
    assert load_import_ms({"llama.cpp": {"llama_import_ms": 3.0}}) is None  # a load fact, not a turn's
    assert load_import_ms(None) is None
