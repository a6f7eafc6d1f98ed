"""``ttft bench --find-capacity``: objectives, the interval's verdicts, the search, the knee, and a
run against the batching fake whose true capacity follows from its parameters."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.load.capacity import find_capacity
from ttft.backends.load.driver import LoadConfig
from ttft.backends.load.outcome import LevelResult
from ttft.telemetry.bench import capacity as cap
from ttft.telemetry.bench.requests import BenchTurn
from ttft.tui.cli import main

from tests.fakes.batching_server import BatchingServer, free_port, wait_http
from tests.support.paths import ROOT


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def rec_dict(ttft: float | None = 100.0, tpot: float | None = 20.0, status: str = "ok") -> dict[str, Any]:
    metrics = {"ttft_ms": ttft, "tpot_ms": tpot, "e2e_ms": None}
    return {"turn_index": 0, "status": status, "metrics": metrics, "extra": {"bench": {}}}


def rec(ttft: float | None = 100.0, tpot: float | None = 20.0, status: str = "ok") -> BenchTurn:
    return BenchTurn.from_dict(rec_dict(ttft, tpot, status))


# --- objectives -----------------------------------------------------------------------
def test_objectives_take_a_percentile_or_the_attainment() -> None:
    o = cap.Objectives.parse("ttft_p90=500ms, tpot_p99=50ms,e2e=10s", attainment=0.8)
    assert [(t.metric, t.bound_ms, t.target) for t in o.terms] == [
        ("ttft", 500, 0.9), ("tpot", 50, 0.99), ("e2e", 10_000, 0.8),
    ]  # fmt: skip
    assert o.describe() == "p90 TTFT <= 500 ms, p99 TPOT <= 50 ms, p80 E2E <= 10000 ms"
    assert o.slo().ttft_ms == 500 and o.slo().tpot_ms == 50 and o.slo().e2e_ms == 10_000
    for bad in ("speed_p90=1ms", "ttft_p0=1ms", "ttft_p90", "", "ttft_p90=fast"):
        with pytest.raises(ValueError):
            cap.Objectives.parse(bad)


def test_goodput_slo_accepts_the_percentile_form_too() -> None:
    from ttft.telemetry.bench.slo import SLO

    assert SLO.parse("ttft_p90=500ms,tpot=50ms") == SLO(500, 50, None)


def test_an_error_misses_every_objective_and_one_token_misses_no_tpot() -> None:
    ttft, tpot = cap.Objectives.parse("ttft=500ms,tpot=50ms").terms
    assert not ttft.met(rec(status="error").record) and not tpot.met(rec(status="error").record)
    assert tpot.met(rec(tpot=None).record) and not ttft.met(rec(ttft=None, tpot=None).record)
    assert ttft.met(rec(ttft=500).record) and not ttft.met(rec(ttft=500.1).record)


def test_wilson_interval_and_the_requests_a_pass_needs() -> None:
    low, high = cap.wilson(90, 100)
    assert 0.82 < low < 0.83 and 0.94 < high < 0.95  # the textbook values for 90/100
    for target in (0.5, 0.9, 0.95, 0.99):
        n = cap.requests_to_pass(target)
        assert cap.wilson(n, n)[0] >= target > cap.wilson(n - 1, n - 1)[0]


def test_judge_passes_fails_and_cannot_decide() -> None:
    o = cap.Objectives.parse("ttft_p90=500ms")
    assert cap.judge([rec()] * 40, o, 4).verdict == "pass"
    assert cap.judge([rec()] * 20, o, 4).verdict == "undecided"  # too few requests to clear 90 %
    assert cap.judge([rec(ttft=900)] * 10 + [rec()] * 30, o, 4).verdict == "fail"  # 75 %, firmly under
    near = cap.judge([rec(ttft=900)] * 4 + [rec()] * 36, o, 4)  # 90 % exactly: the interval straddles
    assert near.verdict == "undecided"
    term = near.terms[0]
    assert term.met == 36 and term.low < 0.9 < term.high and term.observed_ms == 100
    assert cap.judge([rec(ttft=900)] * 10 + [rec(status="error")] * 30, o, 4).terms[0].observed_ms is None


# --- the search --------------------------------------------------------------------------
def drive(search: cap.Search, truth: float) -> list[float]:
    seen = []
    while (lv := search.next_level()) is not None:
        seen.append(lv)
        search.record(lv, "pass" if lv <= truth else "fail")
    return seen


def test_search_doubles_then_bisects_to_ten_percent_or_one_user() -> None:
    s = cap.Search(start=1)
    assert drive(s, 13) == [1, 2, 4, 8, 16, 12, 14]  # 12..14 is within 10 % of 12, rounded up to 2 users
    assert s.passed == 12 and s.missed == 14 and s.step() == 2
    small = cap.Search(start=1)
    assert drive(small, 5) == [1, 2, 4, 8, 6, 5] and small.passed == 5 and small.missed == 6


@pytest.mark.parametrize("truth", [1, 3, 7, 24, 100, 333])
def test_search_lands_within_its_step_of_any_truth(truth: int) -> None:
    s = cap.Search(start=1)
    drive(s, truth)
    assert s.passed is not None and s.missed is not None
    assert s.passed <= truth < s.missed and s.missed - s.passed <= s.step()


def test_search_says_nothing_is_carried_or_stops_at_its_limit() -> None:
    none = cap.Search(start=4)
    assert drive(none, 2) == [4] and none.passed is None
    capped = cap.Search(start=1, limit=64)
    drive(capped, 10_000)
    assert capped.passed == 64 and capped.missed is None


def test_rate_search_bisects_to_ten_percent() -> None:
    s = cap.Search(start=1.0, integer=False)
    drive(s, 5.3)
    assert s.passed is not None and s.missed is not None
    assert s.passed <= 5.3 < s.missed and s.missed - s.passed <= 0.1 * s.passed


def test_knee_of_a_saturating_throughput() -> None:
    pts = [(1, 100), (2, 200), (4, 400), (8, 800), (16, 820), (32, 830)]
    assert cap.knee(pts) == cap.Knee(8, 800, 830)
    assert cap.knee([(1, 100), (2, 200), (4, 400), (8, 800), (16, 1600)]) is None  # still linear
    assert cap.knee(pts[:3]) is None  # too few points to fit two lines
    # concave but still growing by half again past the steepest bend: not a knee there
    assert cap.knee([(1, 160), (2, 268), (4, 325), (8, 344), (12, 395), (16, 425)]) is None


def test_conclusion_in_plain_words() -> None:
    o = cap.Objectives.parse("tpot_p90=50ms")
    text = cap.conclusion(
        24, mode="concurrency", objectives=o, goodput=3.1, knee_at=cap.Knee(32, 900, 945), undecided=[], start=1,
        limit_reached=False,
    )  # fmt: skip
    assert text == (
        "This server carries 24 concurrent users at p90 TPOT <= 50 ms (goodput 3.1 req/s). Past 32 users, "
        "total throughput stops growing (900 tokens/s there, at most 5% more beyond) while each user's speed "
        "keeps falling."
    )
    none = cap.conclusion(
        None, mode="rate", objectives=o, goodput=None, knee_at=None, undecided=[2.0], start=1, limit_reached=False
    )
    assert none.startswith("This server does not carry even 1 requests/s") and "could not decide at 2" in none


# --- the driver, on a scripted runner ----------------------------------------------------------
class ScriptedRunner:
    """Runs no HTTP: every level up to 5 meets the bound, 6 sits exactly on the 90 % target, more misses."""

    def __init__(self) -> None:
        self.cfg = LoadConfig()
        self.calls: list[tuple[float, int, int]] = []

    async def probe(self, level: float, *, requests: int, level_index: int, start_index: int) -> LevelResult:
        self.calls.append((level, requests, start_index))
        if level <= 5:
            recs = [rec_dict() for _ in range(requests)]
        elif level == 6:
            recs = [rec_dict(ttft=900) if i % 10 == 0 else rec_dict() for i in range(requests)]
        else:
            recs = [rec_dict(ttft=900) for _ in range(requests)]
        for i, r in enumerate(recs):
            r["extra"]["bench"] = {"index": start_index + i, "sent_at_ms": float(i), "level": level}
        return LevelResult("concurrency", level, recs, {}, 0.5)


async def test_an_undecided_probe_grows_then_counts_as_a_miss_and_is_reported() -> None:
    runner = ScriptedRunner()
    objectives = cap.Objectives.parse("ttft_p90=500ms")
    run = await find_capacity(runner, objectives, start=1, limit=64, requests=10)  # type: ignore[arg-type]
    assert run.capacity == 5
    at6 = [c for c in runner.calls if c[0] == 6]
    assert [c[1] for c in at6] == [35, 35, 70, 140]  # doubling the requests behind it, up to 8x the first batch
    starts = [c[2] for c in runner.calls]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)  # every prompt unique across the run
    s = run.summary()
    assert s["undecided"] == [6] and s["capacity"] == 5 and s["first_miss"] == 6
    assert "could not decide at 6" in s["conclusion"]
    probe6 = next(p for p in s["probes"] if p["level"] == 6)
    assert probe6["verdict"] == "undecided" and probe6["requests"] == 280
    assert run.probes[[p.level for p in run.probes].index(6)].aggregate["requests"] == 280


# --- against the batching fake ------------------------------------------------------------------
@contextlib.contextmanager
def fake_process(**params: float) -> Iterator[str]:
    """The batching fake in its own process (so its timing does not share this one's GIL); its base URL."""
    port = free_port()
    args = [f"--{k.replace('_', '-')}={v:g}" for k, v in params.items()]
    srv = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.batching_server", "--port", str(port), *args],
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/health")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        srv.terminate()
        srv.wait(5)


def test_find_capacity_on_the_batching_fake_lands_within_one_step_of_its_truth(tmp_path: Path, capsys) -> None:
    bound = 21.0
    params = {"slots": 1000, "token_ms": 4, "alpha": 0.5, "prefill_ms": 10}
    model = BatchingServer(slots=1000, token_ms=4, alpha=0.5, prefill_ms=10)  # its schedule, not started
    truth = max(c for c in range(1, 200) if model.step_ms(c) <= bound)  # TPOT = 4 * (1 + 0.5 (c - 1)): 9
    out = tmp_path / "cap"
    with fake_process(**params) as base_url:
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", base_url, "--find-capacity",
                "--slo", f"tpot_p90={bound:g}ms", "--max-output-tokens", "12", "--requests", "8", "--warmup", "1",
                "--out", str(out), "--quiet",
            ]
        )  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    c = summary["capacity"]
    assert abs(c["capacity"] - truth) <= c["resolution"] == 1, (c["capacity"], truth)
    assert c["first_miss"] > c["capacity"] and c["objectives"] == [{"metric": "tpot", "bound_ms": bound, "target": 0.9}]
    assert c["capacity_goodput"] > 0
    assert f"carries {int(c['capacity'])} concurrent users at p90 TPOT <= 21 ms" in c["conclusion"]
    assert c["conclusion"] in printed and "PASS: p90 TPOT" in printed and "FAIL: p90 TPOT" in printed
    assert [lv["level"] for lv in summary["levels"]] == sorted(p["level"] for p in c["probes"])
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 1 + sum(p["requests"] for p in c["probes"])
    assert len({t["prompt"] for t in turns}) == len(turns)
    svg = (out / "tradeoff.svg").read_text()
    assert "SLO: p90 TPOT &lt;= 21 ms" in svg and f"capacity c={int(c['capacity'])}" in svg
    # ttft report reads the folder back: the answer, and the objective on its chart
    assert main(["report", str(out), "--svg", str(tmp_path / "charts")]) == 0
    assert c["conclusion"] in capsys.readouterr().out
    assert "SLO: p90 TPOT" in (tmp_path / "charts" / "tradeoff.svg").read_text()


