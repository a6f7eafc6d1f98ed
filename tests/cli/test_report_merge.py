"""ttft report --merge: bench runs made at once on several machines read as one load (telemetry.bench.merge)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from ttft.telemetry.bench.merge import MergeRefused, merge, merged_levels, split_runs
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.batching_server import BatchingServer
from tests.support.paths import ROOT
from tests.telemetry.bench.test_aggregate import rec, typed

BENCH = ["-m", "compat:batching-fake", "--concurrency", "2,3", "--requests", "6", "--warmup", "1"]
BENCH += ["--input-tokens", "16", "--max-output-tokens", "4", "--quiet"]


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two bench runs started together as two processes (two machines' clients), and a third run after them."""
    tmp = tmp_path_factory.mktemp("merge")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(tmp / "data")}
    with BatchingServer(slots=8, token_ms=10, alpha=0.1, prefill_ms=10) as srv:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ttft.tui.cli",
                    "bench",
                    *BENCH,
                    "--base-url",
                    srv.base_url,
                    *seed_out(seed, tmp / name),
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for seed, name in ((1, "m1"), (2, "m2"))
        ]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
        # the third starts once both have finished: it cannot overlap them
        assert main(["bench", *BENCH, "--base-url", srv.base_url, "--seed", "3", "--out", str(tmp / "later")]) == 0
    return {name: tmp / name for name in ("m1", "m2", "later")}


def seed_out(seed: int, out: Path) -> list[str]:
    return ["--seed", str(seed), "--out", str(out)]


def lines(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "turns.jsonl").read_text().splitlines()]


