"""``ttft compare --headless``: summary table, verdicts, exit codes, exports, spec syntax."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from ttft.telemetry.log.sessions import list_sessions
from ttft.telemetry.log.turns import read_records
from ttft.tui import cli
from ttft.tui.commands import compare as cmd
from ttft.tui.commands.args import compare_args

from tests.support.compare_fakes import ScheduledBackend

SCHEDULES = {
    "quick-start": {"ttft_s": 0.005, "gap_s": 0.006, "tokens": 6},
    "quick-decode": {"ttft_s": 0.08, "gap_s": 0.0005, "tokens": 6},
    "broken": {"fail_status": 503},
}


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None]]:
    """The data dir for the session logs; returns the (spec, base URL) of each backend made."""
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return []


def run(argv: list[str], made: list[tuple[str, str | None]] | None = None) -> int:
    """``ttft ARGV``, with scheduled fakes passed to the command as its backend factory."""

    def factory(spec: str, base_url: str | None) -> ScheduledBackend:
        if made is not None:
            made.append((spec, base_url))
        provider, _, model = spec.partition(":")
        if model not in SCHEDULES:
            raise ValueError(f"unknown model {model!r}")
        return ScheduledBackend(model, provider=provider, base_url=base_url, **SCHEDULES[model])  # type: ignore[arg-type]

    args = compare_args(cli.build_parser("compare").parse_args(argv))
    return cmd.run(args, factory=factory)


def test_headless_table_and_verdicts(capsys: pytest.CaptureFixture[str], tmp_path: Path, env: list) -> None:
    out_dir = tmp_path / "out"
    rc = run(
        [
            "compare",
            "--headless",
            "-m",
            "fake:quick-start",
            "-m",
            "fake:quick-decode@http://127.0.0.1:1/v1",
            "-m",
            "fake:broken",
            "--base-url",
            "http://127.0.0.1:2/v1",
            "--repeat",
            "4",
            "--out",
            str(out_dir),
            "say hi",
        ],
        env,
    )
    assert rc == 4  # one pane failed, two did not: partial
    assert env == [
        ("fake:quick-start", "http://127.0.0.1:2/v1"),
        ("fake:quick-decode", "http://127.0.0.1:1/v1"),
        ("fake:broken", "http://127.0.0.1:2/v1"),
    ]
    out = capsys.readouterr().out
    assert "parallel: every pane started at the same instant" in out
    assert "4 trials" in out
    assert "fake:quick-start" in out and "★" in out
    assert "A reaches the first token" in out and "sooner than B (95% interval" in out
    assert "B spends" in out and "less per output token than A" in out
    assert "C: 4 failed of 4" in out and "HTTP 503" in out
    # The session log has every turn, tagged.
    (session,) = list_sessions()
    recs = list(read_records(session.path))
    assert len(recs) == 12
    cid = recs[0]["extra"]["comparison_id"]
    assert {r["extra"]["comparison_id"] for r in recs} == {cid}
    # The export: raw JSONL and a per-pane CSV summary.
    assert len((out_dir / f"{cid}.jsonl").read_text().splitlines()) == 12
    rows = list(csv.DictReader((out_dir / f"{cid}-summary.csv").open()))
    assert [r["pane"] for r in rows] == ["A", "B", "C"]
    assert rows[0]["ttft_winner"] == "True" and rows[1]["tpot_winner"] == "True"
    assert rows[2]["failed"] == "4" and rows[2]["ttft_median"] == ""
    verdicts = list(csv.DictReader((out_dir / f"{cid}-verdicts.csv").open()))
    assert any(v["metric"] == "ttft" and v["clear"] == "True" and v["better"] == "A" for v in verdicts)


def test_headless_json_and_sequential(capsys: pytest.CaptureFixture[str]) -> None:
    rc = run(["compare", "--headless", "--json", "--sequential", "-m", "f:quick-start", "-m", "f:quick-decode", "hi"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "sequential" and data["trials"] == 1
    assert [p["name"] for p in data["panes"]] == ["f:quick-start", "f:quick-decode"]
    ttft = next(v for v in data["verdicts"] if v["metric"] == "ttft")
    assert not ttft["clear"] and "too few turns" in ttft["text"]


def test_all_failed_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["compare", "--headless", "-m", "f:broken", "-m", "f:broken", "hi"]) == 1


def test_bad_spec_is_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["compare", "--headless", "-m", "f:nope", "-m", "f:broken", "hi"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'nope'" in err and "Traceback" not in err


def test_too_many_panes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["compare", "--headless", *["-m", "f:broken"] * 5, "hi"]) == 2
