"""ttft bench --start-at: runs on several machines start their measured load at one wall-clock moment."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ttft.tui.cli import main
from ttft.tui.commands.bench.flag_types import check_start, start_time
from ttft.tui.commands.exits import Exit

from tests.fakes.batching_server import BatchingServer
from tests.support.paths import ROOT

BENCH = ["-m", "compat:batching-fake", "--concurrency", "2", "--requests", "8", "--warmup", "1"]
BENCH += ["--input-tokens", "16", "--max-output-tokens", "8", "--quiet"]


def test_a_start_time_needs_its_zone() -> None:
    assert start_time("2026-12-01T16:00:00Z") == datetime(2026, 12, 1, 16, tzinfo=UTC).timestamp()
    assert start_time("2026-12-01T17:00:00+01:00") == datetime(2026, 12, 1, 16, tzinfo=UTC).timestamp()
    assert start_time("1795000000") == 1795000000.0
    with pytest.raises(argparse.ArgumentTypeError, match="no zone"):
        start_time("2026-12-01T16:00:00")  # each machine would read it in its own zone
    with pytest.raises(argparse.ArgumentTypeError, match="expected a time"):
        start_time("at four")


def test_a_start_already_past_or_a_day_ahead_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = 1_800_000_000.0
    assert check_start(None, now) is None
    assert check_start(now + 60, now) is None
    assert "already passed" in (check_start(now - 5, now) or "")
    assert "24 hours" in (check_start(now + 2 * 86400, now) or "")
    rc = main(["bench", *BENCH, "--base-url", "http://127.0.0.1:9/v1", "--start-at", str(time.time() - 60),
               "--out", str(tmp_path / "r")])  # fmt: skip
    assert rc == Exit.USAGE and "already passed" in capsys.readouterr().err


def test_two_runs_given_one_start_load_the_server_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(tmp_path / "data")}
    start = time.time() + 12  # past both processes' start-up and warm-up, even on a loaded machine
    with BatchingServer(slots=8, token_ms=10, alpha=0.1, prefill_ms=10) as srv:
        procs = [_bench(srv.base_url, seed, tmp_path / name, start, env) for seed, name in ((1, "m1"), (2, "m2"))]
        errs = [p.communicate(timeout=180)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    for name in ("m1", "m2"):
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert datetime.fromisoformat(summary["start_at"]).timestamp() == pytest.approx(start, abs=0.001)
        measured = [
            json.loads(line)
            for line in (tmp_path / name / "turns.jsonl").read_text().splitlines()
            if not json.loads(line)["extra"]["bench"]["warmup"]
        ]
        first_send = min(datetime.fromisoformat(r["sent_at"]).timestamp() for r in measured)
        assert first_send >= start - 0.01  # not one measured request before the agreed moment
    rc = main(["report", "--merge", str(tmp_path / "m1"), str(tmp_path / "m2"), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "in common" not in out.err  # the overlap warning: the two runs were one load
    (level,) = json.loads(out.out)["benches"][0]["levels"]
    assert level["level"] == 4 and level["requests"] == 16  # 2 + 2 users, 8 + 8 requests
    assert level["overlap"] >= 0.8


def _bench(base_url: str, seed: int, out: Path, start: float, env: dict[str, str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "ttft.tui.cli", "bench", *BENCH, "--base-url", base_url, "--seed", str(seed)]
    cmd += ["--out", str(out), "--start-at", str(start)]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
