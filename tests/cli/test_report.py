"""ttft report: reads session logs, comparison logs and bench results; prints tables and charts; writes files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ttft.telemetry.bench import aggregate as agg
from ttft.telemetry.bench.requests import group_levels
from ttft.telemetry.bench.summary import summary
from ttft.telemetry.log.turns import SessionLog
from ttft.telemetry.record import TurnRecord
from ttft.tui.cli import main
from ttft.tui.report.figures import hist_chart, timeline_chart, tradeoff_chart

from tests.support.turns import play, recorder, stream
from tests.telemetry.bench.test_aggregate import rec, typed


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def bench_dir(tmp_path: Path) -> Path:
    """A bench folder as ttft bench leaves it: turns.jsonl + summary.json (two levels)."""
    out = tmp_path / "bench"
    out.mkdir()
    turns = [rec(sent_at=i * 100.0, ttft=30, tokens=10, tpot=10, level=1) for i in range(6)]
    turns += [rec(sent_at=(i // 4) * 100.0, ttft=60, tokens=10, tpot=25, level=4) for i in range(12)]
    levels = [agg.aggregate_level(rs, level=lv, mode=m) for m, lv, rs in group_levels(typed(turns))]
    (out / "turns.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    (out / "summary.json").write_text(json.dumps(summary(levels, meta={"model": "fake-model"}), default=str))
    return out


def session_log(tmp_path: Path) -> Path:
    log = SessionLog("s1", directory=tmp_path / "sessions")
    for i, first in enumerate((120, 250, 400)):
        r = recorder()
        r.turn_index = i
        log.append(play(stream(first_ms=first, gap_ms=12, visible=8), r))
    return log.path


def comparison_log(tmp_path: Path) -> Path:
    log = SessionLog("c1", directory=tmp_path / "sessions")
    for pane, first in ((0, 100), (1, 300)):
        for trial in range(2):
            extra = {"comparison_id": "cmp-1", "pane": pane, "pane_label": f"P{pane}", "trial": trial}
            log.append(play(stream(first_ms=first + trial), recorder(extra=extra)))  # type: ignore[arg-type]
    return log.path


def test_report_reads_everything_and_prints_tables_and_charts(tmp_path: Path, capsys) -> None:
    b, s, c = bench_dir(tmp_path), session_log(tmp_path), comparison_log(tmp_path)
    html_out = tmp_path / "r" / "report.html"
    svg_dir = tmp_path / "svg"
    rc = main(["report", str(b), str(s), str(c), "--html", str(html_out), "--svg", str(svg_dir)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "== bench: fake-model ==" in out and "c=1" in out and "c=4" in out
    assert "Batching trade-off" in out and "TTFT by load" in out
    assert "TTFT distribution" in out and "TPOT distribution" in out and "Timeline of chosen turns" in out
    # sessions and comparison panes each get a row
    assert "s1" in out and "cmp-1 P0" in out and "cmp-1 P1" in out
    row_p1 = next(line for line in out.splitlines() if line.startswith("cmp-1 P1"))
    assert " 300 " in row_p1  # TTFT p50 of pane 1 (300, 301 ms)
    assert "fake-model: Total throughput grows" in out

    page = html_out.read_text()
    assert page.startswith("<!doctype html>") and page.count("<figure class='chart'") == 5 and "<table>" in page
    assert page.count("<svg") == 10  # each chart drawn for a wide screen and for a phone
    assert "fake-model" in page
    names = sorted(p.name for p in svg_dir.iterdir())
    assert names == ["timeline.svg", "tpot-distribution.svg", "tradeoff.svg", "ttft-distribution.svg", "ttft.svg"]


def test_report_on_bench_turns_alone_reaggregates(tmp_path: Path, capsys) -> None:
    b = bench_dir(tmp_path)
    assert main(["report", str(b / "turns.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "== bench: turns ==" in out
    lines = [line for line in out.splitlines() if line.strip().startswith("c=4")]
    assert lines and "25.0" in lines[0]  # TPOT p50 recomputed from the records


def test_a_bench_record_that_does_not_read_is_left_out_and_said(tmp_path: Path, capsys) -> None:
    # Well formed for the log (its tags of known types), but a warm-up flag no ttft wrote: the
    # level is figured from the other records and the report says what it left out, and why.
    b = bench_dir(tmp_path)
    lines = (b / "turns.jsonl").read_text().splitlines()
    odd = json.loads(lines[0])
    odd["extra"]["bench"]["warmup"] = "no"
    (b / "turns.jsonl").write_text("\n".join([json.dumps(odd), *lines[1:]]) + "\n")
    assert main(["report", str(b / "turns.jsonl"), "--json"]) == 0
    captured = capsys.readouterr()
    assert "left out 1 bench record" in captured.err and "extra.bench.warmup" in captured.err
    assert "Traceback" not in captured.err
    levels = json.loads(captured.out)["benches"][0]["levels"]
    assert [lv["requests"] for lv in levels] == [5, 12]


def test_timeline_picks_chosen_turns(tmp_path: Path, capsys) -> None:
    s = session_log(tmp_path)
    assert main(["report", str(s), "--turns", "1,3"]) == 0  # numbered as shown: from 1
    out = capsys.readouterr().out
    timeline = out[out.index("Timeline of chosen turns") :]
    assert "#1 " in timeline and "#3 " in timeline and "#2 " not in timeline


def test_report_on_a_missing_file_says_so(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path / "nope.jsonl")]) == 1
    assert "nope.jsonl" in capsys.readouterr().err


def test_svg_charts_are_well_formed() -> None:
    import xml.etree.ElementTree as ET

    level = agg.aggregate_level(typed([rec(sent_at=0, ttft=10, tokens=5, tpot=5)]), level=1)
    for chart in (
        tradeoff_chart([level]),
        hist_chart([1.0, 2.0, 2.5, 9.0], "TTFT", "ms"),
        timeline_chart([TurnRecord.from_dict(play(stream(first_ms=100)))]),
        hist_chart([], "empty", "ms"),
    ):
        root = ET.fromstring(chart.svg())
        assert root.tag.endswith("svg")


def test_a_long_session_keeps_chunk_stamps_only_for_the_turns_it_draws(tmp_path: Path, capsys) -> None:
    from ttft.tui.commands.report.command import TIMELINE_TURNS, load, report_charts

    log = SessionLog("long", directory=tmp_path / "sessions")
    for i in range(30):
        r = recorder()
        r.turn_index = i
        log.append(play(stream(first_ms=100 + i, gap_ms=5, visible=6), r))
    loaded = load([str(log.path)])
    (group,) = loaded.groups
    kept = [r.turn_index for r in group.records if r.chunks]
    assert kept == list(range(30 - TIMELINE_TURNS, 30))  # the timeline's default turns, and no others
    assert len(group.records) == 30 and all(r.metrics.ttft_ms for r in group.records)  # figures all kept
    asked = load([str(log.path)], "2,5")
    assert {r.turn_index for r in asked.groups[0].records if r.chunks} >= {1, 4}
    timeline = dict(report_charts(asked, "2,5"))["timeline"]
    assert timeline  # the chosen turns still draw, chunks and all
    with pytest.raises(SystemExit) as bad:
        main(["report", str(log.path), "--turns", "1,x"])
    assert bad.value.code == 2 and "expected turn numbers" in capsys.readouterr().err


GOOD_LEVEL = {"mode": "concurrency", "level": 2, "completed": 3, "ttft_ms": {"p50": 12.5}}


def _level_rows(out: str) -> list[str]:
    """The first cell of each row of the report's level table (``c=2``, ``4/s``, ``trace x1``)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("level ")) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return [line[:9].strip() for line in lines[start:end]]


