"""``ttft proxy``'s live view under Textual's pilot, fed calls as the proxy hands them over: the table fills
at its tick, the filter and the pause change what it shows, a very long run keeps its newest rows, the
selected call and session reach the telemetry pane with their timelines, the app's own spans (--otlp)
time the sessions' tool steps, export writes the calls, and a burst of 200 calls renders."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import DataTable, Footer, Input, Static
from ttft.backends.proxy.server import ProxiedCall
from ttft.telemetry import events as ev
from ttft.telemetry.proxy.shape import CallShape
from ttft.tui.proxy.app import ProxyApp
from ttft.tui.widgets.timeline import TimelineView

from tests.support.turns import MS, at, recorder
from tests.telemetry.proxy.test_tool_join import loop, span

SETTLE_S = 0.35  # a few of the app's 0.1 s ticks


def call(
    i: int,
    *,
    client: str = "claude-cli/2.0.14",
    model: str = "claude-sonnet-4-5",
    digests: tuple[str, ...] | None = None,
    status: int = 200,
) -> ProxiedCall:
    """One call as the proxy hands it over (as tests/telemetry/proxy/test_sessions.py builds them): call i
    starts at i * 1000 ms, its first token 100 ms later, its end 300 ms later."""
    start, end = i * 1000.0, i * 1000.0 + 300.0
    r = recorder()
    r.feed(ev.AttemptSent(at(start)))
    r.feed(ev.HeadersReceived(at(start + 50), 1, status))
    if status == 200:
        r.feed(ev.TextDelta(at(start + 100), "ok", 1))
        r.feed(ev.Usage(at(end - 1), input=1000, cached_input=600, output=10))
        r.feed(ev.Finished(at(end), "end_turn"))
    else:
        r.feed(ev.Failed(at(end), "rate_limited", "slow down", status_code=status))
    rec = dataclasses.replace(r.finish(), turn_index=i, api="messages", source="proxy", client=client, model=model)
    shape = CallShape(
        call_index=i,
        start_ns=at(start) - MS // 2,
        end_ns=at(end) + MS // 2,
        api="messages",
        model=model,
        client=client,
        status=status,
        system_digest="sys",
        message_digests=digests if digests is not None else tuple(f"m{k}" for k in range(2 * i + 1)),
    )
    return ProxiedCall(rec, shape)


def pane_text(app: ProxyApp) -> str:
    content = app.query_one("#pane #live", Static).render()
    return content.plain if isinstance(content, Text) else str(content)


def head_text(app: ProxyApp) -> str:
    content = app.query_one("#head", Static).render()
    return content.plain if isinstance(content, Text) else str(content)


def footer_text(app: ProxyApp) -> str:
    footer = app.query_one(Footer)
    return " ".join(str(k.render()) for k in footer.query("FooterKey")).lower()


def models(app: ProxyApp) -> list[str]:
    return [row[2] for row in app.rows()]


async def test_the_table_fills_with_the_calls_as_they_end_and_the_pane_shows_the_newest() -> None:
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        assert list(app.rows()) == []
        app.feed(call(0, model="claude-haiku-4-5"))
        app.feed(call(1))
        await pilot.pause(SETTLE_S)
        rows = list(app.rows())
        assert [r[2] for r in rows] == ["claude-haiku-4-5", "claude-sonnet-4-5"]
        first = rows[0]
        assert first[1] == "claude-cli/2.0.14" and first[3] == "200"
        assert first[4] == "100 ms" and first[6] == "1,000 → 10" and first[7] == "60%"
        assert "2 calls" in head_text(app)
        # the cursor follows the newest call, and the pane shows it: the chat's record_text, and its bar
        assert "claude-sonnet-4-5" in pane_text(app) and "TTFT" in pane_text(app)
        assert len(app.query_one("#pane TimelineView", TimelineView).rows) == 1
        # moved up: that call, and new calls no longer pull the cursor away
        await pilot.press("up")
        await pilot.pause()
        assert "claude-haiku-4-5" in pane_text(app)
        app.feed(call(2, model="gpt-4.1"))
        await pilot.pause(SETTLE_S)
        assert models(app)[-1] == "gpt-4.1" and "claude-haiku-4-5" in pane_text(app)


async def test_a_failed_call_says_its_status_and_kind() -> None:
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        app.feed(call(0, status=429))
        await pilot.pause(SETTLE_S)
        (row,) = app.rows()
        assert row[3] == "429 rate_limited" and "ERROR" in pane_text(app)


async def test_slash_filters_by_client_or_model_and_esc_clears_it() -> None:
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        app.feed(call(0, client="aider/1.0", model="gpt-4.1"))
        app.feed(call(1, client="claude-cli/2.0.14", model="claude-sonnet-4-5"))
        app.feed(call(2, client="claude-cli/2.0.14", model="claude-haiku-4-5"))
        await pilot.pause(SETTLE_S)
        assert "/ filter" in footer_text(app) and "clear filter" not in footer_text(app)
        await pilot.press("slash")
        assert isinstance(app.focused, Input) and "esc clear filter" in footer_text(app)
        await pilot.press(*"HAIKU")  # a model, whatever the case
        await pilot.pause(SETTLE_S)
        assert models(app) == ["claude-haiku-4-5"] and "filter “haiku”: 1 pass" in head_text(app)
        await pilot.press("enter")  # kept; back to the table, whose keys work again
        assert isinstance(app.focused, DataTable) and app.focused.id == "calls"
        # a new call that the filter does not pass stays out of the table, but is counted
        app.feed(call(3, client="aider/1.0", model="gpt-4.1-mini"))
        app.feed(call(4, client="aider/1.0", model="claude-haiku-4-5"))
        await pilot.pause(SETTLE_S)
        assert models(app) == ["claude-haiku-4-5"] * 2 and "5 calls" in head_text(app)
        assert "2 pass" in head_text(app)
        await pilot.press("slash", "end", "ctrl+u")  # the box keeps its text: cleared by hand
        await pilot.press(*"Aider")  # a client
        await pilot.pause(SETTLE_S)
        assert [r[1] for r in app.rows()] == ["aider/1.0"] * 3
        await pilot.press("end", "ctrl+u", *"cli/2")  # a "/" in the box is text: clients and models hold one
        await pilot.pause(SETTLE_S)
        assert app.query_one(Input).value == "cli/2" and models(app) == ["claude-sonnet-4-5", "claude-haiku-4-5"]
        await pilot.press("escape")  # cleared, back to the table
        await pilot.pause(SETTLE_S)
        assert len(list(app.rows())) == 5 and "filter" not in head_text(app)
        assert isinstance(app.focused, DataTable) and app.query_one(Input).value == ""
        await pilot.press("slash", *"nothing-like-it", "enter")
        await pilot.pause(SETTLE_S)
        assert list(app.rows()) == [] and "No call passes the filter." in pane_text(app)
        await pilot.press("escape")
        await pilot.pause(SETTLE_S)
        assert len(list(app.rows())) == 5


async def test_keys_typed_into_the_filter_are_text_not_commands() -> None:
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        app.feed(call(0, model="qwen-pe"))
        await pilot.pause(SETTLE_S)
        await pilot.press("slash", *"qwen-pe")  # q, p and e: letters here, never quit, pause or export
        await pilot.pause(SETTLE_S)
        assert app.is_running and not app.paused and app.query_one(Input).value == "qwen-pe"
        assert models(app) == ["qwen-pe"]
        await pilot.press("tab")  # Tab leaves the box; it is not in Tab's round afterwards
        await pilot.press("tab", "tab", "tab")
        assert not isinstance(app.focused, Input)


async def test_a_very_long_run_keeps_the_newest_rows_and_says_the_older_are_hidden() -> None:
    app = ProxyApp(max_rows=50)  # the cap of 2,000, made small
    async with app.run_test(size=(160, 40)) as pilot:
        for i in range(40):
            app.feed(call(i, model=f"m-{i}", digests=(f"c{i}",)))
        await pilot.pause(SETTLE_S)
        assert len(list(app.rows())) == 40 and "hidden" not in head_text(app)
        for i in range(40, 60):  # a few past the cap: the oldest rows go one by one
            app.feed(call(i, model=f"m-{i}", digests=(f"c{i}",)))
        await pilot.pause(SETTLE_S)
        assert models(app) == [f"m-{i}" for i in range(10, 60)]
        assert "60 calls" in head_text(app) and "10 older rows hidden (the table keeps the newest 50)" in head_text(app)
        assert models(app)[-1] in pane_text(app)  # the cursor still follows the newest
        await pilot.press("up", "up")
        await pilot.pause()
        assert "m-57" in pane_text(app)
        for i in range(60, 300):  # a burst far past the cap: the table is filled again, the cursor kept
            app.feed(call(i, model=f"m-{i}", digests=(f"c{i}",)))
        await pilot.pause(SETTLE_S)
        assert models(app) == [f"m-{i}" for i in range(250, 300)] and "250 older rows hidden" in head_text(app)
        assert "300 calls" in head_text(app)
        await pilot.press("slash", *"m-29", "enter")  # m-29, m-290..m-299: the filter counts every call
        await pilot.pause(SETTLE_S)
        assert models(app) == ["m-29", *(f"m-{i}" for i in range(290, 300))] and "11 pass" in head_text(app)
        assert "hidden" not in head_text(app)
        await pilot.pause(1.2)
        assert app.query_one("#sessions", DataTable).row_count == 300  # the sessions cover every call


async def test_p_pauses_the_table_while_the_calls_are_kept_and_counted() -> None:
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        app.feed(call(0))
        await pilot.pause(SETTLE_S)
        await pilot.press("p")
        for i in range(1, 4):
            app.feed(call(i, model=f"model-{i}"))
        await pilot.pause(SETTLE_S)
        assert len(list(app.rows())) == 1 and len(app.calls) == 4
        assert "PAUSED" in head_text(app) and "3 new waiting" in head_text(app)
        await pilot.press("p")
        assert models(app)[1:] == ["model-1", "model-2", "model-3"] and "PAUSED" not in head_text(app)


async def test_the_sessions_are_rebuilt_and_a_selected_one_shows_its_waterfall() -> None:
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        for i in range(3):  # one conversation: each call's message list extends the last one's
            app.feed(call(i))
        app.feed(call(3, client="aider/1.0", digests=("other",)))
        await pilot.pause(1.5)  # the sessions are rebuilt at most once a second
        table = app.query_one("#sessions", DataTable)
        assert table.row_count == 2
        rows = [[str(c) for c in table.get_row(k)] for k in table.rows]
        assert rows[0][:2] == ["claude-cli/2.0.14", "3"] and rows[0][2].startswith("Of ")
        table.focus()
        await pilot.pause()
        assert "steps          3 · model 900 ms" in pane_text(app)  # the session's agent rows, not a call's
        (label, timeline) = app.query_one("#pane TimelineView", TimelineView).rows[0]
        assert label == "s" and {"app"} <= {s.phase for s in timeline.segments}
        app.feed(call(4, model="gpt-4.1", digests=("new",)))  # a new call while the session is read
        await pilot.pause(SETTLE_S)
        assert models(app)[-1] == "gpt-4.1" and "steps          3 · model 900 ms" in pane_text(app)


async def test_e_exports_the_calls_so_far_as_jsonl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        for i in range(3):
            app.feed(call(i))
        await pilot.pause(SETTLE_S)
        await pilot.press("e")
    (path,) = tmp_path.glob("ttft-proxy-*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [rec["turn_index"] for rec in lines] == [0, 1, 2]
    assert all(rec["source"] == "proxy" for rec in lines)
    assert path.stat().st_mode & 0o077 == 0  # a private file, as every log


async def test_a_burst_of_200_calls_renders_and_outside_text_is_shown_never_run() -> None:
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        for i in range(200):
            app.feed(call(i, model="evil\x1b]0;pwned\x07" if i == 7 else f"m-{i % 5}", digests=(f"c{i}",)))
        await pilot.pause(SETTLE_S)
        rows = list(app.rows())
        assert len(rows) == 200 and "200 calls" in head_text(app)
        assert "\x1b" not in rows[7][2] and "␛" in rows[7][2]
        await pilot.press("home")
        await pilot.pause()
        for _ in range(10):
            await pilot.press("down")
        await pilot.pause(1.5)
        assert app.query_one("#sessions", DataTable).row_count == 200  # every call its own conversation
    assert not app.crash_lines


async def test_calls_fed_from_the_proxys_thread_at_20_a_second_all_reach_the_table() -> None:
    import threading
    import time

    app = ProxyApp()
    async with app.run_test(size=(120, 40)) as pilot:  # narrow: the pane below the tables

        def app_calls() -> None:
            for i in range(40):
                app.feed(call(i, digests=(f"t{i}",)))
                time.sleep(0.05)

        feeder = threading.Thread(target=app_calls)
        feeder.start()
        while feeder.is_alive():
            await pilot.pause(0.1)
        feeder.join()
        await pilot.pause(SETTLE_S)
        assert [int(r[0] != "") for r in app.rows()] == [1] * 40
        assert app.has_class("-narrow")


async def test_with_a_plan_the_view_runs_the_proxy_and_q_keeps_its_run(tmp_path: Path) -> None:
    """The real proxy on its own thread, the official SDK calling through it: the call's row appears, q
    stops the proxy and keeps its run (its calls, its log) for the summary, with status 0."""
    import asyncio

    import openai
    from ttft.backends.proxy.plan import ProxyPlan
    from ttft.backends.proxy.server import ProxyConfig

    from tests.fakes import FakeServer, Schedule

    with FakeServer(Schedule(first_token_ms=10, token_ms=1, visible_tokens=3)) as srv:
        plan = ProxyPlan(ProxyConfig(port=0, upstream=srv.url), sessions_dir=tmp_path)
        app = ProxyApp(plan)
        async with app.run_test(size=(160, 40)) as pilot:
            while app.started is None:
                await pilot.pause(0.05)
            await pilot.pause(SETTLE_S)
            assert app.started.base_url in head_text(app)
            client = openai.OpenAI(
                base_url=app.started.base_url + "/v1", api_key="sk-test-SECRET-pilot", max_retries=0, timeout=30
            )
            await asyncio.to_thread(
                client.chat.completions.create, model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
            )
            while not app.calls:
                await pilot.pause(0.05)
            await pilot.pause(SETTLE_S)
            assert models(app) == ["gpt-4o-mini"]
            await pilot.press("q")
            await pilot.pause(SETTLE_S)
        assert app.return_code == 0 and app.result is not None and app.result.status == 0
        assert [c.record.model for c in app.result.calls] == ["gpt-4o-mini"]
        assert app.result.log_path.is_file()


async def test_a_port_taken_ends_the_view_with_the_proxys_error() -> None:
    import socket

    from ttft.backends.proxy.plan import ProxyPlan
    from ttft.backends.proxy.server import ProxyConfig, ProxyError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        app = ProxyApp(ProxyPlan(ProxyConfig(port=taken.getsockname()[1], upstream="http://127.0.0.1:9")))
        async with app.run_test(size=(160, 40)) as pilot:
            while app.start_error is None and app.is_running:
                await pilot.pause(0.05)
    assert isinstance(app.start_error, ProxyError) and app.return_code == 2


async def test_the_apps_own_spans_time_the_sessions_tool_steps_whatever_the_filter_shows() -> None:
    """``--otlp`` in the live view: the spans handed over join the sessions rebuilt from every call, while
    the filter and the row cap are only the calls table's."""
    app = ProxyApp(max_rows=1)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("slash", *"nothing-passes", "enter")
        for rec, shape in loop():  # a tool asked for at 1 s, its result carried at 3.5 s
            app.feed(ProxiedCall(rec, shape))
        app.feed_spans([span(1500, 3000, call_id="toolu_1")])
        await pilot.pause(1.5)  # the sessions are rebuilt at most once a second
        assert list(app.rows()) == [] and "0 pass" in head_text(app) and len(app.app_spans) == 1
        [session] = app.sessions
        assert "Bash 1.5 s; 1 of 1 timed by the app's own telemetry" in session.summary
        [bash] = [st for st in session.record.steps if st.kind == "tool"]
        assert (bash.timing, bash.matched_by, bash.gap_ms) == ("span", "call_id", 2500.0)


async def test_a_slow_rebuild_spaces_out_the_next_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sessions take at most SESSIONS_SHARE of the time: after a rebuild of 0.2 s, none comes for 2 s
    (0.2 / 0.1), however many calls arrive; the view keeps taking them meanwhile."""
    from ttft.tui.proxy import app as view

    rebuilt: list[int] = []
    real = view.rebuild

    def slow(calls: list[object], spans: tuple[object, ...]) -> object:
        calls = list(calls)
        rebuilt.append(len(calls))
        time.sleep(0.2)
        return real(calls, spans)  # type: ignore[arg-type]

    monkeypatch.setattr(view, "rebuild", slow)
    app = ProxyApp()
    async with app.run_test(size=(160, 40)) as pilot:
        app.feed(call(0))
        await pilot.pause(0.6)  # the first rebuild comes at the first tick
        assert rebuilt == [1]
        for i in range(1, 4):
            app.feed(call(i))
            await pilot.pause(0.4)
        assert rebuilt == [1] and len(list(app.rows())) == 4  # 1.2 s more: still spaced out, the calls all shown