def test_find_capacity_in_rate_mode(tmp_path: Path) -> None:
    out = tmp_path / "rate"
    with fake_process(slots=1, token_ms=2, alpha=0, prefill_ms=5) as base_url:
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", base_url, "--find-capacity", "--rate", "10",
                "--slo", "ttft_p90=150ms", "--max-output-tokens", "4", "--requests", "8", "--warmup", "1",
                "--capacity-limit", "640", "--out", str(out), "--quiet",
            ]
        )  # fmt: skip
    assert rc == 0
    c = json.loads((out / "summary.json").read_text())["capacity"]
    assert c["mode"] == "rate" and c["probes"][0]["level"] == 10
    # one slot serving ~11 ms requests queues past 150 ms well before 640/s (about 90/s at most)
    assert c["capacity"] is not None and 10 <= c["capacity"] < 640 and c["first_miss"] is not None
    assert "requests/s at p90 TTFT <= 150 ms" in c["conclusion"]


def test_find_capacity_needs_objectives(capsys) -> None:
    assert main(["bench", "-m", "compat:x", "--find-capacity"]) == 2
    assert "--slo" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["bench", "-m", "compat:x", "--find-capacity", "--slo", "ttft_p90=1ms", "--attainment", "120"])
    assert exc.value.code == 2 and "attainment must be between" in capsys.readouterr().err