@pytest.mark.parametrize(
    ("doc", "rows", "conclusion"),
    [
        ({"schema": "ttft.bench/1", "details": [1, 2, GOOD_LEVEL]}, ["c=2"], None),  # levels that are not objects
        ({"schema": "ttft.bench/1", "details": 7}, [], "No request completed: nothing to conclude."),
        (
            {"schema": "ttft.bench/1", "details": [{"mode": "concurrency", "level": 1, "completed": "x"}, GOOD_LEVEL]},
            ["c=2"],
            None,
        ),
        ({"schema": "ttft.bench/1", "conclusion": "c", "details": [{"completed": 1, "ttft_p50": "abc"}]}, [], ": c"),
        (
            {
                "schema": "ttft.bench/1",
                "details": [{"mode": "rate", "level": 2, "ttft_ms": {"p50": "fast"}}, GOOD_LEVEL],
            },
            ["c=2"],
            None,
        ),
    ],
)
def test_an_odd_bench_summary_shows_its_good_levels_and_leaves_the_rest_out(
    doc: object, rows: list[str], conclusion: str | None, tmp_path: Path, capsys
) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(doc))
    assert main(["report", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and _level_rows(out) == rows, out
    if rows:
        assert " 12 " in out  # the good level's TTFT p50, drawn
    if conclusion:
        assert conclusion in out


def test_a_file_that_is_no_bench_summary_is_said_in_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "summary.json"
    path.write_text("[1]")
    assert main(["report", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"ttft report: {path}: {path} is not a ttft bench summary\n"


def test_a_summary_level_missing_newer_keys_still_shows_its_figures(tmp_path: Path, capsys) -> None:
    path = tmp_path / "summary.json"
    level = {"level": 2, "completed": 3, "ttft_ms": {"p50": 12.5}}  # no mode, no p90, no tpot_ms
    path.write_text(json.dumps({"schema": "ttft.bench/1", "conclusion": "fine", "details": [level]}))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "c=2" in out and " 12 " in out and "fine" in out


@pytest.mark.parametrize(
    "capacity",
    [
        {"objectives": "ab"},
        {"objectives": [1]},
        {"objectives": [{"metric": "tpot", "bound_ms": "x", "target": 0.9}]},
        {"objectives": [{"metric": "tpot", "bound_ms": 50}]},  # no target
    ],
)
def test_an_odd_capacity_block_draws_the_chart_without_it(capacity: dict, tmp_path: Path, capsys) -> None:
    level = {"mode": "concurrency", "level": 2, "completed": 3, "ttft_ms": {"p50": 12.5},
             "per_user_tokens_per_s": {"p50": 20}, "output_throughput": 40}  # fmt: skip
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"schema": "ttft.bench/1", "capacity": capacity, "details": [level]}))
    assert main(["report", str(path), "--html", str(tmp_path / "r.html")]) == 0
    assert "Batching trade-off" in capsys.readouterr().out


def test_the_tradeoff_chart_draws_a_tpot_objective_as_the_speed_it_allows() -> None:
    level = agg.aggregate_level(typed([rec(sent_at=0, ttft=10, tokens=5, tpot=5)]), level=1)
    objectives = [
        {"metric": "tpot", "bound_ms": 40, "target": 0.9},
        {"metric": "ttft", "bound_ms": 500, "target": 0.9},  # no speed: not a line on this chart
        {"metric": "tpot", "bound_ms": 0, "target": 0.9},  # no speed either, and no division by zero
    ]
    chart = tradeoff_chart([level], capacity={"capacity": 1, "objectives": objectives})
    slo = [s for s in chart.series if s.name.startswith("SLO")]
    assert [s.name for s in slo] == ["SLO: p90 TPOT <= 40 ms (25 tok/s per user)"]
    assert slo[0].xs == [25.0, 25.0]


def test_a_logged_turn_that_does_not_read_is_a_problem_noted_not_a_crash(tmp_path: Path, capsys) -> None:
    from ttft.tui.commands.report.command import load, report_charts

    log = SessionLog("odd", directory=tmp_path / "sessions")
    log.append(play(stream(first_ms=100, gap_ms=5, visible=6)))
    good = json.loads(log.path.read_text(encoding="utf-8").splitlines()[0])
    bad = {**good, "turn_index": 1, "metrics": {**good["metrics"], "ttft_ms": "\x1b[2Jfast"}}
    with log.path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(bad) + "\n")
    loaded = load([str(log.path)])
    (group,) = loaded.groups
    assert [r.turn_index for r in group.records] == [0]  # the odd line is left out of the figures
    assert any("skipped 1 unreadable line" in p for p in loaded.problems), loaded.problems
    assert dict(report_charts(loaded, None))["ttft-distribution"]  # the charts draw what did read
    assert main(["report", str(log.path)]) == 0
    err = capsys.readouterr().err
    assert "unreadable" in err and "Traceback" not in err and "\x1b[2J" not in err
