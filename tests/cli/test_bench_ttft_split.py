"""``ttft bench``: each level's TTFT split by the server's own figures (``ttft_split`` in summary.json and a
line in the printed summary), against loopback servers whose schedules are known: a vLLM-speaking fake
with one slot (requests really queue behind each other, and its per-request metrics say for how long),
and the batching fake with llama-server's ``timings`` (a prompt time, no queue: the share is not given)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ttft.tui.cli import main

from tests.fakes import FakeServer, Schedule
from tests.fakes.batching_server import BatchingServer


def _bench(
    base_url: str, model: str, out: Path, levels: str, requests: int, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[float, dict[str, Any]], str]:
    assert main(["bench", "-m", f"compat:{model}", "--base-url", base_url, "--concurrency", levels,
                 "--requests", str(requests), "--warmup", "0", "--max-output-tokens", "4",
                 "--out", str(out)]) == 0  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    return {d["level"]: d for d in summary["details"]}, capsys.readouterr().out


def test_vllm_queue_share_grows_with_load_and_matches_the_servers_truth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    sched = Schedule(slots=1, first_token_ms=40, token_ms=2, visible_tokens=4, vllm_metrics=True)
    with FakeServer(sched) as srv:
        levels, printed = _bench(srv.openai_base_url, "fake-model", tmp_path / "b", "1,3", 6, capsys)
        sent = [r.server_metrics for r in srv.requests]
    turns = [json.loads(line) for line in (tmp_path / "b" / "turns.jsonl").read_text().splitlines()]
    low, high = levels[1.0]["ttft_split"], levels[3.0]["ttft_split"]
    for s in (low, high):
        assert s["source"] == "vllm" and s["requests"] == 6 and s["left_out"] == 0
        assert abs(s["queue_share"] + s["prefill_share"] + s["rest_share"] - 1) < 1e-3
    assert low["queue_share"] < 0.1 < 0.5 < high["queue_share"]  # one slot: at 3 users two wait each time
    # the truth: the fake's own queue and TTFT, over the TTFT the client measured, at the busy level
    busy = [t for t in turns if t["extra"]["bench"]["level"] == 3.0]
    total = sum(t["metrics"]["ttft_ms"] for t in busy)
    assert len(sent) == 12 and all(sent)  # the light level's six requests, then the busy level's
    queue = sum(m["queue_time_ms"] for m in sent[6:])
    assert abs(high["queue_share"] - queue / total) < 0.01
    prefill = sum(t["metrics"]["server_ttft_ms"] for t in busy)
    assert abs(high["prefill_share"] - prefill / total) < 0.001
    lines = [line for line in printed.splitlines() if "TTFT by the server (vllm, 6 requests)" in line]
    assert len(lines) == 2 and f"{high['queue_share']:.0%} queue" in lines[1]


def test_llama_server_timings_give_prefill_but_no_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    with BatchingServer(slots=2, token_ms=3, prefill_ms=30, timings=True) as srv:
        levels, printed = _bench(srv.base_url, "batching-fake", tmp_path / "b", "1", 4, capsys)
    s = levels[1.0]["ttft_split"]
    assert s["source"] == "llama-server" and s["queue_share"] is None and s["requests"] == 4
    assert 0.5 < s["prefill_share"] < 1.0 and abs(s["prefill_share"] + s["rest_share"] - 1) < 1e-3
    assert "queue not reported (in the rest)" in printed


def test_no_server_figures_no_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    with FakeServer(Schedule(first_token_ms=10, token_ms=2, visible_tokens=4)) as srv:
        levels, printed = _bench(srv.openai_base_url, "fake-model", tmp_path / "b", "1", 3, capsys)
    assert levels[1.0]["ttft_split"] is None and "TTFT by the server" not in printed
