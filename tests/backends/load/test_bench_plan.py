"""backends.load.plan and backends.load.bench: a plan built without argparse, run by run_bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ttft.backends.load.bench import BenchAbort, run_bench
from ttft.backends.load.plan import BenchPlan, Level, Rate, Speedup, Users

from tests.fakes.batching_server import BatchingServer


def test_a_level_is_tagged_and_converts_to_the_drivers_mode() -> None:
    assert [Level.of(m, 2.0) for m in ("concurrency", "rate", "trace")] == [Users(2.0), Rate(2.0), Speedup(2.0)]
    assert Users(2.0) != Rate(2.0)  # the same number, another load
    plan = BenchPlan.of("compat:m", levels=(Rate(1.0), Rate(4.0)), requests=3, seed=5, run_id="r")
    assert (plan.mode, plan.load.levels, plan.levels) == ("rate", (1.0, 4.0), (Rate(1.0), Rate(4.0)))
    assert (plan.load.requests, plan.load.seed, plan.out) == (3, 5, Path("ttft-r"))
    with pytest.raises(ValueError, match="one kind"):
        BenchPlan.of("compat:m", levels=(Users(1), Rate(1)))
    with pytest.raises(AttributeError):
        plan.spec = "other"  # type: ignore[misc]  # frozen


async def test_run_bench_runs_a_plan_and_shows_each_level(tmp_path: Path) -> None:
    with BatchingServer(slots=2, token_ms=2, alpha=0.3, prefill_ms=5) as srv:
        plan = BenchPlan.of(
            "compat:batching-fake",
            base_url=srv.base_url,
            levels=(Users(1), Users(2)),
            requests=4,
            warmup=1,
            input_tokens=16,
            max_output_tokens=8,
            out=tmp_path / "run",
        )
        shown: list[float] = []
        result = await run_bench(plan, on_level=lambda a: shown.append(a["level"]))
    assert shown == [1.0, 2.0]
    assert [lv["completed"] for lv in result.levels] == [4, 4]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["mode"] == "concurrency" and summary == json.loads(json.dumps(result.summary, default=str))
    turns = (tmp_path / "run" / "turns.jsonl").read_text().splitlines()
    assert len(turns) == 1 + 8  # the warm-up, then each level's requests
    assert (tmp_path / "run" / "levels.csv").read_text().count("\n") == 3 and result.unsaved == []


async def test_a_folder_that_cannot_be_made_is_an_abort_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    plan = BenchPlan.of("compat:m", base_url="http://127.0.0.1:9/v1", out=tmp_path / "file" / "run")
    with pytest.raises(BenchAbort) as caught:
        await run_bench(plan)
    assert caught.value.outcome == "not_saved" and "cannot write the results" in str(caught.value)
