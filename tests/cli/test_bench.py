"""ttft bench against the simulated batching server: figures near the simulated truth, files, CLI."""

from __future__ import annotations

import csv
import json
import random
import socket
from pathlib import Path

import pytest
from ttft.backends.load.driver import LoadConfig
from ttft.backends.load.outcome import Progress
from ttft.backends.load.prompts import synthetic_prompt
from ttft.backends.load.runner import BackendSpec, LoadRunner, build_backend
from ttft.telemetry.bench.aggregate import aggregate_level
from ttft.telemetry.bench.requests import BenchTurn, read_bench
from ttft.telemetry.bench.slo import SLO
from ttft.tui.cli import main
from ttft.tui.commands.bench.output import ProgressLine
from ttft.tui.commands.exits import Exit

from tests.fakes.batching_server import BatchingServer

TOKENS = 12


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(scope="module")
def server() -> BatchingServer:
    with BatchingServer(slots=4, token_ms=10, alpha=0.3, prefill_ms=20) as srv:
        yield srv


def spec(srv: BatchingServer) -> BackendSpec:
    return BackendSpec("compat:batching-fake", srv.base_url)


def typed(records: list[dict]) -> list[BenchTurn]:
    """The run's records as aggregation reads them; every one the load driver wrote reads."""
    read = read_bench(records)
    assert read.unreadable == 0, read.message()
    return read.turns


async def run_levels(srv: BatchingServer, cfg: LoadConfig) -> list[dict]:
    out = []
    async with LoadRunner(cfg, spec=spec(srv), run_id="t") as runner:
        await runner.warmup()
        for i in range(len(cfg.levels)):
            res = await runner.level(i)
            out.append(aggregate_level(typed(res.records), level=res.level, mode=res.mode, client=res.client))
    return out


def test_synthetic_prompts_are_unique_repeatable_and_sized() -> None:
    a = synthetic_prompt(3, 200, seed=1)
    assert a == synthetic_prompt(3, 200, seed=1)
    assert a != synthetic_prompt(4, 200, seed=1)
    assert a.split()[:5] != synthetic_prompt(3, 200, seed=2).split()[:5]  # differ from the first word
    assert 180 <= len(a.split()) <= 210


@pytest.mark.parametrize("seed", range(40))
def test_prompt_words_are_random_choice_s_words(seed: int) -> None:
    """The one-call draw gives random.choice's words for the same generator, so a seed's prompts stay
    the same text as before (runs on several machines with a shared seed, older runs)."""
    from ttft.backends.load.prompts import _WORDS, draw_words

    for n in (1, 2, 7, 8, 9, 118, 500):
        rng = random.Random(f"ttft-bench-{seed}-{n}")
        expected = [rng.choice(_WORDS) for _ in range(n)]
        assert draw_words(random.Random(f"ttft-bench-{seed}-{n}"), n) == expected


async def test_levels_match_the_simulated_truth(server: BatchingServer) -> None:
    cfg = LoadConfig(levels=(1, 2, 4), requests=8, warmup=2, input_tokens=32, max_output_tokens=TOKENS)
    levels = await run_levels(server, cfg)
    for lv in levels:
        truth = server.expected(int(lv["level"]), TOKENS)
        assert lv["completed"] == 8 and lv["failed"] == 0
        # TPOT: the server's step grows with the streams active at that moment; a closed loop's users are
        # sometimes between requests (more so on a loaded machine), so the truth is a band from one
        # stream's step up to c streams' step. Widened for stamps late by a loaded scheduler.
        tpot = lv["tpot_ms"]["p50"]
        assert 0.8 * server.step_ms(1) <= tpot <= 1.35 * truth.tpot_ms + 2, lv["level"]
        # TTFT: loopback + a server thread sharing this process's GIL on 2 busy cores; a sanity bound only
        # (the server never answers before its prefill).
        assert truth.ttft_ms - 1 <= lv["ttft_ms"]["p50"] <= truth.ttft_ms + 250
        # Each request takes at least its simulated time, so a level cannot beat the truth by much (only
        # while fewer streams run than it assumes); a loaded client adds gaps between requests: a wide floor.
        assert 0.35 * truth.output_throughput <= lv["output_throughput"] <= 1.35 * truth.output_throughput
        assert lv["total_output_tokens"] == 8 * TOKENS  # from usage
        assert lv["token_source"] == "usage"
        assert lv["client"]["lag_samples"] > 0 and lv["client"]["cpu_percent"] >= 0
    tput = [lv["output_throughput"] for lv in levels]
    per_user = [lv["per_user_tokens_per_s"]["p50"] for lv in levels]
    # 1 user against 4: truth ~2.3x the throughput at half the speed each, a gap no load closes
    # (neighbouring levels differ by too little to order them on a loaded machine)
    assert tput[0] < tput[2], "batching must raise total throughput"
    assert per_user[0] > per_user[2], "and lower each user's speed"
    assert server.max_active <= 4


