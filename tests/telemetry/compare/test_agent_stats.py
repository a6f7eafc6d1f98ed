"""telemetry.compare.stats for tool-using turns: steps, tool time and ttft's own time per pane, E2E as the
time to the final answer with its bootstrap verdict, and a comparison without tools exactly as before."""

from __future__ import annotations

from ttft.telemetry.compare.stats import AGENT_METRICS, METRICS, compare
from ttft.telemetry.record import TurnRecord


def rec(e2e: float, steps: int | None = None, tools_ms: float = 40.0, own_ms: float = 2.0) -> TurnRecord:
    d: dict = {
        "schema": "ttft.turn/1",
        "session_id": "s",
        "turn_index": 0,
        "provider": "openai",
        "model": "m",
        "status": "ok",
        "metrics": {"ttft_ms": 100.0, "ttfvt_ms": 100.0, "tpot_ms": 5.0, "e2e_ms": e2e},
        "tokens": {"output": 20},
    }
    if steps is not None:
        d["agent"] = {"step_count": steps, "time_in_tools_ms": tools_ms, "time_in_ttft_ms": own_ms, "stopped": "answer"}
    return TurnRecord.from_dict(d)


def test_a_comparison_without_tools_has_the_plain_columns_only() -> None:
    c = compare({"A": [rec(500)], "B": [rec(700)]})
    assert c.metrics == METRICS
    assert not any(k.startswith(("steps", "tools", "own")) for k in c.rows()[0])
    assert {v.metric for v in c.verdicts} == {m.key for m in METRICS}
    assert any(v.text.startswith("A finishes 200 ms sooner than B") for v in c.verdicts)


def test_tool_turns_add_steps_tool_time_and_own_time_per_pane() -> None:
    c = compare({"A": [rec(500, 3, 40, 2)], "B": [rec(900, 5, 120, 4)]})
    assert [m.key for m in c.metrics] == [m.key for m in METRICS] + [m.key for m in AGENT_METRICS]
    row = {r["pane"]: r for r in c.rows()}
    assert (row["A"]["steps_median"], row["A"]["tools_median"], row["A"]["own_median"]) == (3.0, 40.0, 2.0)
    assert row["B"]["steps_median"] == 5.0 and row["A"]["steps_winner"] and not row["B"]["steps_winner"]
    assert set(c.wins("A")) >= {"e2e", "steps", "tools", "own"}
    texts = [v.text for v in c.verdicts]
    assert any(t.startswith("A reaches the final answer 400 ms sooner than B") for t in texts)
    assert any(t.startswith("A takes 2 fewer steps to the answer than B") for t in texts)


def test_the_time_to_answer_verdict_is_a_bootstrap_one_with_enough_trials() -> None:
    a = [rec(500 + i, 3) for i in range(6)]
    b = [rec(900 + i, 3) for i in range(6)]
    c = compare({"A": a, "B": b})
    e2e = next(v for v in c.verdicts if v.metric == "e2e")
    assert e2e.clear and e2e.better == "A" and e2e.low is not None
    assert e2e.text.startswith("A reaches the final answer") and "95% interval" in e2e.text
    steps = next(v for v in c.verdicts if v.metric == "steps")
    assert not steps.clear and "no clear difference" in steps.text  # the same steps each: level


def test_a_pane_that_ran_no_tools_beside_one_that_did_has_no_step_figures() -> None:
    c = compare({"A": [rec(500, 3)], "B": [rec(400)]})
    assert c.stats["B"].metrics["steps"].median is None
    assert next(v for v in c.verdicts if v.metric == "steps").text == "steps: no value for B, nothing to compare"
