"""Snapshots of the compare screen after one prompt, at 160x48 (4 panes side by side) and 80x24 (stacked).

The fake backends run in virtual time (stamps are exactly the schedule), so every figure on
screen is the same on every run. Update with ``pytest tests/tui/compare/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from ttft.tui.compare.app import CompareApp

from tests.support.compare_fakes import ScheduledBackend

T0 = 1_000_000_000_000


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))


def backends(n: int) -> list[ScheduledBackend]:
    made = [
        ScheduledBackend("quick-start", ttft_s=0.12, gap_s=0.04, tokens=14, reasoning=4, virtual_t0_ns=T0),
        ScheduledBackend("quick-decode", ttft_s=0.9, gap_s=0.008, tokens=18, word="w", virtual_t0_ns=T0),
        ScheduledBackend("overloaded", fail_status=529, virtual_t0_ns=T0),
        ScheduledBackend("steady", ttft_s=0.3, gap_s=0.02, tokens=10, word="s", virtual_t0_ns=T0),
    ]
    return made[:n]


def app_for(n: int) -> CompareApp:
    return CompareApp(backends(n), session_id="snap", comparison_id="cmp-snapshot", fps=10)


async def run_prompt(pilot: Pilot) -> None:
    app = pilot.app
    assert isinstance(app, CompareApp)
    app.query_one("#prompt").cursor_blink = False  # type: ignore[attr-defined]  # a blinking cursor is not deterministic
    app.query_one("#prompt").value = "Explain prefill vs decode"  # type: ignore[attr-defined]
    await pilot.press("enter")
    for _ in range(400):
        await pilot.pause(0.02)
        if app.results and not app.in_flight:
            break
    assert app.results, "the prompt did not finish"
    for _ in range(3):  # let mounts, layout and scroll-to-end settle
        await pilot.wait_for_scheduled_animations()
        await pilot.pause(0.1)


def test_compare_4_panes_160x48(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(4), terminal_size=(160, 48), run_before=run_prompt)


def test_compare_3_panes_stacked_80x24(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app_for(3), terminal_size=(80, 24), run_before=run_prompt)
