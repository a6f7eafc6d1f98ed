"""The compare screen's pane set and what leaves it: a pane that cannot start changes nothing, labels are
found whatever their case, and an export before any prompt has ended writes no file."""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.tui.compare.app import CompareApp, PaneView
from ttft.tui.compare.output import export

from tests.support.compare_fakes import ScheduledBackend
from tests.support.tui_support import heard

SIZE = (160, 48)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def test_nothing_to_export_writes_no_file(tmp_path: Path) -> None:
    assert export([], tmp_path / "out", "cmp-x") == []
    assert not (tmp_path / "out").exists()


async def test_a_pane_that_cannot_start_is_not_added() -> None:
    def factory(spec: str, base_url: str | None) -> ScheduledBackend:
        raise RuntimeError(f"no key for {spec}")

    app = CompareApp([ScheduledBackend("a"), ScheduledBackend("b")], factory=factory)
    async with app.run_test(size=SIZE) as pilot:
        roster = app.compare.roster
        with pytest.raises(RuntimeError, match="no key for fake:c"):
            await roster.add("fake:c", blind=False, history=[])
        await pilot.pause()
        assert [v.label for v in app.query(PaneView)] == ["A", "B"]
        assert [v.label for v in app.views] == ["A", "B"]
        assert [p.label for p in app.runner.panes] == ["A", "B"]
        assert roster.specs == {}


async def test_labels_are_found_whatever_their_case() -> None:
    app = CompareApp([ScheduledBackend("a"), ScheduledBackend("b")])
    async with app.run_test(size=SIZE):
        roster = app.compare.roster
        assert roster.index(" b ") == 1
        assert roster.index("A") == 0
        assert roster.index("C") is None


async def test_an_export_the_disk_refuses_is_told_and_the_screen_goes_on(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    app = CompareApp([ScheduledBackend("a"), ScheduledBackend("b")], out_dir=blocked / "exports")
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#prompt").value = "hi"  # type: ignore[attr-defined]
        await pilot.press("enter")
        for _ in range(200):
            await pilot.pause(0.05)
            if app.results and not app.in_flight:
                break
        assert app.results
        await pilot.press("ctrl+s")
        await pilot.pause(0.1)
        assert app.is_running and app.last_export == []
        notices = heard(app)
        assert any(f"could not write the export to {blocked / 'exports'}" in s for s in notices), notices
