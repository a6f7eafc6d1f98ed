"""tests/benchmarks/bench_vs_peer.py's per-request join: AIPerf's per-request export read (its documented
``profile_export.jsonl`` shape), and a run normalised against a recorded llama-server log by order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks import bench_vs_peer, llama_log
from tests.benchmarks.test_llama_log import RECORDED, SENT_S, TIMINGS


def _record(start_ns: int, ttft: float | None, phase: str = "profiling", error: object = None) -> str:
    metrics = {} if ttft is None else {"time_to_first_token": {"value": ttft, "unit": "ms"}}
    meta = {"request_start_ns": start_ns, "benchmark_phase": phase, "turn_index": 0}
    return json.dumps({"metadata": meta, "metrics": metrics, "error": error})


def test_aiperf_requests_are_read_without_warm_up_or_failures(tmp_path: Path) -> None:
    folder = tmp_path / "aiperf-2-r1" / "artifacts" / "run"
    folder.mkdir(parents=True)
    lines = [
        _record(1_000_000_000, 50.0, phase="warmup"),
        _record(2_000_000_000, 120.5),
        _record(2_500_000_000, None, error={"code": 500, "type": "ServerError", "message": "x"}),
        _record(3_000_000_000, 80.25),
    ]
    (folder / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    sent = bench_vs_peer.aiperf_sent(tmp_path / "aiperf-2-r1")
    assert sent == [llama_log.Sent(2.0, 120.5), llama_log.Sent(3.0, 80.25)]


def test_a_run_joined_in_order_drops_the_warm_up_tasks() -> None:
    # the recorded log's first task as the warm-up; AIPerf's two measured requests, 3 ms over the server
    tasks = llama_log.parse(RECORDED)
    waits = (1.538, 8093.072)
    sent = [llama_log.Sent(s, w + p + 3.0) for s, w, (p, _) in zip(SENT_S[1:], waits, TIMINGS[1:], strict=True)]
    norm = bench_vs_peer.normalised_run(tasks, sent, warmup=1)
    assert norm is not None and norm.requests == 2 and norm.waited == 1
    # the idle request is now task 5 (its 1.5 ms above task 0's gap becomes 0), so task 7 waits 1.5 ms less
    assert norm.ratio_p50 == pytest.approx(1.0, abs=0.001)
    assert norm.rest_max_ms == pytest.approx(3.0 + 1.538, abs=0.01)
    assert bench_vs_peer.normalised_run(tasks, sent[:1], warmup=1) is None  # counts disagree: no join
