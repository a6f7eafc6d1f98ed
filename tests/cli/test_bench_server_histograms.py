"""``ttft bench --server-metrics``: the server's latency histograms per level, against the gauged fake whose
histograms move as its requests finish on two slots (so queueing is real); each level's percentiles held
within one bucket of the fake's own figures, its count equal to the level's requests; acceptance from the
spec-decode counters; the printed line, the chart, and the conclusion when the gap grows with load."""

from __future__ import annotations

import bisect
import csv
import json
import math
from pathlib import Path

import pytest
from ttft.telemetry.server.histograms import KINDS
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.gauged_server import HISTOGRAM_NAMES, GaugedServer

REQUESTS = 12
TOKENS = 10


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def _bench(url: str, out: Path, *extra: str, levels: str = "1,6") -> int:
    return main(
        [
            "bench", "-m", "compat:gauged-fake", "--base-url", url, "--concurrency", levels, "--requests",
            str(REQUESTS), "--warmup", "1", "--max-output-tokens", str(TOKENS), "--input-tokens", "16",
            "--server-metrics", "--out", str(out), *extra,
        ]
    )  # fmt: skip


def _bucket_index(bounds: tuple[float, ...], seconds: float) -> int:
    """The bucket a value falls in (its index among the finite bounds; len(bounds) for +Inf)."""
    return bisect.bisect_left(bounds, seconds - 1e-12)


