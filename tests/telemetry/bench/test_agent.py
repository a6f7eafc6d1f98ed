"""telemetry.bench.agent: a level's tool-using turns (``ttft bench --tool-latency``, ``--mcp``) from hand-made
records with known steps: steps per turn, time to the answer, the split, tool errors; TPOT and ITL read
within each model step, never across the tools between them."""

from __future__ import annotations

import pytest
from ttft.telemetry.bench import summary as bench_summary
from ttft.telemetry.bench.agent import CSV_COLUMNS, agent_figures, agent_sentence, csv_cells, per_gap_ms
from ttft.telemetry.bench.aggregate import aggregate_level
from ttft.telemetry.bench.requests import read_bench
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.steps import AgentSummary

TOOL_MS = 50.0


def agent_rec(*, sent_at: float = 0.0, answer_at: float = 131.0, stopped: str = "answer", tool_status: str = "ok",
              tool_ms: float = TOOL_MS, own_ms: float = 4.0) -> dict:  # fmt: skip
    """One turn: a model step (first token at 40 ms, two chunks 1 ms apart: the tool call), the tool, then a
    model step whose three chunks end at ``answer_at`` (2 ms apart): 3 steps."""
    tool_start = 42.0 + own_ms / 2
    tool_end = tool_start + tool_ms
    second = tool_end + own_ms / 2
    answer = [answer_at - 4, answer_at - 2, answer_at]
    chunks = [[40.0, "text", 1], [41.0, "text", 1], *([t, "text", 1] for t in answer)]
    steps = [
        {"kind": "model", "start_ms": 0.0, "end_ms": 42.0, "status": "ok", "ttft_ms": 40.0, "tpot_ms": 1.0},
        {"kind": "tool", "start_ms": tool_start, "end_ms": tool_end, "name": "lookup", "server": "stub",
         "status": tool_status, "duration_ms": tool_ms},
        {"kind": "model", "start_ms": second, "end_ms": answer_at + 1, "status": "ok", "ttft_ms": 30.0,
         "tpot_ms": 2.0},
    ]  # fmt: skip
    return {
        "schema": "ttft.turn/2",
        "turn_index": 0,
        "status": "ok",
        "started_at": "2025-01-01T00:00:00.000+00:00",
        "events_ms": {"sent": 0.0, "first_token": 40.0, "last_token": answer_at, "end": answer_at + 1},
        "metrics": {"ttft_ms": 40.0, "ttfvt_ms": 40.0, "tpot_ms": 1.0, "e2e_ms": answer_at},
        "tokens": {"input": 10, "output": 5, "source": "usage"},
        "chunks": chunks,
        "steps": steps,
        "agent": {
            "time_in_model_ms": 42.0 + (answer_at + 1 - second),
            "time_in_tools_ms": tool_ms,
            "time_in_ttft_ms": own_ms,
            "step_count": 3,
            "model_steps": 2,
            "tool_steps": 1,
            "max_steps": 10,
            "stopped": stopped,
        },
        "extra": {"bench": {"level": 2, "mode": "concurrency", "sent_at_ms": sent_at, "warmup": False}},
    }


def records(dicts: list[dict]) -> list[TurnRecord]:
    read = read_bench(dicts)
    assert read.unreadable == 0, read.message()
    return [t.record for t in read.turns]


def test_a_levels_turns_give_steps_time_to_answer_split_and_tool_errors() -> None:
    recs = records(
        [
            agent_rec(answer_at=131.0),
            agent_rec(answer_at=151.0, tool_status="error"),
            agent_rec(answer_at=171.0, own_ms=8.0),
            agent_rec(answer_at=400.0, stopped="max_steps"),  # no answer: not a time to the answer
        ]
    )
    a = agent_figures(recs)
    assert a is not None
    assert (a["turns"], a["answered"]) == (4, 3)
    assert a["steps_per_turn"] == {"p50": 3.0, "mean": 3.0}
    assert a["time_to_answer_ms"]["p50"] == pytest.approx(151.0)
    assert 151.0 < a["time_to_answer_ms"]["p90"] <= a["time_to_answer_ms"]["p99"] <= 171.0
    assert a["time_in_tools_ms"]["p50"] == pytest.approx(TOOL_MS)
    assert a["ttft_overhead_ms"]["p50"] == pytest.approx(2.0)  # 4 ms over the two gaps of a 2-model-step turn
    assert (a["tool_calls"], a["tool_errors"]) == (4, 1)
    assert a["stopped"] == {"answer": 3, "max_steps": 1}


def test_own_time_per_gap_needs_two_model_steps() -> None:
    assert per_gap_ms(AgentSummary(time_in_ttft_ms=6.0, model_steps=4)) == pytest.approx(1.0)
    assert per_gap_ms(AgentSummary(time_in_ttft_ms=6.0, model_steps=1)) is None


def test_the_level_reads_tpot_and_itl_within_each_model_step_never_across_the_tools() -> None:
    a = aggregate_level(read_bench([agent_rec(), agent_rec(sent_at=10.0)]).turns, level=2)
    assert a["ttft_ms"]["p50"] == pytest.approx(40.0)  # the first model step's
    assert sorted({a["tpot_ms"]["p50"], a["tpot_ms"]["max"]}) == [1.5, 2.0]  # each step's own: 1 and 2 ms
    assert a["itl_ms"]["max"] == pytest.approx(2.0)  # the 86 ms across the tool is no inter-token gap
    assert a["e2e_ms"]["p50"] == pytest.approx(131.0) == a["agent"]["time_to_answer_ms"]["p50"]
    assert a["agent"]["turns"] == 2


def test_a_level_without_tools_has_no_agent_block_and_empty_cells() -> None:
    plain = agent_rec()
    for key in ("steps", "agent"):
        del plain[key]
    a = aggregate_level(read_bench([plain]).turns, level=1)
    assert "agent" not in a
    assert a["itl_ms"]["max"] == pytest.approx(86.0)  # a plain record's gaps are all its gaps
    assert csv_cells(a) == dict.fromkeys(CSV_COLUMNS)
    assert agent_sentence(a) is None


def test_summary_csv_and_line_carry_the_block() -> None:
    a = aggregate_level(read_bench([agent_rec(), agent_rec(answer_at=151.0)]).turns, level=2)
    s = bench_summary.summary([a])
    assert s["levels"][0]["agent"] == a["agent"] == s["details"][0]["agent"]
    row = bench_summary.csv_row(a)
    assert set(CSV_COLUMNS) <= set(bench_summary.CSV_COLUMNS)
    assert row["agent_steps_per_turn_p50"] == 3.0 and row["tool_calls"] == 2 and row["tool_errors"] == 0
    assert row["time_to_answer_p50_ms"] == pytest.approx(141.0)
    line = agent_sentence(a)
    assert line is not None
    assert line.startswith("agent: 3 steps per turn p50 (mean 3.0), time to answer p50 141 ms")
    assert "p50 in tools 50 ms" in line and "2 tool calls, 0 errors" in line


@pytest.mark.parametrize(
    "block",
    [None, "x", {"turns": "many"}, {"turns": 2, "steps_per_turn": [1], "tool_calls": "x", "answered": 1}],
)
def test_a_block_from_an_old_or_edited_summary_never_breaks_the_line_or_the_row(block: object) -> None:
    agg = {"agent": block}
    cells = csv_cells(agg)
    assert set(cells) == set(CSV_COLUMNS)
    line = agent_sentence(agg)
    assert line is None or line.startswith("agent: -")
