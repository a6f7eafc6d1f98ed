"""``ttft bench --server-metrics``: the server's own gauges per level in summary.json, the table, the
charts and the conclusion, against the loopback gauged fake; a server without /metrics gives a note."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.batching_server import BatchingServer
from tests.fakes.gauged_server import GaugedServer


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def _bench(url: str, out: Path, *extra: str) -> int:
    return main(
        [
            "bench", "-m", "compat:gauged-fake", "--base-url", url, "--concurrency", "1,6", "--requests", "12",
            "--warmup", "1", "--max-output-tokens", "10", "--input-tokens", "16", "--out", str(out), *extra,
        ]
    )  # fmt: skip


def test_server_metrics_fill_each_level_the_table_and_the_conclusion(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    # 25 ms tokens: the level of six users lasts about 1.5 s, enough reads for the conclusion to judge
    with GaugedServer(slots=2, token_ms=25, prefill_ms=10, alpha=0.0) as srv:
        assert _bench(srv.base_url, out, "--server-metrics") == Exit.OK
        truth = srv.max_waiting
    printed = capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["server_metrics"] == {
        "url": f"{srv.url}/metrics",  # beside the API
        "server": "vllm",
        "interval_s": 0.25,
    }
    one, six = (d["server_metrics"] for d in summary["details"])
    assert one["waiting"]["mean"] < 0.3  # one user never waits for a slot (but while being admitted)
    assert six["running"]["max"] == 2.0  # two slots
    assert 2.0 <= six["waiting"]["max"] <= truth  # six users, two slots: about four wait, never more than there were
    assert six["waiting"]["mean"] > 1.0 and six["samples"] >= 4
    assert 0 < six["kv_cache_usage"]["max"] <= 0.4  # two running, 0.2 each
    assert six["prefix_cache_hit_rate"] == pytest.approx(0.5, abs=0.1)
    assert summary["levels"][1]["server_metrics"] == six  # beside the vLLM keys too
    # the table: a queue column beside TTFT, and a line of the gauges under each level
    header = next(line for line in printed.out.splitlines() if "TTFT p50" in line)
    assert header.split()[:11] == ["level", "req/s", "tok/s", "user", "t/s", "TTFT", "p50", "p90", "p99", "queue",
                                   "TTFVT50"]  # fmt: skip
    row = next(line for line in printed.out.splitlines() if line.lstrip().startswith("c=6"))
    assert row.split()[7] == f"{six['waiting']['mean']:.1f}"
    assert "server gauges (vllm /metrics" in printed.out and "KV cache mean" in printed.out
    assert "the server's queue, not the prefill, took the time" in summary["conclusion"]
    with (out / "levels.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert float(rows[1]["server_waiting_max"]) == six["waiting"]["max"]
    assert float(rows[0]["server_waiting_mean"]) == one["waiting"]["mean"]
    queue = (out / "queue.svg").read_text()
    assert "waiting (mean)" in queue and "running (mean)" in queue
    assert "waiting</text>" in (out / "ttft.svg").read_text()  # the TTFT chart's points say their queue


def test_an_explicit_url_and_another_servers_names(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # 20 ms tokens: the level of six users lasts about 1.2 s, so the reads (every 0.25 s) see both slots busy;
    # with 5 ms tokens it lasted about 0.3 s, and a loaded machine could make its one or two reads miss it
    with GaugedServer(slots=2, token_ms=20, prefill_ms=5, dialect="tgi") as srv:
        rc = _bench(srv.base_url, out, "--server-metrics", f"{srv.url}/metrics", "--json", "-q")
    assert rc == Exit.OK
    summary = json.loads((out / "summary.json").read_text())
    assert summary["server_metrics"]["server"] == "tgi"
    six = summary["details"][1]["server_metrics"]
    assert six["running"]["max"] == 2.0 and six["kv_cache_usage"] is None  # TGI publishes no KV gauge


@pytest.mark.parametrize("quiet", [False, True])
def test_a_server_without_the_endpoint_is_a_warning_even_with_q_not_an_error(
    tmp_path: Path, capsys, quiet: bool
) -> None:
    out = tmp_path / "run"
    with BatchingServer(slots=2, token_ms=2, prefill_ms=2) as srv:  # no /metrics: a 404
        rc = main(
            ["bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--concurrency", "2",
             "--requests", "4", "--warmup", "0", "--max-output-tokens", "4", "--server-metrics", "--out", str(out),
             *(["-q"] if quiet else [])]
        )  # fmt: skip
    assert rc == Exit.OK
    err = capsys.readouterr().err
    assert "not reading the server's gauges" in err and "HTTP 404" in err  # asked for and not read: -q keeps it
    assert "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["server_metrics"]["note"].endswith("answered HTTP 404")
    assert "server_metrics" not in summary["details"][0] and "server_metrics" not in summary["levels"][0]
    assert not (out / "queue.svg").exists()


def test_the_report_reads_the_gauges_back(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with GaugedServer(slots=1, token_ms=10, prefill_ms=5) as srv:
        assert _bench(srv.base_url, out, "--server-metrics", "-q") == Exit.OK
    capsys.readouterr()
    assert main(["report", str(out), "--html", str(tmp_path / "r.html"), "--svg", str(tmp_path / "svg")]) == 0
    text = capsys.readouterr().out
    assert "queue" in text.splitlines()[1]  # the bench table's header, as ttft bench prints it
    page = (tmp_path / "r.html").read_text()
    assert "<th>queue</th>" in page and "id='chart-queue'" in page
    assert (tmp_path / "svg" / "queue.svg").exists()


@pytest.mark.parametrize("quiet", [False, True])
def test_a_capacity_search_reads_the_gauges_beside_each_probe(tmp_path: Path, capsys, quiet: bool) -> None:
    out = tmp_path / "run"
    with GaugedServer(slots=2, token_ms=15, prefill_ms=5, alpha=0.0) as srv:
        rc = main(
            ["bench", "-m", "compat:gauged-fake", "--base-url", srv.base_url, "--find-capacity", "--slo",
             "ttft_p90=20s", "--capacity-limit", "4", "--requests", "8", "--warmup", "0", "--max-output-tokens", "6",
             "--input-tokens", "16", "--server-metrics", "--out", str(out), *(["-q"] if quiet else [])]
        )  # fmt: skip
    assert rc == Exit.OK
    printed = capsys.readouterr()
    assert "not read" not in printed.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["server_metrics"]["server"] == "vllm"
    probes = summary["details"]
    assert [d["level"] for d in probes] == [1, 2, 4]  # the search doubled up to its limit, each probe passing
    for d in probes:  # every probe has its own reads: the running gauge never passes its users or the slots
        g = d["server_metrics"]
        assert g["samples"] >= 1 and 1 <= g["running"]["max"] <= min(d["level"], 2)
    assert probes[-1]["server_metrics"]["waiting"]["max"] >= 1  # four users on two slots: some waited
    if not quiet:
        assert printed.out.count("server gauges (vllm /metrics") == 3  # a line under each probe


async def test_no_gauges_are_read_unless_asked() -> None:
    from ttft.tui.commands.bench.command import _scraper

    meta: dict = {}
    not_asked = await _scraper(None, True, "compat:m", "http://127.0.0.1:9/v1", None, meta)  # -q, no --server-metrics
    assert not_asked is None and meta == {}