async def test_past_the_slots_the_wait_moves_into_ttft_and_goodput_drops(server: BatchingServer) -> None:
    cfg = LoadConfig(levels=(4, 8), requests=16, warmup=0, input_tokens=16, max_output_tokens=TOKENS)
    slo = SLO(ttft_ms=150)  # under one whole request's wait (~230 ms) for a slot; far above a prefill (20 ms)
    async with LoadRunner(cfg, spec=spec(server), run_id="t") as runner:
        four = await runner.level(0)
        eight = await runner.level(1)
    a4 = aggregate_level(typed(four.records), level=4, slo=slo)
    a8 = aggregate_level(typed(eight.records), level=8, slo=slo)
    e2e4 = server.expected(4, TOKENS).e2e_ms
    # At 8 users and 4 slots, half the requests wait one whole request for a slot.
    assert a8["ttft_ms"]["p90"] > a4["ttft_ms"]["p90"] + 0.6 * e2e4
    # slots are full either way (at 4 users a little less, between requests)
    assert a8["tpot_ms"]["p50"] == pytest.approx(a4["tpot_ms"]["p50"], rel=0.35)
    assert a4["good"] >= 10  # within the slots only a loaded machine makes a TTFT miss
    assert a8["good"] <= 11  # the queued ones (about 12 of 16) miss a 150 ms TTFT
    assert a8["goodput_fraction"] < a4["goodput_fraction"]


