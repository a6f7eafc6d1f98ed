"""telemetry.log.sessions: the listing's medians agree with `ttft report` and the chat's summary (ok turns only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.log.sessions import list_sessions
from ttft.telemetry.log.turns import SessionLog

from tests.support.paths import ROOT
from tests.support.turns import play, stream


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _cut(events: list[ev.Event], end: type[ev.Event]) -> list[ev.Event]:
    """The same turn stopped after its third token: cancelled (Esc) or failed mid-stream."""
    kept = [e for e in events if not isinstance(e, ev.Usage | ev.Finished)][:5]
    last = kept[-1].t_ns
    return [*kept, end(last + 1) if end is ev.Cancelled else ev.Failed(last + 1, "connection_dropped", "dropped")]


def test_sessions_medians_leave_out_failed_and_cancelled_turns(data_dir: Path) -> None:
    log = SessionLog("20260101-000000-aaaa")
    log.append(play(stream(first_ms=100, gap_ms=10, visible=5)))
    log.append(play(_cut(stream(first_ms=900, gap_ms=50, visible=5), ev.Cancelled)))
    log.append(play(_cut(stream(first_ms=700, gap_ms=40, visible=5), ev.Failed)))
    (info,) = list_sessions()
    assert info.turns == 3 and info.errors == 1
    # the report's table and the chat's "Across N turns" take ok turns only: one TTFT, 100 ms
    assert info.median_ttft_ms == pytest.approx(100, abs=0.01)
    assert info.median_tpot_ms == pytest.approx(10, abs=0.01)
    report = subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", "report", str(log.path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    row = next(line for line in report.stdout.splitlines() if line.startswith(log.session_id))
    assert row.split()[4] == f"{info.median_ttft_ms:.0f}"  # turns, ok, errors, then TTFT p50
