"""``ttft bench``'s workloads end to end against loopback fakes: conversations carrying the real answers,
lengths with spread, shared prefixes against a prefix cache, datasets, Mooncake traces and ttft's own
session logs replayed on their schedule."""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import socket
import statistics
from pathlib import Path
from typing import Any

import pytest
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.batching_server import BatchingServer
from tests.fakes.prefill_server import PrefillServer


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def server() -> BatchingServer:
    with BatchingServer(slots=16, token_ms=2, alpha=0.0, prefill_ms=5, unique_answers=True) as srv:
        yield srv


def bench(url: str, out: Path, *flags: str) -> int:
    return main(["bench", "-m", "compat:fake", "--base-url", url, "--out", str(out), "--quiet", *flags])


def turns_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]


def summary_of(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())


def test_three_turns_send_one_two_then_three_user_messages_carrying_the_real_answers(
    server: BatchingServer, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    rc = bench(
        server.base_url, out, "--concurrency", "2", "--requests", "12", "--warmup", "0", "--turns", "3",
        "--input-tokens", "16", "--max-output-tokens", "4", "--system", "be brief",
    )  # fmt: skip
    assert rc == Exit.OK
    log = server.log
    assert len(log) == 12  # 4 conversations of 3 turns
    answers = {e["answer"] for e in log}
    by_users: dict[int, int] = {}
    for e in log:
        roles = [m["role"] for m in e["messages"]]
        users = roles.count("user")
        by_users[users] = by_users.get(users, 0) + 1
        assert roles == ["system"] + ["user", "assistant"] * (users - 1) + ["user"]
        # every answer in the history is one this server really sent, word for word
        assert all(m["content"] in answers for m in e["messages"] if m["role"] == "assistant")
        if users > 1:  # and it resends exactly what the turn before it sent, then that turn's answer
            before = next(p for p in log if p["messages"] == e["messages"][:-2])
            assert e["messages"][-2] == {"role": "assistant", "content": before["answer"]}
    assert by_users == {1: 4, 2: 4, 3: 4}
    records = turns_of(out)
    tags = [r["extra"]["bench"] for r in records]
    assert sorted((t["conversation"], t["turn"]) for t in tags) == [(c, k) for c in (0, 3, 6, 9) for k in (1, 2, 3)]
    assert all(t["turns"] == 3 and t["user"] in (0, 1) for t in tags)
    detail = summary_of(out)["details"][0]
    by_turn = detail["by_turn"]
    assert [t["turn"] for t in by_turn] == [1, 2, 3] and all(t["completed"] == 4 for t in by_turn)
    ins = [t["input_tokens"]["p50"] for t in by_turn]
    assert ins[0] < ins[1] < ins[2]  # the context grows turn by turn
    assert summary_of(out)["workload"]["turns"] == 3


def test_requests_round_up_to_whole_conversations(server: BatchingServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert bench(server.base_url, out, "--concurrency", "1", "--requests", "4", "--warmup", "0", "--turns", "3",
                 "--max-output-tokens", "2", "--think-time", "0.05") == Exit.OK  # fmt: skip
    records = turns_of(out)
    assert len(records) == 6 and summary_of(out)["requests_per_level"] == 6
    by_conv: dict[int, list[dict]] = {}
    for r in records:
        by_conv.setdefault(r["extra"]["bench"]["conversation"], []).append(r)
    for conv in by_conv.values():  # think time: the next turn leaves >= 50 ms after the answer ended
        conv.sort(key=lambda r: r["extra"]["bench"]["turn"])
        for a, b in itertools.pairwise(conv):
            ended = a["extra"]["bench"]["sent_at_ms"] + a["events_ms"]["end"]
            assert b["extra"]["bench"]["sent_at_ms"] - ended >= 49.0


def test_input_tokens_with_a_stddev_give_prompts_with_that_spread(server: BatchingServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    rc = bench(server.base_url, out, "--concurrency", "8", "--requests", "200", "--warmup", "0",
               "--input-tokens", "100:30", "--output-tokens", "2-6")  # fmt: skip
    assert rc == Exit.OK
    words = [len(e["messages"][-1]["content"].split()) for e in server.log]
    assert statistics.pstdev(words) == pytest.approx(30, abs=5)  # one word a token, less a fixed tail
    assert statistics.mean(words) == pytest.approx(98, abs=7)
    assert {e["max_tokens"] for e in server.log} == {2, 3, 4, 5, 6}
    records = turns_of(out)
    for r in records:  # each request says what it drew, and got it
        assert r["tokens"]["output"] == r["extra"]["bench"]["output_tokens"]
    lengths = summary_of(out)["details"][0]["lengths"]
    assert lengths["input_tokens"]["std"] == pytest.approx(30, abs=5)
    assert summary_of(out)["workload"]["input_tokens"]["spec"] == "100:30"
    assert summary_of(out)["input_tokens"] is None  # no one length: ttft report --merge compares none


def test_shared_prefixes_are_served_from_a_prefix_cache(tmp_path: Path) -> None:
    with PrefillServer(base_ms=5, prefill_ms_per_token=0.5, token_ms=1, block=16) as srv:
        out = tmp_path / "run"
        rc = bench(srv.base_url, out, "--concurrency", "2", "--requests", "16", "--warmup", "0", "--prefix-tokens",
                   "256", "--prefixes", "2", "--input-tokens", "64", "--max-output-tokens", "3")  # fmt: skip
        assert rc == Exit.OK
        cached = [r["cached"] for r in srv.requests]
    assert sum(c >= 256 for c in cached) >= 14  # all but each prefix's first request
    records = turns_of(out)
    assert {r["extra"]["bench"]["prefix"] for r in records} == {0, 1}
    assert all(r["extra"]["bench"]["prefix"] == r["extra"]["bench"]["user"] % 2 for r in records)
    cache = summary_of(out)["details"][0]["prefix_cache"]
    assert cache["hits"] >= 14 and cache["requests"] == 16 and cache["with_prefix"] == 16
    assert cache["cached_input_tokens_mean"] >= 0.8 * 256
    # a miss prefills ~320 more tokens at 0.5 ms each: far slower whatever the machine does
    assert cache["ttft_miss_ms"]["p50"] > cache["ttft_hit_ms"]["p50"] + 50
    (row,) = csv.DictReader((out / "levels.csv").open())
    assert float(row["cache_hit_fraction"]) == cache["hit_fraction"] and float(row["ttft_cache_miss_p50_ms"]) > 0


MOONCAKE = [
    {"timestamp": 1000, "input_length": 700, "output_length": 3, "hash_ids": [7, 8]},
    {"timestamp": 1040, "input_length": 600, "output_length": 4, "hash_ids": [7, 9]},
    {"timestamp": 1120, "input_length": 90, "output_length": 5, "hash_ids": [10]},
    {"timestamp": 1125, "input_length": 520, "output_length": 6, "hash_ids": [7, 11]},
    {"timestamp": 1300, "input_length": 40, "output_length": 7, "hash_ids": [12]},
    {"timestamp": 1600, "input_length": 1200, "output_length": 8, "hash_ids": [7, 8, 13]},
]


def test_a_mooncake_trace_arrives_on_its_offsets_with_its_lengths(server: BatchingServer, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in MOONCAKE))
    out = tmp_path / "run"
    assert bench(server.base_url, out, "--trace", str(trace), "--warmup", "1") == Exit.OK
    measured = server.log[1:]  # the warm-up first
    assert len(measured) == 6
    by_tokens = {e["max_tokens"]: e for e in measured}
    assert sorted(by_tokens) == [3, 4, 5, 6, 7, 8]  # each request asks for its trace line's output length
    t0 = by_tokens[3]["arrived"]
    for row in MOONCAKE:
        offset_ms = (by_tokens[row["output_length"]]["arrived"] - t0) * 1000
        assert offset_ms == pytest.approx(row["timestamp"] - 1000, abs=15), row
    text = {
        row["output_length"]: by_tokens[row["output_length"]]["messages"][-1]["content"].split() for row in MOONCAKE
    }
    assert text[3][:500] == text[4][:500] == text[6][:500] == text[8][:500]  # block 7: the same words
    assert text[8][:690] == text[3] and text[4][512:590] != text[3][512:590]  # id 8 is shared, id 9 is not
    assert len(text[8]) == pytest.approx(1200, abs=12) and len(text[5]) == pytest.approx(90, abs=12)
    s = summary_of(out)
    assert s["mode"] == "trace" and s["levels"][0]["level"] == 1.0
    assert s["workload"]["trace"]["requests"] == 6
    assert s["workload"]["file"]["blocks_seen_before"] == 4  # block 7 in three later prompts, block 8 in one
    arrivals = s["details"][0]["arrivals"]
    assert arrivals["scheduled"] == 6 and arrivals["late_ms"]["max"] < 15


def test_a_trace_replays_faster_at_each_speedup(server: BatchingServer, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in MOONCAKE))
    out = tmp_path / "run"
    assert bench(server.base_url, out, "--trace", str(trace), "--speedup", "1,4", "--warmup", "0") == Exit.OK
    first, second = server.log[:6], server.log[6:]
    assert (first[-1]["arrived"] - first[0]["arrived"]) * 1000 == pytest.approx(600, abs=20)
    assert (second[-1]["arrived"] - second[0]["arrived"]) * 1000 == pytest.approx(150, abs=20)
    # each level has blocks of its own: the second replay does not start on the first one's cache
    assert first[0]["messages"][-1]["content"] != second[0]["messages"][-1]["content"]
    assert [lv["level"] for lv in summary_of(out)["levels"]] == [1.0, 4.0]


def test_a_ttft_session_log_is_a_trace(server: BatchingServer, tmp_path: Path) -> None:
    url = server.base_url
    for tokens, prompt in (("5", "what is a prefix cache"), ("9", "and how big should it be for twelve users")):
        assert main(["ask", "-m", "compat:fake", "--base-url", url, "--session", "s1",
                     "--max-output-tokens", tokens, prompt]) == 0  # fmt: skip
    session = tmp_path / "data" / "sessions" / "s1.jsonl"
    logged = [json.loads(line) for line in session.read_text().splitlines()]
    gap_ms = (server.log[1]["arrived"] - server.log[0]["arrived"]) * 1000  # as the server saw the chat's two turns
    server.log.clear()
    out = tmp_path / "replay"
    assert bench(url, out, "--trace", "s1", "--warmup", "0") == Exit.OK  # a session's id names its log
    assert [e["max_tokens"] for e in server.log] == [r["tokens"]["output"] for r in logged] == [5, 9]
    replay_gap = (server.log[1]["arrived"] - server.log[0]["arrived"]) * 1000
    assert replay_gap == pytest.approx(gap_ms, abs=15)
    s = summary_of(out)
    assert s["workload"]["trace"]["kind"] == "ttft-session"


def test_a_sharegpt_dataset_sends_its_human_turns_with_its_answer_lengths(
    server: BatchingServer, tmp_path: Path
) -> None:
    data = [
        {"id": str(i), "conversations": [
            {"from": "human", "value": f"question {i} one"}, {"from": "gpt", "value": "x" * (8 * (i + 1))},
            {"from": "human", "value": f"question {i} two"}, {"from": "gpt", "value": "y" * 12},
        ]}
        for i in range(3)
    ]  # fmt: skip
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "one"
    assert bench(server.base_url, out, "--dataset", str(path), "--concurrency", "1", "--requests", "3",
                 "--warmup", "0") == Exit.OK  # fmt: skip
    firsts = sorted((e["messages"][-1]["content"], e["max_tokens"]) for e in server.log)
    assert firsts == [("question 0 one", 2), ("question 1 one", 4), ("question 2 one", 6)]
    server.log.clear()
    out = tmp_path / "two"
    assert bench(server.base_url, out, "--dataset", str(path), "--concurrency", "1", "--requests", "2",
                 "--warmup", "0", "--turns", "2") == Exit.OK  # fmt: skip
    second = server.log[1]["messages"]
    assert second[0]["content"].endswith(" one") and second[-1]["content"].endswith(" two")
    assert second[1] == {"role": "assistant", "content": server.log[0]["answer"]}  # the model's, not the dataset's
    assert server.log[1]["max_tokens"] == 3  # the dataset's second answer: 12 characters


def test_conversations_and_traces_split_over_worker_processes(server: BatchingServer, tmp_path: Path) -> None:
    out = tmp_path / "conv"
    assert bench(server.base_url, out, "--concurrency", "2", "--requests", "8", "--warmup", "0", "--turns", "2",
                 "--max-output-tokens", "2", "--workers", "2", "--prefix-tokens", "8",
                 "--prefixes", "2") == Exit.OK  # fmt: skip
    tags = [r["extra"]["bench"] for r in turns_of(out)]
    assert len(tags) == 8 and {t["worker"] for t in tags} == {0, 1}
    for conv in {t["conversation"] for t in tags}:  # a conversation's turns never span two processes
        assert len({t["worker"] for t in tags if t["conversation"] == conv}) == 1
    assert {t["user"] for t in tags} == {0, 1} and {t["prefix"] for t in tags} == {0, 1}  # users numbered across
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in MOONCAKE))
    out = tmp_path / "trace"
    assert bench(server.base_url, out, "--trace", str(trace), "--workers", "2", "--warmup", "0") == Exit.OK
    tags = [r["extra"]["bench"] for r in turns_of(out)]
    assert sorted(t["output_tokens"] for t in tags) == [3, 4, 5, 6, 7, 8] and {t["worker"] for t in tags} == {0, 1}


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--speedup", "2"], "needs --trace"),
        (["--prefixes", "2"], "needs --prefix-tokens"),
        (["--think-time", "1"], "needs --turns 2"),
        (["--trace", "T", "--concurrency", "2"], "--concurrency cannot go with --trace"),
        (["--trace", "T", "--turns", "2"], "--turns cannot go with --trace"),
        (["--dataset", "D", "--input-tokens", "5"], "a --dataset brings its own"),
        (["--input-tokens", "100:x"], "MEAN:STDDEV"),
        (["--turns", "0"], "1 or more"),
        (["--trace", "/nowhere/trace.jsonl"], "--trace: no file named"),
        (["--trace", "no-such-session"], "no session or file named"),
        (["--dataset", "/nowhere/d.json"], "cannot read the dataset"),
    ],
)
def test_flags_that_make_no_workload_are_one_sentence(
    flags: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(MOONCAKE[0]) + "\n")
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "hi"}\n')
    flags = [str(trace) if f == "T" else str(data) if f == "D" else f for f in flags]
    with pytest.raises(SystemExit) if "MEAN:STDDEV" in said or "1 or more" in said else contextlib.nullcontext():
        rc = main(["bench", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", *flags, "--out",
                   str(tmp_path / "o")])  # fmt: skip
        assert rc == Exit.USAGE
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_a_trace_file_that_does_not_read_stops_the_run_before_it_sends(tmp_path: Path, capsys) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b'\x1b[31mnot json\n{"timestamp": "soon"}\n')
    rc = main(["bench", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--trace", str(trace),
               "--out", str(tmp_path / "o")])  # fmt: skip
    assert rc == Exit.USAGE
    err = capsys.readouterr().err
    assert "no request in the trace" in err and "\x1b" not in err and "Traceback" not in err


