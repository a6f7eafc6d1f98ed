"""Each diagnosis follows from the numbers and names the lever that would help."""

from __future__ import annotations

import json
from dataclasses import replace

from ttft.telemetry import events as ev
from ttft.telemetry.diagnosis import diagnose_session, diagnose_turn
from ttft.telemetry.record import TurnRecord, typed_records

from tests.support.turns import at, play, stream


def test_fast_turn_says_nothing_to_fix() -> None:
    d = play(stream(first_ms=250, gap_ms=20, visible=50))["diagnosis"]
    assert d.startswith("Responsive") and "250 ms" in d


def test_long_wait_before_first_token() -> None:
    d = play(stream(first_ms=4000, gap_ms=10, visible=20))["diagnosis"]
    assert "before the first token" in d and "4.0 s" in d and "shorten the prompt" in d


def test_long_answer_points_at_output_length() -> None:
    d = play(stream(first_ms=300, gap_ms=38, visible=400))["diagnosis"]
    assert "400 tokens at 38 ms each" in d and "fewer tokens" in d


def test_reasoning_dominating_first_visible_word() -> None:
    d = play(stream(first_ms=700, gap_ms=20, reasoning=310, visible=20))["diagnosis"]
    assert d.startswith("Reasoning took 6.2 s of the 6.9 s")


def test_hidden_reasoning_says_estimated() -> None:
    d = play(stream(first_ms=5000, gap_ms=20, visible=20, hidden_reasoning_tokens=200))["diagnosis"]
    assert "estimated" in d and "Reasoning took 4.0 s" in d


def test_slow_decode() -> None:
    d = play(stream(first_ms=300, gap_ms=150, visible=30))["diagnosis"]
    assert "Decode is slow: 150 ms per token" in d


def test_stall_is_named() -> None:
    events = stream(first_ms=200, gap_ms=10, visible=30)
    # Shift the second half of the stream by 3 s: one long gap mid-answer.
    shifted = [replace(e, t_ns=e.t_ns + 3_000_000_000) if i >= 17 else e for i, e in enumerate(events)]
    d = play(shifted)["diagnosis"]
    assert "stalled for 3.0 s" in d


def test_no_verdict_beyond_the_numbers_for_a_mediocre_ttft() -> None:
    d = play(stream(first_ms=700, gap_ms=20, visible=20))["diagnosis"]
    assert "700 ms" in d and "within the 1 s" in d


def test_cancel_without_tokens() -> None:
    d = play([ev.AttemptSent(at(0)), ev.Cancelled(at(2500))])["diagnosis"]
    assert "no token yet" in d and "2.5 s" in d


def test_session_diagnosis_names_the_dominant_phase() -> None:
    slow_start = [play(stream(first_ms=3000, gap_ms=10, visible=20)) for _ in range(3)]
    assert "before the first token" in diagnose_session(typed_records(slow_start))
    long_answers = [play(stream(first_ms=200, gap_ms=30, visible=300)) for _ in range(3)]
    s = diagnose_session(typed_records(long_answers))
    assert "Across 3 turns" in s and "shorter answers" in s
    failed = play([ev.AttemptSent(at(0)), ev.Failed(at(5), "auth", "bad key", 401)])
    assert "1 of 4 turns failed" in diagnose_session(typed_records([*long_answers, failed]))
    assert diagnose_session([]) == "No turns yet."


def test_diagnose_turn_works_on_logged_dicts() -> None:
    rec = play(stream(first_ms=250, gap_ms=20, visible=50))
    assert diagnose_turn(TurnRecord.from_dict(json.loads(json.dumps(rec)))) == rec["diagnosis"]


def test_a_logged_new_connection_and_wire_split_are_read_from_the_typed_record() -> None:
    d = play(stream(first_ms=600, gap_ms=10, visible=20))
    wait = {"dns": 100.0, "connect": 100.0, "tls": 200.0, "send": 1.0, "server": 150.0, "first_token": 49.0}
    d = {**d, "http": {"connection": "new", "http_version": "HTTP/1.1"}, "metrics": {**d["metrics"], "wait_ms": wait}}
    rec = TurnRecord.from_dict(d)
    assert rec.http is not None and rec.metrics.wait_ms is not None
    assert diagnose_turn(rec).startswith("A new TLS connection cost 400 ms of the 600 ms wait")
    # Without the http object (a record from before it existed) the split is not trusted.
    assert not diagnose_turn(TurnRecord.from_dict({**d, "http": None})).startswith("A new")


GPU_ENGINE = {"backend": "CUDA", "layers_offloaded": 31, "n_layers": 31, "prompt_eval_ms": 9.0, "decode_ms": 25.0}


def _engine_turn(facts: dict) -> str:
    events = stream(first_ms=40, gap_ms=4, visible=20)
    events.insert(-1, ev.ServerTimings(at(120), "llama.cpp", {**GPU_ENGINE, **facts}))
    return play(events)["diagnosis"]


def test_forced_flash_attention_on_the_cpu_is_said_even_on_a_fast_turn() -> None:
    d = _engine_turn({"flash_attn_requested": "on", "flash_attn": True, "layers_split": True, "graph_splits": 64})
    assert d.startswith("Attention ran on the CPU while 31 layers ran on CUDA (its graph was cut into 64 pieces)")
    assert "--flash-attn auto" in d


def test_auto_turning_flash_attention_off_keeps_attention_on_the_gpu_and_says_nothing() -> None:
    d = _engine_turn({"flash_attn_requested": "auto", "flash_attn": False, "layers_split": False, "graph_splits": 2})
    assert d.startswith("Responsive")


def test_another_op_of_every_layer_on_the_cpu_is_named_too() -> None:
    d = _engine_turn({"flash_attn_requested": "auto", "flash_attn": True, "layers_split": True, "graph_splits": 40})
    assert d.startswith("Part of every layer ran on the CPU while 31 layers ran on CUDA")


def test_a_load_turn_is_diagnosed_from_its_load_facts() -> None:
    events = stream(first_ms=40, gap_ms=4, visible=20)
    facts = {**GPU_ENGINE, "flash_attn_requested": "on", "flash_attn": True, "layers_split": True}
    events.insert(0, ev.ModelLoadStarted(at(-900), what="loading"))
    events.insert(1, ev.ModelLoadFinished(at(-1), info=facts))
    assert play(events)["diagnosis"].startswith("Attention ran on the CPU")