def test_attainment_with_a_percent_sign_is_always_a_percentage() -> None:
    import argparse

    from ttft.tui.commands.bench.capacity import attainment

    assert attainment("95") == attainment("95%") == attainment("0.95") == 0.95
    assert attainment("1%") == pytest.approx(0.01)  # not 1.0, which was refused
    assert attainment("0.5%") == pytest.approx(0.005)  # not 50%
    for bad in ("100", "100%", "0", "0%", "fast", "nan"):
        with pytest.raises(argparse.ArgumentTypeError):
            attainment(bad)


@pytest.mark.parametrize(
    "flag", [["--capacity-limit", "0"], ["--capacity-limit", "nan"], ["--probe-max-requests", "0"]]
)
def test_a_search_bound_that_allows_no_probe_is_refused(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "bench",
                "-m",
                "compat:x",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--find-capacity",
                "--slo",
                "ttft=1s",
                *flag,
            ]
        )
    assert exit_.value.code == 2
    assert flag[0] in capsys.readouterr().err


def test_the_progress_line_counts_the_search_s_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The search's probes are numbered as batches, never as levels out of the one starting level
    # (no "[c=1 level 2/1]").
    with BatchingServer(slots=1000, token_ms=4, alpha=0.5, prefill_ms=10) as srv:
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--find-capacity",
                "--slo", "tpot_p90=9ms", "--max-output-tokens", "6", "--warmup", "1", "--out", str(tmp_path / "cap"),
            ]
        )  # fmt: skip
    assert rc == 0
    err = capsys.readouterr().err
    for done, total in re.findall(r"level (\d+)/(\d+)\]", err):
        assert int(done) <= int(total), err
    batches = [int(n) for n in re.findall(r"probe batch (\d+)\]", err)]
    assert batches and batches == sorted(batches) and len(batches) >= 2, err
