"""Exports load cleanly into pandas, polars and DuckDB: a session, a comparison and a bench run,
each made by the real commands against the loopback fakes, then exported by ``ttft export``."""

from __future__ import annotations

import statistics
from itertools import pairwise
from typing import Any

import pytest
from ttft.telemetry.export import table
from ttft.telemetry.log.turns import read_records
from ttft.tui.cli import main

from tests.fakes import FakeServer, Schedule
from tests.fakes.batching_server import BatchingServer

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")

SESSION = "20260101-000000-dfx1"
PANDAS = {"str": "string", "json": "string", "int": "Int64", "float": "Float64", "bool": "boolean"}
DUCKDB = {"str": "VARCHAR", "json": "VARCHAR", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN"}
NUMERIC = [c.name for c in table.COLUMNS if c.type in ("int", "float")]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three sources (3 session turns, one failed; 4 compare turns, 2 failed; 8 bench turns), each
    exported as csv and parquet."""
    root = tmp_path_factory.mktemp("frames")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TTFT_DATA_DIR", str(root / "data"))
        sched = Schedule(first_token_ms=20, token_ms=3, reasoning_tokens=2, visible_tokens=5)
        with (
            FakeServer(sched) as ok,
            FakeServer(Schedule(fail_status=500)) as bad,
            BatchingServer(slots=2, token_ms=5, prefill_ms=10) as batching,
        ):
            for url, exit_code in ((ok.openai_base_url, 0), (ok.openai_base_url, 0), (bad.openai_base_url, 1)):
                rc = main(["ask", "-m", "compat:fake-model", "--base-url", url, "--session", SESSION,
                           "--max-retries", "0", "hi"])  # fmt: skip
                assert rc == exit_code
            main(["compare", "--headless", "-m", f"compat:fake-model@{ok.openai_base_url}",
                  "-m", f"compat:other@{bad.openai_base_url}", "--repeat", "2",
                  "--out", str(root / "cmp"), "hi"])  # fmt: skip
            assert main(["bench", "-m", "compat:batching-fake", "--base-url", batching.base_url,
                         "--concurrency", "1,2", "--requests", "4", "--warmup", "0", "--max-output-tokens", "6",
                         "--out", str(root / "bench"), "--quiet"]) == 0  # fmt: skip
        logs = {
            "session": root / "data" / "sessions" / f"{SESSION}.jsonl",
            "compare": next((root / "cmp").glob("cmp-*[0-9a-f].jsonl")),
            "bench": root / "bench" / "turns.jsonl",
        }
        out: dict[str, Any] = {"logs": logs, "levels": root / "bench" / "levels.csv", "cmp": root / "cmp"}
        for name, log in logs.items():
            for fmt in ("csv", "parquet"):
                out[f"{name}.{fmt}"] = root / f"{name}.{fmt}"
                assert main(["export", str(log), "-f", fmt, "-o", str(out[f"{name}.{fmt}"])]) == 0
    return out


SOURCES = ("session", "compare", "bench")
COUNTS = {"session": (3, 1), "compare": (4, 2), "bench": (8, 0)}  # turns, failed


def test_every_csv_has_the_same_header(made: dict[str, Any]) -> None:
    heads = {made[f"{s}.csv"].read_text().splitlines()[0] for s in SOURCES}
    assert heads == {",".join(table.HEADER)}


def test_every_field_the_real_commands_log_has_a_column(made: dict[str, Any]) -> None:
    # A field added to the record needs its column in telemetry/export/table.py: this names it.
    for log in made["logs"].values():
        for rec in read_records(log):
            assert table.unlisted(rec) == [], log.name


def test_pandas_reads_and_concatenates(made: dict[str, Any]) -> None:
    dtypes = {c.name: PANDAS[c.type] for c in table.COLUMNS}
    frames = {s: pd.read_csv(made[f"{s}.csv"], dtype=dtypes) for s in SOURCES}
    for s, df in frames.items():
        assert (len(df), int((df["status"] == "error").sum())) == COUNTS[s]
    both = pd.concat(frames.values(), ignore_index=True)
    assert len(both) == 15 and list(both.columns) == list(table.HEADER)
    assert all(pd.api.types.is_numeric_dtype(both[c]) for c in NUMERIC)
    assert pd.api.types.is_bool_dtype(both["settings.stream"])
    ok = both[both["status"] == "ok"]
    assert (ok["metrics.ttft_ms"] > 0).all() and ok["metrics.ttft_ms"].notna().all()
    assert both.loc[both["status"] == "error", "error.status_code"].eq(500).all()
    bench = both[both["extra.bench.run_id"].notna()]
    assert sorted(bench["extra.bench.level"].unique()) == [1.0, 2.0]
    # without any types given, the figures still read as numbers
    plain = pd.read_csv(made["bench.csv"])
    assert plain["metrics.ttft_ms"].dtype == "float64" and plain["turn_index"].dtype == "int64"


def test_polars_reads_parquet_typed_and_concatenates_strictly(made: dict[str, Any]) -> None:
    frames = [pl.read_parquet(made[f"{s}.parquet"]) for s in SOURCES]
    assert len({tuple(f.schema.items()) for f in frames}) == 1  # the same types, also for all-null columns
    both = pl.concat(frames, how="vertical")
    assert both.height == 15
    assert both.schema["extra.bench.level"] == pl.Float64 and both.schema["error.status_code"] == pl.Int64
    assert both.schema["metrics.tpot_ms"] == pl.Float64 and both.schema["settings.stream"] == pl.Boolean
    by_status = dict(both.group_by("status").len().iter_rows())
    assert by_status == {"ok": 12, "error": 3}
    # the CSV's figures read as numbers too, with no schema given
    csv_frame = pl.read_csv(made["session.csv"])
    assert csv_frame.schema["metrics.ttft_ms"] == pl.Float64 and csv_frame.schema["turn_index"] == pl.Int64


def test_duckdb_reads_csv_and_parquet_alike(made: dict[str, Any]) -> None:
    types = {c.name: DUCKDB[c.type] for c in table.COLUMNS}
    con = duckdb.connect()
    csvs = [str(made[f"{s}.csv"]) for s in SOURCES]
    parquets = [str(made[f"{s}.parquet"]) for s in SOURCES]
    from_csv = con.read_csv(csvs, dtype=types).aggregate(
        'status, count(*) AS n, avg("metrics.ttft_ms") AS ttft, sum("tokens.output") AS out', "status"
    )
    from_parquet = con.read_parquet(parquets).aggregate(
        'status, count(*) AS n, avg("metrics.ttft_ms") AS ttft, sum("tokens.output") AS out', "status"
    )
    a, b = sorted(from_csv.fetchall()), sorted(from_parquet.fetchall())
    assert [r[:2] for r in a] == [("error", 3), ("ok", 12)]
    assert a[1][2] == pytest.approx(b[1][2]) and a[1][3] == b[1][3] > 0
    typed = dict(zip(con.read_parquet(parquets).columns, con.read_parquet(parquets).types, strict=True))
    assert str(typed["metrics.queue_ms"]) == "DOUBLE" and str(typed["extra.pane"]) == "BIGINT"


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in pairwise(times)]


def test_chunks_are_usable_in_arithmetic(made: dict[str, Any]) -> None:
    log = made["logs"]["session"]
    # DuckDB: the log's chunks are typed structs, straight from the JSON lines
    con = duckdb.connect()
    rows = con.sql(
        "SELECT turn_index, metrics.ttft_ms, [c.t_ms FOR c IN chunks], list_sum([c.tokens FOR c IN chunks]) "
        f"FROM read_json('{log}') ORDER BY turn_index"
    ).fetchall()
    assert len(rows) == 3
    for _, ttft, times, tokens in rows[:2]:
        assert times[0] == pytest.approx(ttft, abs=1e-3) and tokens == 7  # 2 reasoning + 5 visible, one a chunk
    assert rows[2] == (2, None, [], None)  # the failed turn: no first token, an empty list of chunks, no sum
    # polars: explode, then gaps per turn are the ITL the record holds
    turns = pl.read_ndjson(log).select("turn_index", "metrics", "chunks").explode("chunks")
    gaps = (
        turns.with_columns(t=pl.col("chunks").struct.field("t_ms"))
        .with_columns(gap=pl.col("t").diff().over("turn_index"))
        .group_by("turn_index")
        .agg(pl.col("gap").drop_nulls().median(), pl.col("metrics").first().struct.field("itl_ms"))
        .sort("turn_index")
    )
    first = gaps.row(0, named=True)
    assert first["gap"] == pytest.approx(first["itl_ms"]["p50"], abs=2e-3)  # stamps kept to the µs
    # pandas: the CSV's chunks column is JSON text of the same objects
    df = pd.read_csv(made["session.csv"])
    chunks = pd.json_normalize(pd.read_json(log, lines=True)["chunks"].iloc[0])
    assert list(chunks.columns) == ["t_ms", "kind", "tokens"] and chunks["tokens"].sum() == 7
    assert statistics.median(_gaps(chunks["t_ms"].tolist())) == pytest.approx(
        df["metrics.itl_ms.p50"].iloc[0], abs=2e-3
    )


def test_levels_csv_has_whole_concurrency(made: dict[str, Any]) -> None:
    df = pl.read_csv(made["levels"])
    assert df.schema["level"] == pl.Int64 and df["level"].to_list() == [1, 2]
    assert pd.read_csv(made["levels"])["level"].dtype == "int64"
    con = duckdb.connect()
    assert con.sql(f"SELECT DISTINCT typeof(level) FROM read_csv('{made['levels']}')").fetchall() == [("BIGINT",)]


def test_the_comparisons_summary_csvs_load(made: dict[str, Any]) -> None:
    (summary,) = made["cmp"].glob("*-summary.csv")
    (verdicts,) = made["cmp"].glob("*-verdicts.csv")
    df = pl.read_csv(summary)
    assert df["pane"].to_list() == ["A", "B"] and df["failed"].to_list() == [0, 2]
    assert df.schema["ttft_median"] == pl.Float64 and df.schema["ttft_winner"] == pl.Boolean
    v = pl.read_csv(verdicts)
    assert set(v["metric"].to_list()) >= {"ttft", "tpot"} and v.schema["clear"] == pl.Boolean
    assert duckdb.connect().read_csv(str(verdicts)).aggregate("count(*)").fetchall() == [(v.height,)]