async def test_open_loop_follows_the_poisson_schedule(server: BatchingServer) -> None:
    # Requests of 12 tokens take >= 130 ms against a mean gap of 40 ms: a sender that waited for each answer
    # (a closed loop in disguise) would fall seconds behind the schedule and never overlap two requests.
    cfg = LoadConfig(
        mode="rate", levels=(25.0,), requests=30, warmup=0, input_tokens=16, max_output_tokens=TOKENS, seed=3
    )
    server.max_active = 0
    async with LoadRunner(cfg, spec=spec(server), run_id="t") as runner:
        res = await runner.level(0)
    assert len(res.records) == 30
    late = [r["extra"]["bench"]["sent_at_ms"] - r["extra"]["bench"]["scheduled_at_ms"] for r in res.records]
    assert min(late) > -1.0  # never early
    # On time: ~10 ms idle, ~40 ms with two busy loops beside it on 2 cores; a waiting sender is 1 s+ behind.
    assert sorted(late)[len(late) // 2] < 250.0
    assert server.max_active >= 2  # sends did not wait for answers
    assert res.client["send_late_ms"]["p50"] is not None
    a = aggregate_level(typed(res.records), level=25.0, mode="rate")
    assert a["vllm"]["request_rate"] == 25.0 and a["vllm"]["max_concurrency"] is None
    # ~16/s here (30 sends over ~1.2 s of schedule, plus the last answer); all at once would be 100+
    assert 4 < a["request_throughput"] < 60


async def test_a_refused_connection_is_counted_as_errors() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = LoadConfig(levels=(2,), requests=4, warmup=0, max_output_tokens=4)
    async with LoadRunner(cfg, spec=BackendSpec("compat:x", f"http://127.0.0.1:{port}/v1"), run_id="t") as runner:
        res = await runner.level(0)
    a = aggregate_level(typed(res.records), level=2, slo=SLO(ttft_ms=1000))
    assert a["failed"] == 4 and a["completed"] == 0 and a["good"] == 0
    assert sum(a["errors"].values()) == 4


def test_pool_is_widened_for_hundreds_of_streams(server: BatchingServer) -> None:
    backend = build_backend(spec(server), pool=600)
    assert backend.http.limits.max_connections >= 600  # type: ignore[attr-defined]


def test_cli_writes_turns_summary_csv_and_charts(server: BatchingServer, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    rc = main(
        [
            "bench", "-m", "compat:batching-fake", "--base-url", server.base_url,
            "--concurrency", "1,4", "--requests", "6", "--warmup", "1", "--input-tokens", "24",
            "--max-output-tokens", str(TOKENS), "--slo", "ttft=500ms,tpot=50ms,e2e=10s", "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr().out
    assert "c=1" in printed and "c=4" in printed and "TTFT p50" in printed
    assert "Batching trade-off" in printed and "Each user pays" in printed

    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 6 * 2 + 1
    assert all(t["schema"] == "ttft.turn/2" for t in turns)
    assert sum(1 for t in turns if t["extra"]["bench"]["warmup"]) == 1
    prompts = [t["prompt"] for t in turns]
    assert len(set(prompts)) == len(prompts)  # unique, so no prefix cache hides prefill

    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "ttft.bench/1" and len(summary["levels"]) == 2
    for key in ("request_throughput", "output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
                "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms",
                "p99_e2el_ms", "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                "request_goodput"):  # fmt: skip
        assert key in summary["levels"][0], key
    assert summary["levels"][1]["max_concurrency"] == 4
    assert summary["conclusion"]

    rows = list(csv.DictReader((out / "levels.csv").open()))
    assert [r["level"] for r in rows] == ["1", "4"]  # whole users, not 1.0
    assert float(rows[1]["output_throughput"]) > float(rows[0]["output_throughput"])
    tradeoff = (out / "tradeoff.svg").read_text()
    assert tradeoff.startswith("<svg") and "c=1" in tradeoff and "c=4" in tradeoff
    assert (out / "ttft.svg").read_text().startswith("<svg")


def test_cli_with_two_worker_processes(server: BatchingServer, tmp_path: Path) -> None:
    out = tmp_path / "w2"
    rc = main(
        [
            "bench", "-m", "compat:batching-fake", "--base-url", server.base_url, "--concurrency", "4",
            "--requests", "8", "--warmup", "0", "--max-output-tokens", "6", "--workers", "2", "--out", str(out),
            "--quiet",
        ]
    )  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 8 and summary["failed"] == 0
    detail = summary["details"][0]
    assert detail["client"]["workers"] == 2 and len(detail["client"]["per_worker"]) == 2
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert {t["extra"]["bench"]["worker"] for t in turns} == {0, 1}
    assert {t["extra"]["bench"]["level"] for t in turns} == {4.0}


def test_a_run_whose_warm_up_all_failed_stops_with_the_error(tmp_path: Path, capsys) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    args = ["bench", "-m", "compat:x", "--base-url", f"http://127.0.0.1:{port}/v1", "--concurrency", "1"]
    rc = main([*args, "--requests", "2", "--warmup", "2", "--out", str(tmp_path / "run")])
    assert rc == Exit.FAILED
    err = capsys.readouterr().err
    assert "every warm-up request failed: " in err and "None" not in err  # the error's own words
    assert len((tmp_path / "run" / "turns.jsonl").read_text().splitlines()) == 2  # the warm-ups are kept


def test_bad_slo_exits_2(capsys) -> None:
    assert main(["bench", "-m", "compat:x", "--slo", "speed=fast"]) == 2
    assert "ttft=500ms" in capsys.readouterr().err


def test_cli_open_loop_rates(server: BatchingServer, tmp_path: Path, capsys) -> None:
    out = tmp_path / "rate"
    rc = main(
        [
            "bench", "-m", "compat:batching-fake", "--base-url", server.base_url, "--rate", "10,20",
            "--requests", "10", "--warmup", "0", "--max-output-tokens", "4", "--seed", "5", "--out", str(out),
            "--quiet",
        ]
    )  # fmt: skip
    assert rc == 0
    assert "10/s" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert [lv["request_rate"] for lv in summary["levels"]] == [10.0, 20.0]
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert all("scheduled_at_ms" in t["extra"]["bench"] for t in turns)


def test_the_progress_line_reports_a_finished_batch_once(capsys: pytest.CaptureFixture[str]) -> None:
    # With --workers 2 each worker reports the batch's end: one line, with its TTFT, not a second
    # one at a lower tok/s without it.
    line = ProgressLine(quiet=False)
    line.tty = False
    for elapsed, ttft in ((0.5, 37.0), (0.6, None), (0.7, None)):
        line(Progress("concurrency", 2, -1, 1, 2, 2, 0, -1, elapsed, warmup=True, last_ttft_ms=ttft, output_tokens=16))
    line(Progress("concurrency", 4, 0, 1, 8, 8, 0, -1, 0.5, output_tokens=64))
    line(Progress("concurrency", 4, 0, 1, 8, 8, 0, -1, 0.9, output_tokens=64))
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "[warm-up] 2/2 done, 0 errors, 32 tok/s, last TTFT 37 ms, 0.5 s",
        "[c=4 level 1/1] 8/8 done, 0 errors, 128 tok/s, 0.5 s",
    ]


def test_a_workers_summary_names_the_model_that_answered(tmp_path: Path) -> None:
    # With --workers the parent builds no backend; summary.json and the chart's title still name
    # the provider, API and model, as a one-process run does.
    with BatchingServer(slots=4, token_ms=2, alpha=0.1, prefill_ms=5) as srv:
        out = tmp_path / "w"
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--concurrency", "2",
                "--requests", "4", "--warmup", "0", "--workers", "2", "--max-output-tokens", "4", "--out", str(out),
                "-q",
            ]
        )  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["provider"], summary["api"], summary["model"]) == ("compat", "chat.completions", "batching-fake")
    assert "Batching trade-off: batching-fake" in (out / "tradeoff.svg").read_text()
