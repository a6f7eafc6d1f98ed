"""``ttft proxy --watch``'s live view under Textual's pilot: a run's state file and session log written
here as a proxy writes them, the view fed by the log as it is appended: the rows (each at the time its
call ended), the sessions rebuilt from the logged shapes, the header saying whose calls they are and
when the proxy has ended, and q leaving with what it saw."""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime
from pathlib import Path

from textual.widgets import DataTable
from ttft.backends.proxy.server import ProxiedCall
from ttft.backends.proxy.state import RunInfo, publish
from ttft.telemetry.log.turns import SessionLog
from ttft.telemetry.proxy.logged import LOG_KEY, shape_fields
from ttft.tui.proxy.app import ProxyApp

from tests.tui.proxy.test_app import call, head_text, models

SETTLE_S = 0.6  # the watch reads the log 5 times a second; the table takes what it read 10 times


def logged(c: ProxiedCall) -> ProxiedCall:
    """The call as the proxy logs it: its shape in the record's ``extra``."""
    extra = {**c.record.extra, LOG_KEY: shape_fields(c.shape, c.record.wall_offset_ns)}
    return dataclasses.replace(c, record=dataclasses.replace(c.record, extra=extra))


def ended(c: ProxiedCall) -> str:
    assert c.record.wall_offset_ns is not None
    return datetime.fromtimestamp((c.shape.end_ns + c.record.wall_offset_ns) / 1e9).strftime("%H:%M:%S")


async def test_the_view_follows_a_log_as_it_is_appended_and_says_when_the_proxy_ended(tmp_path: Path) -> None:
    log = SessionLog(directory=tmp_path / "sessions")
    run = RunInfo(
        os.getpid(), 8787, "http://127.0.0.1:8787", "http://127.0.0.1:8099", log.session_id, log.path, "agent"
    )
    state = publish(run)
    calls = [logged(call(i)) for i in range(4)]  # one conversation: each call's message list extends the last's
    calls.append(logged(call(4, client="aider/1.0", model="gpt-4.1", digests=("other",))))
    for c in calls[:2]:  # before the watch began: read from the log's start
        log.append(c.record)
    app = ProxyApp(watch=dataclasses.replace(run, path=state.path))
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.pause(SETTLE_S)
            assert models(app) == ["claude-sonnet-4-5"] * 2
            head = head_text(app)
            assert "WATCHING" in head and "the proxy on http://127.0.0.1:8787" in head and "agent" in head
            assert log.session_id in head and "2 calls" in head
            for c in calls[2:]:  # the proxy goes on
                log.append(c.record)
            await pilot.pause(SETTLE_S)
            rows = list(app.rows())
            assert [r[2] for r in rows] == ["claude-sonnet-4-5"] * 4 + ["gpt-4.1"]
            assert [r[0] for r in rows] == [ended(c) for c in calls]  # when each ended, not when it was read
            assert rows[4][1] == "aider/1.0" and "5 calls" in head_text(app)
            await pilot.pause(1.2)  # the sessions are rebuilt at most once a second
            table = app.query_one("#sessions", DataTable)
            sessions = [[str(x) for x in table.get_row(k)] for k in table.rows]
            assert [s[:2] for s in sessions] == [["claude-cli/2.0.14", "4"], ["aider/1.0", "1"]]
            assert "ENDED" not in head_text(app)
            state.remove()  # the proxy ended
            await pilot.pause(SETTLE_S + 0.5)
            assert "ENDED" in head_text(app) and "it has ended" in head_text(app)
            await pilot.press("q")
            await pilot.pause(0.2)
    finally:
        state.remove()
    assert app.return_code == 0 and app.watched is not None and app.watched.ended
    assert [c.record.turn_index for c in app.watched.calls] == [0, 1, 2, 3, 4]
    assert [s.call_indices for s in app.watched.sessions] == [(0, 1, 2, 3), (4,)]


async def test_q_leaves_a_running_proxy_running(tmp_path: Path) -> None:
    log = SessionLog(directory=tmp_path / "sessions")
    run = RunInfo(os.getpid(), 9000, "http://127.0.0.1:9000", "", log.session_id, log.path)
    state = publish(run)
    try:
        app = ProxyApp(watch=dataclasses.replace(run, path=state.path))
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.pause(SETTLE_S)
            assert "No call yet" in str(app.query_one("#pane #live").render())
            assert "each provider’s own API" in head_text(app)
            await pilot.press("q")
            await pilot.pause(0.2)
        assert app.return_code == 0 and app.watched is not None and not app.watched.ended
        assert state.path.exists()  # the watch touched nothing of the proxy's
    finally:
        state.remove()
