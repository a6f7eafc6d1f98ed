"""telemetry.bench.workload.trace: Mooncake traces and ttft session logs as traces, from untrusted files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ttft.telemetry.bench.workload.trace import BLOCK_TOKENS, TraceError, read_trace

MOONCAKE = [
    {"timestamp": 0, "input_length": 1100, "output_length": 10, "hash_ids": [0, 1, 2]},
    {"timestamp": 250, "input_length": 700, "output_length": 20, "hash_ids": [0, 3]},
    {"timestamp": 100, "input_length": 300, "output_length": 0, "hash_ids": [4]},
]


def write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_a_mooncake_trace_reads_in_time_order_from_its_first_request(tmp_path: Path) -> None:
    trace = read_trace(write(tmp_path / "t.jsonl", [{**r, "timestamp": r["timestamp"] + 5000} for r in MOONCAKE]))
    assert trace.kind == "mooncake" and trace.skipped == 0
    assert [r.at_ms for r in trace.requests] == [0.0, 100.0, 250.0]
    assert [r.input_tokens for r in trace.requests] == [1100, 300, 700]
    assert [r.output_tokens for r in trace.requests] == [10, 1, 20]  # an empty answer still asks for one token
    assert trace.requests[0].hash_ids == (0, 1, 2)
    s = trace.summary()
    assert s["requests"] == 3 and s["blocks"] == 6 and s["blocks_seen_before"] == 1  # block 0, shared


def test_bad_lines_are_skipped_and_named_never_raised(tmp_path: Path) -> None:
    rows: list[object] = [
        MOONCAKE[0],
        "not json {",
        {"timestamp": -1, "input_length": 5, "output_length": 5},
        {"timestamp": 1, "input_length": "many", "output_length": 5},
        {"timestamp": 2, "input_length": 5, "output_length": 5, "hash_ids": ["a"]},
        {"timestamp": 3, "input_length": 5.5, "output_length": 5},
        [1, 2, 3],
        {"timestamp": 4, "input_length": 512.0, "output_length": 8, "hash_ids": [9, 10, 11]},  # 512.0: a count
    ]
    trace = read_trace(write(tmp_path / "t.jsonl", rows))
    assert len(trace.requests) == 2 and trace.skipped == 6
    assert trace.requests[1].hash_ids == (9,)  # ids past the prompt's blocks are dropped
    (note,) = trace.notes()
    assert "skipped 6 lines" in note and "line 2 is not JSON" in note


def test_a_trace_with_nothing_usable_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no request in the trace"):
        read_trace(write(tmp_path / "t.jsonl", ["garbage", '{"timestamp": "x"}']))
    with pytest.raises(TraceError, match="is empty"):
        read_trace(write(tmp_path / "e.jsonl", ["", "  "]))
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "absent.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(TraceError):
        read_trace(tmp_path / "bin.jsonl")


def turn(session: str, index: int, sent_at: str, n_in: int | None, n_out: int | None, **extra: object) -> dict:
    return {
        "schema": "ttft.turn/2",
        "session_id": session,
        "turn_index": index,
        "started_at": sent_at,
        "sent_at": sent_at,
        "status": "ok",
        "prompt": "hello there",
        "answer": "an answer of some length",
        "tokens": {"input": n_in, "output": n_out, "source": "usage"},
        "extra": extra,
    }


def test_a_session_log_replays_its_sizes_answers_and_gaps_with_a_growing_shared_context(tmp_path: Path) -> None:
    rows: list[object] = [
        turn("s1", 0, "2026-01-01T10:00:00.000+00:00", 300, 40),
        turn("s1", 1, "2026-01-01T10:00:12.500+00:00", 900, 60),  # the history grew past a block
        turn("s1", 2, "2026-01-01T10:00:30.000+00:00", 1500, 80),
        turn("s1", 3, "2026-01-01T10:00:31.000+00:00", 200, 5),  # shorter: the history was cleared
        turn("s1", 4, "2026-01-01T10:00:40.000", 200, 5),  # no zone: no clock to place it by
        "{torn line",
    ]
    trace = read_trace(write(tmp_path / "session.jsonl", rows))
    assert trace.kind == "ttft-session"
    assert [r.at_ms for r in trace.requests] == [0.0, 12500.0, 30000.0, 31000.0]
    assert [r.input_tokens for r in trace.requests] == [300, 900, 1500, 200]
    assert [r.output_tokens for r in trace.requests] == [40, 60, 80, 5]
    ids = [r.hash_ids for r in trace.requests]
    assert [len(i) for i in ids] == [-(-n // BLOCK_TOKENS) for n in (300, 900, 1500, 200)]
    assert ids[1][:1] == ids[0] and ids[2][:2] == ids[1]  # each turn resends the one before it
    assert not set(ids[3]) & set(ids[2])  # after a clear, nothing shared
    assert trace.skipped == 2  # the zoneless turn and the torn line, counted


def test_a_bench_log_as_a_trace_shares_nothing_between_its_requests(tmp_path: Path) -> None:
    rows: list[object] = [
        turn("bench-1", i, f"2026-01-01T10:00:0{i}.000+00:00", 600, 8, bench={"level": 1, "index": i, "mode": "x"})
        for i in range(3)
    ]
    trace = read_trace(write(tmp_path / "turns.jsonl", rows))
    ids = [set(r.hash_ids) for r in trace.requests]
    assert not (ids[0] & ids[1]) and not (ids[1] & ids[2])  # one unique prompt each, as the bench sent them


def test_estimates_stand_in_for_a_turn_without_token_counts(tmp_path: Path) -> None:
    rows: list[object] = [turn("s", 0, "2026-01-01T10:00:00+00:00", None, None)]
    (r,) = read_trace(write(tmp_path / "s.jsonl", rows)).requests
    assert r.input_tokens >= 1 and r.output_tokens >= 1
