"""``ttft export --steps``: one typed row per step, in CSV, JSONL and Parquet, from a session whose turns the
real ``ttft ask`` made: a tool-using turn (two calls at once, one failing), a turn whose call was not allowed,
and a turn without tools (one model step). The files load into pandas and polars with the declared types.

The MCP client is stood in for by an in-process host (tests.support.tool_host), as in test_ask_tools.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry.export import step_table
from ttft.telemetry.export.formats import pandas_dtypes, polars_schema
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes import FakeServer, Schedule
from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.tool_host import FakeHost, FakeTool, stand_in_mcp

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")

SESSION = "20260101-000000-stp1"
SCRIPT = [Step(calls=(Call("search", {"q": "tokyo"}), Call("boom"))), Step(text="It is noon.")]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("steps")
    host = FakeHost(FakeTool("search", "Tokyo 12:00", delay_s=0.05, server="web"), FakeTool("boom", raises=True))
    with pytest.MonkeyPatch.context() as mp:
        stand_in_mcp(mp, host)
        for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "OTEL_EXPORTER_OTLP_ENDPOINT"):
            mp.delenv(k, raising=False)
        mp.setenv("TTFT_DATA_DIR", str(root / "data"))
        mp.setenv("TTFT_CONFIG_DIR", str(root / "conf"))
        with AgentServer(SCRIPT) as agent, FakeServer(Schedule(first_token_ms=20, token_ms=3)) as plain:
            ask = ["ask", "-m", "compat:m", "--session", SESSION, "--max-retries", "0"]
            tools = ["--base-url", agent.base_url, "--mcp", "web=uvx web-search"]
            assert main([*ask, *tools, "--allow-tools", "time?"]) == Exit.OK
            assert main([*ask, *tools, "time?"]) == Exit.TOOL_DENIED
            assert main([*ask, "--base-url", plain.openai_base_url, "hi"]) == Exit.OK
        log = root / "data" / "sessions" / f"{SESSION}.jsonl"
        out: dict[str, Any] = {"log": log, "recs": [json.loads(line) for line in log.read_text().splitlines()]}
        for fmt in ("csv", "jsonl", "parquet"):
            out[fmt] = root / f"steps.{fmt}"
            assert main(["export", str(log), "--steps", "-f", fmt, "-o", str(out[fmt]), "-q"]) == 0
        yield out


def test_one_row_per_step_with_the_turns_keys(made: dict[str, Any]) -> None:
    df = pd.read_csv(made["csv"], dtype=pandas_dtypes(step_table.COLUMNS))
    assert list(df.columns) == list(step_table.HEADER)
    tools, denied, plain = made["recs"]
    assert [len(r.get("steps", ())) for r in made["recs"]] == [4, 3, 0]
    assert len(df) == 4 + 3 + 1  # a turn without tools is one model step
    assert df["turn_index"].tolist() == [0] * 4 + [1] * 3 + [2]
    assert set(df["session_id"]) == {SESSION} and set(df["model"]) == {"m"} and set(df["provider"]) == {"compat"}
    turn = df[df["turn_index"] == 0]
    assert turn["step_index"].tolist() == [0, 1, 2, 3] and set(turn["step_count"]) == {4}
    assert turn["kind"].tolist() == [s["kind"] for s in tools["steps"]] == ["model", "tool", "tool", "model"]
    for (_, row), step in zip(turn.iterrows(), tools["steps"], strict=True):
        assert (row["start_ms"], row["end_ms"], row["status"]) == (step["start_ms"], step["end_ms"], step["status"])
    models, calls = turn[turn["kind"] == "model"], turn[turn["kind"] == "tool"]
    assert models["ttft_ms"].tolist() == [s["ttft_ms"] for s in tools["steps"] if s["kind"] == "model"]
    assert models["tool_calls"].tolist() == [2, 0] and models["name"].isna().all()
    assert calls["name"].tolist() == ["search", "boom"] and calls["status"].tolist() == ["ok", "error"]
    assert set(calls["server"]) == {"web", "fake"} and calls["ttft_ms"].isna().all()
    assert calls["duration_ms"].tolist() == [s["duration_ms"] for s in tools["steps"] if s["kind"] == "tool"]
    assert calls["duration_ms"].iloc[0] >= 40 and not calls["truncated"].any()
    assert set(turn["turn_status"]) == {"ok"} and set(turn["agent.stopped"]) == {"answer"}
    refused = df[df["turn_index"] == 1]
    assert refused["status"].tolist() == [s["status"] for s in denied["steps"]] == ["ok", "denied", "denied"]
    assert set(refused["turn_status"]) == {"error"}
    assert set(refused["agent.stopped"]) == {"denied"}
    (i,) = df.index[df["turn_index"] == 2]
    row = df.loc[i]
    assert (row["kind"], row["step_index"], row["step_count"], row["start_ms"]) == ("model", 0, 1, 0.0)
    assert row["end_ms"] == plain["events_ms"]["end"] and row["ttft_ms"] == plain["metrics"]["ttft_ms"]
    assert row["duration_ms"] == pytest.approx(plain["events_ms"]["end"], abs=1e-3)
    assert row["tokens.output"] == plain["tokens"]["output"] and pd.isna(row["agent.stopped"])
    assert row["wait_ms.first_token"] == plain["metrics"]["wait_ms"]["first_token"]


def test_pandas_reads_the_declared_types(made: dict[str, Any]) -> None:
    df = pd.read_csv(made["csv"], dtype=pandas_dtypes(step_table.COLUMNS))
    assert str(df["step_index"].dtype) == "Int64" and str(df["result_bytes"].dtype) == "Int64"
    assert str(df["ttft_ms"].dtype) == "Float64" and str(df["wait_ms.server"].dtype) == "Float64"
    assert str(df["truncated"].dtype) == "boolean" and str(df["kind"].dtype) == "string"
    assert str(df["extra.bench.level"].dtype) == "Float64"  # empty in every row, typed all the same
    # JSON lines: the same rows, the same values
    rows = [json.loads(line) for line in made["jsonl"].read_text().splitlines()]
    lines = pd.DataFrame(rows).astype(pandas_dtypes(step_table.COLUMNS))
    assert list(lines.columns) == list(step_table.HEADER)
    pd.testing.assert_frame_equal(lines, df)


def test_polars_reads_csv_jsonl_and_parquet_as_one_typed_frame(made: dict[str, Any]) -> None:
    schema = polars_schema(step_table.COLUMNS)
    parquet = pl.read_parquet(made["parquet"])
    assert dict(parquet.schema) == schema  # typed with no schema given, also the all-null columns
    from_csv = pl.read_csv(made["csv"], schema=schema)
    from_jsonl = pl.read_ndjson(made["jsonl"], schema=schema)
    assert from_csv.equals(parquet) and from_jsonl.equals(parquet) and parquet.height == 8
    by_kind = dict(parquet.group_by("kind").agg(pl.col("duration_ms").sum()).iter_rows())
    assert by_kind["tool"] > 40 and by_kind["model"] > 0
    assert parquet.filter(pl.col("kind") == "tool")["truncated"].to_list() == [False] * 4


def test_steps_only_where_a_table_is_written(made: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(made["log"]), "--steps", "-f", "otel"]) == Exit.USAGE
    assert "--steps writes jsonl, csv, parquet" in capsys.readouterr().err


def test_the_json_summary_counts_turns_and_steps(
    made: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s.csv"
    assert main(["export", str(made["log"]), "--steps", "-f", "csv", "-o", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["turns"], doc["steps"], doc["format"]) == (3, 8, "csv")
    assert main(["export", str(made["log"]), "--steps", "-f", "csv", "-o", str(out)]) == 0
    assert "wrote 8 steps of 3 turns" in capsys.readouterr().err
