"""The load driver's raw Chat Completions path gives the same record as the SDK's typed path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backends.load import BackendSpec, build_backend
from tests.backend_util import backend_for, one_turn
from tests.fakes import FakeServer, Schedule
from tests.fakes.batching_server import BatchingServer


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def _same(d: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the path: everything but times."""
    return {
        "status": d["status"],
        "answer": d["answer"],
        "reasoning": d["reasoning"],
        "stop_reason": d["stop_reason"],
        "error": (d.get("error") or {}).get("type"),
        "tokens": d["tokens"],
        "chunks": [c[1:] if isinstance(c, list) else {k: v for k, v in c.items() if k != "t_ns"} for c in d["chunks"]],
        "server": d.get("server"),
        "notices": d.get("notices"),
        "attempts": d["attempts"],
        "tool_calls": d.get("tool_calls"),
    }


SCHEDULES = {
    "reasoning_content": Schedule(reasoning_tokens=3, visible_tokens=5),
    "reasoning_field": Schedule(reasoning_tokens=2, visible_tokens=4, reasoning="reasoning"),
    "think_split": Schedule(reasoning_tokens=3, visible_tokens=4, reasoning="think", think_tag_split=True),
    "two_per_chunk": Schedule(visible_tokens=7, tokens_per_chunk=2),
    "llama_timings": Schedule(visible_tokens=4, timings="llama"),
    "ollama": Schedule(visible_tokens=4, timings="ollama"),
    "error_mid_stream": Schedule(visible_tokens=6, error_after=2),
    "malformed": Schedule(visible_tokens=6, malformed_after=2),
    "dropped": Schedule(visible_tokens=6, drop_after=2),
    "no_done": Schedule(visible_tokens=3, no_done=True),
    "no_stream_options": Schedule(visible_tokens=3, reject_stream_options=True),
    "http_500": Schedule(fail_status=500),
}


@pytest.mark.parametrize("name", list(SCHEDULES))
async def test_raw_path_records_what_the_sdk_path_records(name: str) -> None:
    with FakeServer(SCHEDULES[name]) as srv:
        out = []
        for raw in (False, True):
            b = backend_for("compat", srv)
            b.raw_stream = raw
            try:
                out.append(await one_turn(b, stream=True, max_retries=0))
            finally:
                await b.aclose()
    sdk, raw_rec = out
    assert _same(raw_rec) == _same(sdk)
    assert len(raw_rec["chunks"]) == len(sdk["chunks"])


async def test_raw_path_stamps_bytes_on_arrival_and_reuses_connections() -> None:
    with BatchingServer(slots=4, token_ms=20, alpha=0, prefill_ms=30, timings=True) as srv:
        backend = build_backend(BackendSpec("compat:batching-fake", srv.base_url, raw_stream=True), pool=8)
        assert getattr(backend, "raw_stream", False)
        seen: list[Any] = []
        orig = backend._translate  # type: ignore[attr-defined]

        def spy(item: Any, t: int, state: Any) -> Any:
            seen.append(type(item))
            return orig(item, t, state)

        backend._translate = spy  # type: ignore[attr-defined]
        try:
            first = await one_turn(backend, stream=True, max_output_tokens=10)
            second = await one_turn(backend, stream=True, max_output_tokens=10)
        finally:
            await backend.aclose()
    assert seen and set(seen) == {dict}
    for d in (first, second):
        assert d["status"] == "ok" and d["tokens"]["source"] == "usage" and d["tokens"]["output"] == 10
        assert d["answer"] == "".join(f"w{i:02d} " for i in range(10))
        assert 25 <= d["metrics"]["ttft_ms"] < 500
        assert 15 <= d["metrics"]["tpot_ms"] < 60  # truth 20: stamps are per arrival, not per batch
        assert "llama-server" in d["server"]


async def test_chat_keeps_the_sdk_path_by_default() -> None:
    with FakeServer(Schedule(visible_tokens=3)) as srv:
        b = backend_for("chat", srv)
        try:
            assert b.raw_stream is False
            d = await one_turn(b, stream=True)
        finally:
            await b.aclose()
    assert d["status"] == "ok" and d["answer"] == "w00 w01 w02 "


def test_bench_cli_raw_stream_matches_the_truth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli import main

    out = tmp_path / "run"
    with BatchingServer(slots=8, token_ms=20, alpha=0, prefill_ms=20) as srv:
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--concurrency", "4",
                "--requests", "8", "--warmup", "1", "--max-output-tokens", "8", "--out", str(out), "--quiet",
                "--raw-stream",
            ]
        )  # fmt: skip
    assert rc == 0
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 9 and all(t["status"] == "ok" for t in turns)
    assert all(t["tokens"]["output"] == 8 and t["tokens"]["source"] == "usage" for t in turns)
    assert all(15 <= t["metrics"]["tpot_ms"] < 60 for t in turns)
    assert '"raw_stream": true' in json.dumps(json.loads((out / "summary.json").read_text()))


def test_think_splitter_fast_path_matches_the_general_path() -> None:
    import random

    from backends.think import ThinkSplitter

    pieces = ["a", "b c", "<", "<t", "<think>", "</think>", "</th", "ink>", "x<y", "  "]
    for seed in range(2000):
        r = random.Random(seed)
        text = "".join(r.choice(pieces) for _ in range(r.randint(0, 12)))
        cuts = sorted(r.sample(range(len(text) + 1), min(len(text) + 1, r.randint(0, 5))))
        parts = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        inside = r.random() < 0.3
        fast, general = ThinkSplitter(inside=inside), ThinkSplitter(inside=inside)
        general._lead = None  # never takes the shortcut
        got = [x for p in parts for x in fast.feed(p)] + fast.flush()
        want = [x for p in parts for x in general.feed(p)] + general.flush()
        assert got == want, parts