def test_a_trace_with_some_bad_lines_runs_and_says_what_it_left_out(
    server: BatchingServer, tmp_path: Path, capsys
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(MOONCAKE[0]) + "\nnot json\n" + json.dumps(MOONCAKE[1]) + "\n")
    out = tmp_path / "run"
    assert bench(server.base_url, out, "--trace", str(trace), "--warmup", "0") == Exit.OK
    assert "skipped 1 line" in capsys.readouterr().err
    assert len(turns_of(out)) == 2
    assert summary_of(out)["workload"]["notes"]


def test_a_capacity_search_of_conversations_numbers_every_probe_s_requests_apart(
    server: BatchingServer, tmp_path: Path
) -> None:
    out = tmp_path / "cap"
    rc = bench(server.base_url, out, "--find-capacity", "--slo", "ttft_p90=5000ms", "--capacity-limit", "4",
               "--turns", "3", "--requests", "4", "--warmup", "0", "--max-output-tokens", "2")  # fmt: skip
    assert rc == Exit.OK
    tags = [r["extra"]["bench"] for r in turns_of(out)]
    indices = [t["index"] for t in tags]
    assert len(indices) == len(set(indices))  # no two probes share a request's number, so nor its prompt
    assert all(t["turns"] == 3 for t in tags) and len(tags) % 3 == 0


def test_a_failed_turn_ends_its_conversation_and_the_summary_says_so(tmp_path: Path, capsys) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    out = tmp_path / "run"
    rc = main(["bench", "-m", "compat:x", "--base-url", f"http://127.0.0.1:{port}/v1", "--concurrency", "2",
               "--requests", "6", "--warmup", "0", "--turns", "3", "--out", str(out)])  # fmt: skip
    assert rc == Exit.FAILED
    records = turns_of(out)
    assert len(records) == 2 and all(r["extra"]["bench"]["turn"] == 1 for r in records)  # no turn 2 sent
    assert summary_of(out)["details"][0]["conversations"] == {"conversations": 2, "cut_short": 2, "requests": 2}
    assert "2 of 2 cut short by a failed turn" in capsys.readouterr().out
