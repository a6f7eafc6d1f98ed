"""telemetry.bench.cluster: a cluster's level as the union of its nodes' shares, a lost node, the summary block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from ttft.telemetry.bench.aggregate import aggregate_level
from ttft.telemetry.bench.cluster import Node, Share, busiest, cluster_block, level_figures, partial_line
from ttft.telemetry.bench.merge import Part, union_level

from tests.telemetry.bench.test_aggregate import rec, typed

EPOCH = datetime(2026, 12, 1, 16, 0, tzinfo=UTC)
A, B = Node("a" * 56, "host-a", 8), Node("b" * 56, "host-b", 4)


def sent(r: dict, wall_ms: float, index: int) -> dict:
    """The record sent ``wall_ms`` after EPOCH (its wall clock), with its place in the run."""
    r["sent_at"] = (EPOCH + timedelta(milliseconds=wall_ms)).isoformat(timespec="microseconds")
    r["extra"]["bench"].update(index=index, level=8)
    return r


def client(cpu: float, lag: float) -> dict:
    return {"cpu_percent": cpu, "loop_lag_ms": {"p50": lag / 2, "p99": lag, "max": lag * 2}, "workers": 1}


def shares(lost: str | None = None) -> list[Share]:
    a = [sent(rec(sent_at=i * 10, ttft=20 + i, tokens=8, tpot=10 + i / 10), i * 10, i) for i in range(20)]
    b = [sent(rec(sent_at=i * 10, ttft=40 + i, tokens=8, tpot=12), 5 + i * 10, 100 + i) for i in range(12)]
    return [
        Share(A, workers=1, level=4, asked=20, records=a, client=client(35, 1.5)),
        Share(B, workers=2, level=4, asked=20, records=b, client=None if lost else client(60, 0.8), lost=lost),
    ]


def test_the_level_is_the_union_of_the_shares_by_the_merges_rules() -> None:
    s = shares()
    figures, problems = level_figures("concurrency", s)
    assert problems == []
    union = union_level("concurrency", [Part(x.node.node_id, x.level, typed(list(x.records))) for x in s])
    every = aggregate_level(union.turns, level=8, mode="concurrency")
    assert figures["level"] == 8 and figures["requests"] == 32 and figures["completed"] == 32
    for metric in ("ttft_ms", "tpot_ms", "e2e_ms", "itl_ms"):
        assert figures[metric] == every[metric]
    # throughput over the union's wall-clock span: first send (A at 0 ms) to last end (A's last record)
    assert figures["duration_s"] == pytest.approx(every["duration_s"]) and figures["duration_s"] > 0.19
    assert [n["received"] for n in figures["nodes"]] == [20, 12]
    assert figures["partial"] is None and partial_line(figures) is None


def test_the_client_column_is_the_worst_machines_and_names_the_busiest_node() -> None:
    figures, _ = level_figures("concurrency", shares())
    c = figures["client"]
    assert c["loop_lag_ms"]["p99"] == 1.5  # the worst lag (host-a's)
    assert c["cpu_percent"] == 60 and c["machines"] == 2
    assert c["busiest"]["host"] == "host-b" and c["busiest"]["label"] == "host-b (bbbbbbbb)"
    assert c["busiest"]["loop_lag_ms"]["p99"] == 0.8  # the busiest node's own lag, not the worst


def test_a_node_lost_mid_level_keeps_its_records_and_marks_the_level_partial() -> None:
    figures, _ = level_figures("concurrency", shares(lost="its driver died"))
    assert figures["requests"] == 32  # the 12 that reached the head count
    assert figures["partial"] == {
        "lost_nodes": ["host-b (bbbbbbbb)"],
        "reasons": ["its driver died"],
        "missing_requests": 8,
    }
    line = partial_line(figures)
    assert line is not None and "host-b (bbbbbbbb)" in line and "8 request(s)" in line
    assert figures["client"]["busiest"]["host"] == "host-a"  # the lost node said nothing of its health
    assert [n["lost"] for n in figures["nodes"]] == [None, "its driver died"]


def test_a_record_that_does_not_read_is_left_out_and_named_with_its_node() -> None:
    s = shares()
    broken = Share(B, 1, 4, 20, [*s[1].records, {"schema": "ttft.turn/1", "chunks": "nope"}], s[1].client)
    figures, problems = level_figures("concurrency", [s[0], broken])
    assert figures["requests"] == 32
    assert len(problems) == 1 and problems[0].startswith("host-b (bbbbbbbb): left out 1 bench record")


def test_busiest_is_none_without_any_health() -> None:
    assert busiest([Share(A, 1, 1, 1, [], None)]) is None


def test_the_summary_block_names_the_engine_nodes_drivers_and_worst_health_over_the_run() -> None:
    first, second = shares(), shares(lost="gone")
    second[0] = Share(A, 1, 4, 20, [], client(90, 7.0))
    block = cluster_block(
        engine="ray",
        version="2.60.0",
        address="local:2",
        nodes=[A, B],
        placed={A.node_id: 1, B.node_id: 2},
        levels=[first, second],
        lost=[(B, "c=8", "gone")],
    )
    assert block["engine"] == "ray" and block["version"] == "2.60.0" and block["workers"] == 3
    a, b = block["nodes"]
    assert (a["host"], a["workers"], a["cpus"]) == ("host-a", 1, 8)
    assert a["client"] == {"cpu_percent": 90, "loop_lag_ms": {"p99": 7.0, "max": 14.0}}  # its worst level
    assert b["client"] == {"cpu_percent": 60, "loop_lag_ms": {"p99": 0.8, "max": 1.6}}  # the level it finished
    assert block["lost"] == [{"node_id": B.node_id, "host": "host-b", "when": "c=8", "reason": "gone"}]
