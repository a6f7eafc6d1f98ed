"""``ttft bench --probe-rate``: the one user beside the load, against the batching fake's slots (the real
``ttft bench``, the real HTTP stack, a loopback server whose queue is its slots)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.batching_server import BatchingServer

SLOTS = 2
REQUESTS = 12


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def bench(srv: BatchingServer, out: Path, *extra: str) -> int:
    return main(
        [
            "bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--requests", str(REQUESTS),
            "--warmup", "1", "--input-tokens", "16", "--max-output-tokens", "6", "--out", str(out), *extra,
        ]
    )  # fmt: skip


def test_the_user_beside_the_load_waits_for_a_slot_once_the_load_fills_them(tmp_path: Path, capsys) -> None:
    # 2 slots, answers of ~150 ms: at 1 user a slot is free for the probe (TTFT ~ the 20 ms prefill);
    # at 4 users both slots are busy and two requests wait, so a probe waits for slots to free (about
    # 1.5 answers, ~200 ms): a gap no scheduling noise closes.
    out = tmp_path / "run"
    with BatchingServer(slots=SLOTS, token_ms=25, alpha=0.2, prefill_ms=20) as srv:
        rc = bench(srv, out, "--concurrency", f"1,{SLOTS * 2}", "--probe-rate", "5")
        served = srv.served
    assert rc == Exit.OK
    printed = capsys.readouterr().out
    assert printed.count("one user at 5 req/s beside this load: TTFT p50 ") == 2
    assert "One user at 5 req/s beside the load waited TTFT p50" in printed  # the conclusion's

    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    probes = [t for t in turns if t["extra"]["bench"].get("probe")]
    load = [t for t in turns if not t["extra"]["bench"].get("probe") and not t["extra"]["bench"]["warmup"]]
    assert len(load) == REQUESTS * 2  # the load sent what it was asked, the probe beside it
    assert served == 1 + len(load) + len(probes)  # every probe reached the server, on top
    assert all(t["status"] == "ok" and t["extra"]["bench"]["probe_rate"] == 5.0 for t in probes)
    assert len({t["prompt"] for t in turns}) == len(turns)  # the probe's prompts are its own

    summary = json.loads((out / "summary.json").read_text())
    assert summary["probe_rate"] == 5.0
    light, heavy = summary["levels"]
    for lv in summary["levels"]:
        assert lv["completed"] == REQUESTS and lv["failed"] == 0  # the load's figures count the load's alone
        assert lv["probe"]["requests"] >= 1 and lv["probe"]["errors"] == 0
    detail = summary["details"][1]
    assert detail["requests"] == REQUESTS and detail["probe"] == heavy["probe"]
    assert heavy["probe"]["ttft_ms"]["p50"] > light["probe"]["ttft_ms"]["p50"]  # the user felt the load
    sent = sum(lv["probe"]["requests"] for lv in summary["levels"])
    assert sent == len(probes)

    rows = list(csv.DictReader((out / "levels.csv").open()))
    assert [float(r["probe_ttft_p50_ms"]) for r in rows] == [lv["probe"]["ttft_ms"]["p50"] for lv in summary["levels"]]

    page = tmp_path / "report.html"
    assert main(["report", str(out), "--html", str(page)]) == 0
    html = page.read_text()
    assert "user TTFT p50" in html and "5/s, " in html
    capsys.readouterr()
    assert main(["report", str(out)]) == 0  # the text report: the line under each level's row
    assert capsys.readouterr().out.count("one user at 5 req/s beside this load: TTFT p50 ") == 2


def test_with_two_worker_processes_there_is_still_one_user(tmp_path: Path) -> None:
    out = tmp_path / "w2"
    with BatchingServer(slots=4, token_ms=25, alpha=0.2, prefill_ms=20) as srv:
        rc = bench(srv, out, "--concurrency", "4", "--workers", "2", "--probe-rate", "10", "-q")
    assert rc == Exit.OK
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    probes = [t for t in turns if t["extra"]["bench"].get("probe")]
    assert probes and {t["extra"]["bench"]["worker"] for t in probes} == {0}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == REQUESTS and summary["levels"][0]["probe"]["users"] == 1


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0", "expected requests/s above 0, got 0"),
        ("-2", "expected requests/s above 0, got -2"),
        ("nan", "expected requests/s above 0, got nan"),
        ("inf", "inf/s is a load, not one user: at most 1000/s"),
        ("1001", "1001/s is a load, not one user: at most 1000/s"),
        ("fast", "expected requests/s, e.g. 0.5, got 'fast'"),
    ],
)
def test_a_rate_that_is_not_one_users_is_refused(value: str, said: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--probe-rate", value])
    assert exc.value.code == Exit.USAGE
    assert f"argument --probe-rate: {said}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--find-capacity", "--slo", "ttft=500ms"], "--find-capacity's probes are a search: leave one out"),
        (["--cluster", "local:2"], "--cluster's drivers load from elsewhere: leave one out"),
    ],
)
def test_probe_rate_with_a_search_or_a_cluster_is_refused_before_anything_is_sent(
    flags: list[str], said: str, tmp_path: Path, capsys
) -> None:
    args = ["bench", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--probe-rate", "1", *flags]
    assert main([*args, "--out", str(tmp_path / "run")]) == Exit.USAGE
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()