def _true_quantile(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[max(0, math.ceil(q * len(v)) - 1)]


def test_each_levels_percentiles_lie_within_a_bucket_of_the_truth(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with GaugedServer(slots=2, token_ms=20, prefill_ms=15, alpha=0.0, draft_k=3, accept_share=0.6) as srv:
        assert _bench(srv.base_url, out) == Exit.OK
        observed = list(srv.observed)
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert len(observed) == 1 + 2 * REQUESTS  # the warm-up, then each level's requests, in the order they ended
    for i, detail in enumerate(summary["details"]):
        assert detail["completed"] == REQUESTS
        m = detail["server_metrics"]
        assert "latency_note" not in m  # vLLM publishes every kind
        truth = observed[1 + i * REQUESTS : 1 + (i + 1) * REQUESTS]  # this level's requests, as the fake timed them
        for kind in KINDS:
            fig = m["latency"][kind]
            values = [g for o in truth for g in o.itl] if kind == "itl" else [getattr(o, kind) for o in truth]
            assert fig["count"] == len(values) == (REQUESTS * (TOKENS - 1) if kind == "itl" else REQUESTS)
            bounds = HISTOGRAM_NAMES["vllm"][kind][1]
            for key, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                got, want = fig[key] / 1000, _true_quantile(values, q)
                assert abs(_bucket_index(bounds, got) - _bucket_index(bounds, want)) <= 1, (i, kind, key, got, want)
                lo, hi = fig[f"{key}_bucket_ms"]  # and the bucket it names holds the true value
                assert lo / 1000 < want <= (math.inf if hi is None else hi / 1000 + 1e-12), (kind, key, lo, hi, want)
            mean = sum(values) / len(values) * 1000
            assert fig["mean"] == pytest.approx(mean, abs=1e-3)  # the sums are exact (to a microsecond)
        # five drafts of three tokens per request, 9 of the 15 accepted: the level's own counters
        assert m["speculative"] == {
            "drafts": 5 * REQUESTS, "draft_tokens": 15 * REQUESTS, "accepted_tokens": 9 * REQUESTS,
            "acceptance_rate": 0.6, "mean_acceptance_length": pytest.approx(1 + 9 / 5),
        }  # fmt: skip
        assert summary["levels"][i]["server_metrics"] == m  # beside the vLLM keys too
    one, six = (d["server_metrics"]["latency"] for d in summary["details"])
    with (out / "levels.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert float(rows[1]["server_ttft_p50_ms"]) == six["ttft"]["p50"] and rows[0]["server_queue_p50_ms"]
    assert six["queue"]["p50"] > one["queue"]["p50"] + 50  # six users on two slots: they queued
    assert printed.count(f"server latency ms ({REQUESTS} requests, its histograms): TTFT p50") == 2
    assert "drafts accepted 60%, 2.80 tokens per step" in printed
    assert "client TTFT p50" in (out / "server-ttft.svg").read_text()
    assert main(["report", str(out), "--html", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "id='chart-server-ttft'" in page and "server TTFT p99" in page


def test_a_front_end_that_serialises_requests_is_named_as_the_bottleneck(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # six slots: the engine never queues; the front end holds each request 40 ms, one at a time
    with GaugedServer(slots=6, token_ms=10, prefill_ms=5, alpha=0.0, frontend_ms=40) as srv:
        assert _bench(srv.base_url, out, "-q") == Exit.OK
    summary = json.loads((out / "summary.json").read_text())
    one, six = (d for d in summary["details"])
    assert six["ttft_ms"]["p50"] > one["ttft_ms"]["p50"] + 60  # the client saw the wait ...
    assert six["server_metrics"]["latency"]["ttft"]["p50"] < 40  # ... the engine did not
    assert "grew with load" in summary["conclusion"] and "not the engine" in summary["conclusion"]


def test_a_server_without_histograms_says_so(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with GaugedServer(slots=2, token_ms=5, prefill_ms=5, dialect="llama-server") as srv:
        assert _bench(srv.base_url, out, levels="2") == Exit.OK
    printed = capsys.readouterr().out
    m = json.loads((out / "summary.json").read_text())["details"][0]["server_metrics"]
    assert m["latency"] == {} and "llama-server publishes no latency histograms" in m["latency_note"]
    assert "server latency: llama-server publishes no latency histograms" in printed
    assert not (out / "server-ttft.svg").exists()


def test_tgi_names_and_what_it_does_not_publish(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with GaugedServer(slots=2, token_ms=5, prefill_ms=5, dialect="tgi") as srv:
        assert _bench(srv.base_url, out, "-q", levels="2") == Exit.OK
    m = json.loads((out / "summary.json").read_text())["details"][0]["server_metrics"]
    assert "tgi publishes no ttft, prefill, decode histogram" in m["latency_note"]
    assert m["latency"]["e2e"]["count"] == m["latency"]["queue"]["count"] == m["latency"]["itl"]["count"] == REQUESTS


def test_a_restart_during_a_level_is_no_data_for_it_said(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with GaugedServer(slots=2, token_ms=5, prefill_ms=5, restart_after=40 + 1 + 4) as srv:
        for _ in range(40):  # the server ran before: its histograms hold 40 requests the bench never sent
            srv.finished(0.0, 0.01, [0.02, 0.03, 0.04])
        assert _bench(srv.base_url, out, levels="2") == Exit.OK  # restarted after the level's 4th request
    printed = capsys.readouterr()
    m = json.loads((out / "summary.json").read_text())["details"][0]["server_metrics"]
    assert m["latency"] == {}
    assert "the counts began again during the level" in m["latency_note"]
    assert "server latency: no figures for ttft" in printed.out and "Traceback" not in printed.err


def test_a_capacity_search_reads_the_histograms_over_each_probe(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    with GaugedServer(slots=2, token_ms=10, prefill_ms=5, alpha=0.0) as srv:
        rc = main(
            ["bench", "-m", "compat:gauged-fake", "--base-url", srv.base_url, "--find-capacity", "--slo",
             "ttft_p90=20s", "--capacity-limit", "4", "--requests", "8", "--warmup", "0", "--max-output-tokens", "6",
             "--input-tokens", "16", "--server-metrics", "--out", str(out)]
        )  # fmt: skip
        served = len(srv.observed)
    assert rc == Exit.OK
    printed = capsys.readouterr().out
    probes = json.loads((out / "summary.json").read_text())["details"]
    assert [d["level"] for d in probes] == [1, 2, 4]
    for d in probes:  # each probe's own requests, counted by the server between its first and last read
        assert d["server_metrics"]["latency"]["ttft"]["count"] == d["completed"]
        assert d["server_metrics"]["latency"]["itl"]["count"] == d["completed"] * 5
    assert sum(d["completed"] for d in probes) == served
    assert printed.count("server latency ms (") == 3  # a line under each probe