def wall_ms(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp() * 1000


def report_json(capsys: pytest.CaptureFixture[str], *files: Path) -> tuple[int, dict, str]:
    rc = main(["report", "--merge", *map(str, files), "--json"])
    out = capsys.readouterr()
    return rc, (json.loads(out.out) if out.out.strip() else {}), out.err


def test_merged_levels_are_the_union_of_the_runs_levels(runs: dict[str, Path], capsys) -> None:
    rc, data, err = report_json(capsys, runs["m1"], runs["m2"])
    assert rc == Exit.OK, err
    (bench,) = data["benches"]
    ids = [json.loads((runs[m] / "summary.json").read_text())["run_id"] for m in ("m1", "m2")]
    assert bench["merged_from"] == ids
    records = lines(runs["m1"]) + lines(runs["m2"])
    levels = bench["levels"]
    assert [lv["level"] for lv in levels] == [4, 6]  # 2 + 2 and 3 + 3 concurrent users
    summaries = [json.loads((runs[m] / "summary.json").read_text()) for m in ("m1", "m2")]
    for k, (lv, own) in enumerate(zip(levels, (2.0, 3.0), strict=True)):
        # the client column: the worse machine's event-loop lag, from the runs' summaries
        lags = [s["details"][k]["client"]["loop_lag_ms"]["p99"] for s in summaries]
        assert lv["client"]["machines"] == 2 and lv["client"]["loop_lag_ms"]["p99"] == max(lags)
        union = [r for r in records if r["extra"]["bench"]["level"] == own and not r["extra"]["bench"]["warmup"]]
        assert lv["requests"] == len(union) == 12 and lv["merged_from"] == ids
        assert [p["requests"] for p in lv["runs"]] == [6, 6]
        ok = [r for r in union if r["status"] == "ok"]
        for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
            values = [r["metrics"][key] for r in ok if r["metrics"][key] is not None]
            want = np.percentile(values, [50, 90, 99])
            got = [lv[key][p] for p in ("p50", "p90", "p99")]
            assert got == pytest.approx(want, rel=1e-9), key
        # throughput over the union's wall-clock span: earliest send to latest end
        start = min(wall_ms(r["sent_at"]) for r in union)
        end = max(wall_ms(r["sent_at"]) + r["events_ms"]["end"] for r in union)
        tokens = sum(r["tokens"]["output"] for r in ok)
        # (to a microsecond: epoch milliseconds as floats here carry ~0.2 us of rounding)
        assert lv["duration_s"] == pytest.approx((end - start) / 1000, abs=1e-6)
        assert lv["output_throughput"] == pytest.approx(tokens / ((end - start) / 1000), rel=1e-4)
        # the warning says whether the runs overlapped, as their records show
        spans = [
            (min(wall_ms(r["sent_at"]) for r in rs), max(wall_ms(r["sent_at"]) + r["events_ms"]["end"] for r in rs))
            for rs in ([r for r in union if r["session_id"] == i] for i in ids)
        ]
        common = min(e for _, e in spans) - max(s for s, _ in spans)
        shared = max(0.0, common) / min(e - s for s, e in spans)
        assert lv["overlap"] == pytest.approx(min(shared, 1.0), abs=1e-4)
    warned = "did not run level" in err
    assert warned == any(lv["overlap"] < 0.8 for lv in levels)


def test_merged_report_prints_the_tables_with_the_summed_levels(runs: dict[str, Path], tmp_path: Path, capsys) -> None:
    page = tmp_path / "merged.html"
    files = [str(runs["m1"]), str(runs["m2"] / "turns.jsonl")]
    assert main(["report", "--merge", *files, "--width", "60", "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "== bench: batching-fake (merged from 2 runs) ==" in out and "merged from runs bench-" in out
    assert "c=4" in out and "c=6" in out and "Batching trade-off" in out
    html = page.read_text()
    assert "batching-fake (merged from 2 runs)" in html and "c=6" in html


def test_runs_that_did_not_overlap_warn(runs: dict[str, Path], capsys) -> None:
    rc, data, err = report_json(capsys, runs["m1"], runs["later"])
    assert rc == Exit.OK
    assert "warning: the runs did not run levels 1 (c=4: 0% in common), 2 (c=6: 0% in common)" in err
    assert [lv["overlap"] for lv in data["benches"][0]["levels"]] == [0.0, 0.0]


def test_the_same_run_twice_is_counted_once(runs: dict[str, Path], capsys) -> None:
    rc, data, err = report_json(capsys, runs["m1"], runs["m2"], runs["m1"] / "turns.jsonl")
    assert rc == Exit.OK
    assert "was given twice" in err and "counted once" in err
    assert [lv["requests"] for lv in data["benches"][0]["levels"]] == [12, 12]


def _copy(src: Path, dst: Path, edit) -> Path:
    dst.mkdir()
    kept = [r for r in map(edit, lines(src)) if r is not None]
    (dst / "turns.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    return dst


def test_a_different_model_refuses_with_exit_2(runs: dict[str, Path], tmp_path: Path, capsys) -> None:
    # from disk, so untrusted: its control characters are shown, never sent to the terminal
    other = _copy(runs["m2"], tmp_path / "other", lambda r: {**r, "model": "other-model\x1b]0;x\x07"})
    rc, data, err = report_json(capsys, runs["m1"], other)
    assert rc == Exit.USAGE and data == {}
    assert "cannot merge" in err and "model:" in err and "other-model" in err and "batching-fake" in err
    assert "\x1b" not in err and "\x07" not in err and "Traceback" not in err


def test_a_different_base_url_is_named_without_its_credentials(runs: dict[str, Path], tmp_path: Path, capsys) -> None:
    hostile = "http://user:s3cret@10.0.0.9:8000/v1?key=k3y"
    other = _copy(runs["m2"], tmp_path / "other", lambda r: {**r, "base_url": hostile})
    rc, _, err = report_json(capsys, runs["m1"], other)
    assert rc == Exit.USAGE and "base URL:" in err and "10.0.0.9" in err
    assert "s3cret" not in err and "k3y" not in err


def test_a_run_with_fewer_levels_merges_the_common_ones(runs: dict[str, Path], tmp_path: Path, capsys) -> None:
    short = _copy(runs["m2"], tmp_path / "short", lambda r: r if r["extra"]["bench"]["level"] == 2.0 else None)
    rc, data, err = report_json(capsys, runs["m1"], short)
    assert rc == Exit.OK
    assert [lv["level"] for lv in data["benches"][0]["levels"]] == [4]
    assert "left out level 2 (c=3) of run" in err and "the other runs have 1 level" in err


def test_a_summary_alone_or_one_run_refuses(runs: dict[str, Path], capsys) -> None:
    rc, _, err = report_json(capsys, runs["m1"] / "summary.json", runs["m2"])
    assert rc == Exit.USAGE and "holds no requests" in err
    rc, _, err = report_json(capsys, runs["m1"], runs["m1"])
    assert rc == Exit.USAGE and "at least two different bench runs" in err


# --- the merge itself, on hand-made records with known wall clocks ------------------------------
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def wall(run_id: str, offset_s: float, *, level: float = 2, model: str = "m", rate: bool = False) -> list[dict]:
    """Four requests of one run, sent 100 ms apart from ``offset_s`` on the wall clock."""
    out = []
    for i in range(4):
        r = rec(sent_at=i * 100.0, ttft=20, tokens=5, tpot=10, level=level)
        r["sent_at"] = (T0 + timedelta(seconds=offset_s, milliseconds=i * 100)).isoformat()
        r["model"], r["session_id"] = model, run_id
        r["extra"]["bench"] |= {"run_id": run_id, "mode": "rate" if rate else "concurrency"}
        out.append(r)
    return out


def test_overlap_and_span_come_from_the_wall_clock() -> None:
    # each run spans 0.36 s; b starts 0.05 s after a: 0.31 s in common, 86% of the shortest
    a, b = split_runs("a", typed(wall("a", 0))), split_runs("b", typed(wall("b", 0.05, level=3)))
    m = merge(a + b)
    (lv,) = merged_levels(m)
    assert lv["level"] == 5 and lv["requests"] == 8 and not m.warnings
    assert lv["overlap"] == pytest.approx(0.31 / 0.36)
    assert lv["duration_s"] == pytest.approx(0.41)  # 0 -> 0.05 + 0.36
    assert lv["output_throughput"] == pytest.approx(40 / 0.41)
    late = merge(a + split_runs("c", typed(wall("c", 0.2))))  # 0.16 s in common: 44%
    assert late.warnings and "1 (c=4: 44% in common)" in late.warnings[0]


def test_rates_add_up_and_modes_must_match() -> None:
    a, b = split_runs("a", typed(wall("a", 0, level=5, rate=True))), split_runs("b", typed(wall("b", 0, level=2.5)))
    with pytest.raises(MergeRefused, match=r"mode: run a .* rate, run b .* concurrency"):
        merge(a + b)
    c = split_runs("c", typed(wall("c", 0, level=2.5, rate=True)))
    assert merged_levels(merge(a + c))[0]["level"] == 7.5


def test_input_tokens_from_the_summaries_must_match() -> None:
    a = split_runs("a", typed(wall("a", 0)), {"a": {"input_tokens": 100}})
    b = split_runs("b", typed(wall("b", 0)), {"b": {"input_tokens": 200}})
    with pytest.raises(MergeRefused, match=r"input tokens: run a \(a\) 100, run b \(b\) 200"):
        merge(a + b)
    unknown = merge(a + split_runs("c", typed(wall("c", 0))))
    assert any("input tokens not checked for run c" in n for n in unknown.notes)


def test_two_runs_that_drew_the_same_id_both_count() -> None:
    a, b = split_runs("m1", typed(wall("x", 0))), split_runs("m2", typed(wall("x", 0.01)))
    m = merge(a + b + a)
    assert merged_levels(m)[0]["requests"] == 8
    assert any("share a run id but not their requests" in n for n in m.notes)
    assert any("given twice (m1, m1)" in n for n in m.notes)


def test_the_client_column_is_the_worst_machine() -> None:
    lagging = {"details": [{"client": {"loop_lag_ms": {"p99": 12.0}, "cpu_percent": 40.0}}]}
    idle = {"details": [{"client": {"loop_lag_ms": {"p99": 0.5}, "cpu_percent": 95.0, "host_cpu_percent": "x"}}]}
    runs = split_runs("a", typed(wall("a", 0)), {"a": lagging}) + split_runs("b", typed(wall("b", 0)), {"b": idle})
    (lv,) = merged_levels(merge(runs))
    assert lv["client"] == {"loop_lag_ms": {"p99": 12.0}, "machines": 2, "cpu_percent": 95.0}
    assert lv["client_bottleneck"].startswith("client-bound: event-loop lag p99 12.0 ms")


def test_a_run_of_warm_ups_alone_refuses() -> None:
    warm = typed(wall("w", 0))
    warm = [replace(t, bench=replace(t.bench, warmup=True)) for t in warm]
    with pytest.raises(MergeRefused, match=r"run w \(w\) has no measured requests"):
        merge(split_runs("a", typed(wall("a", 0))) + split_runs("w", warm))


def test_one_concatenated_file_holds_several_runs() -> None:
    runs = split_runs("all.jsonl", typed(wall("a", 0) + wall("b", 0)))
    assert [r.run_id for r in runs] == ["a", "b"]
    assert merge(runs).merged_from == ["a", "b"]
