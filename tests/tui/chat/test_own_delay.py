"""ttft's own delay: the user's submit -> the first send, recorded, drawn and shown, never inside TTFT.

Also: the chat warms its backend up at start-up, and ``ttft ask`` imports only what its provider needs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from ttft.backends.base import ChatRequest
from ttft.backends.compare.runner import ComparePane, CompareRunner
from ttft.backends.turn import new_recorder
from ttft.telemetry import events as ev
from ttft.telemetry.recorder import TurnRecorder
from ttft.telemetry.settings import TurnSettings
from ttft.telemetry.view.timeline import live_timeline, turn_timeline
from ttft.tui.chat.app import ChatApp
from ttft.tui.cli import main
from ttft.tui.widgets.telemetry_pane import live_text, record_text

from tests.fakes import FakeServer, Schedule
from tests.support.paths import ROOT
from tests.support.tui_support import MS, T0, TimedBackend, factory_for, script, wait_until


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "TTFT_IN_PROCESS"):
        monkeypatch.delenv(k, raising=False)
    return tmp_path


def recorder() -> TurnRecorder:
    return TurnRecorder("s", 0, "fake", "chat.completions", "m", None, TurnSettings(), "hi")


def turn(submitted_before_sent_ms: float | None, *, load_ms: float | None = None) -> TurnRecorder:
    """A turn whose request goes out at T0, first token at T0 + 412 ms."""
    rec = recorder()
    t = T0
    if load_ms is not None:
        t -= int(load_ms * MS)
    if submitted_before_sent_ms is not None:
        rec.feed(ev.Submitted(t - int(submitted_before_sent_ms * MS)))
    if load_ms is not None:
        rec.feed(ev.ModelLoadStarted(t))
        rec.feed(ev.ModelLoadFinished(T0 - MS))
    for e in script(visible=5, first_ms=412):
        rec.feed(e)
    rec.feed(ev.Finished(T0 + 500 * MS, "stop"))
    return rec


# --- telemetry ---------------------------------------------------------------------------
def test_own_delay_is_its_own_field_and_not_in_ttft() -> None:
    d = turn(300).finish().to_dict()
    m = d["metrics"]
    assert m["own_delay_ms"] == pytest.approx(300)
    assert m["ttft_ms"] == pytest.approx(412)  # first token - first send, as without the submit
    assert m["e2e_ms"] == pytest.approx(turn(None).finish().to_dict()["metrics"]["e2e_ms"])
    assert sum(m["phases_ms"].values()) == pytest.approx(m["e2e_ms"])  # the phases still add up to E2E
    assert d["events_ms"]["sent"] == 0.0  # the record's time axis still starts at the send
    assert turn(None).finish().to_dict()["metrics"]["own_delay_ms"] is None  # no submit, no figure


def test_a_model_load_after_the_submit_stays_its_own_phase() -> None:
    m = turn(40, load_ms=800).finish().to_dict()["metrics"]
    assert m["load_ms"] == pytest.approx(799)
    assert m["own_delay_ms"] == pytest.approx(41)  # submit -> send is 840 ms, 799 of it the load


def test_a_request_that_never_went_out_has_no_own_delay() -> None:
    rec = recorder()
    rec.feed(ev.Submitted(T0))
    rec.feed(ev.Failed(T0 + 5 * MS, "missing_key", "no key"))
    assert rec.finish().to_dict()["metrics"]["own_delay_ms"] is None


def test_the_timeline_draws_it_before_the_send() -> None:
    segs = {s.phase: s for s in turn_timeline(turn(300).finish()).segments}
    assert (segs["client"].start_ms, segs["client"].end_ms) == pytest.approx((-300, 0))
    assert segs["waiting"].start_ms == 0.0
    tl = turn_timeline(turn(40, load_ms=800).finish())
    assert [s.phase for s in tl.segments][:3] == ["client", "loading", "waiting"]
    assert tl.start_ms == pytest.approx(-840)
    # a delay nobody can feel is not drawn (it would only shift every row by a hair)
    assert "client" not in {s.phase for s in turn_timeline(turn(2).finish()).segments}


def test_the_live_view_counts_from_the_submit() -> None:
    rec = recorder()
    rec.feed(ev.Submitted(T0))
    snap = rec.snapshot(T0 + 120 * MS)
    assert snap.phase == "starting" and snap.own_delay_ms == pytest.approx(120)
    assert "sending the request" in live_text(snap).plain and "ttft's own" in live_text(snap).plain
    assert [s.phase for s in live_timeline(snap).segments] == ["client"]
    rec.feed(ev.AttemptSent(T0 + 150 * MS, 1))
    snap = rec.snapshot(T0 + 400 * MS)
    assert snap.phase == "waiting" and snap.own_delay_ms == pytest.approx(150)
    assert snap.elapsed_ms == pytest.approx(250)  # the wait for the server still counts from the send
    assert [s.phase for s in live_timeline(snap).segments] == ["client", "waiting"]


def test_the_pane_shows_it_when_it_is_large() -> None:
    shown = record_text(turn(300).finish()).plain
    assert "ttft's own" in shown and "300 ms" in shown
    assert "ttft's own" not in record_text(turn(2).finish()).plain


# --- the chat ----------------------------------------------------------------------------
async def send(pilot, app: ChatApp, text: str) -> None:
    app.query_one("#prompt").value = text
    await pilot.press("enter")


async def test_a_chat_turn_records_its_own_delay() -> None:
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=20, token_ms=2, visible=3)))
    async with app.run_test(size=(120, 40)) as pilot:
        for i in range(2):
            await send(pilot, app, f"turn {i}")
            await wait_until(pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy)
        for rec in app.chat.session.records:
            m = rec.metrics
            assert 0 <= m.own_delay_ms < 5000  # Enter -> send; the bound only catches a wrong origin
            assert m.ttft_ms >= 20  # the backend's own wait, measured from its send as always


class CountingFactory:
    """Fake backends, counted; each can be warmed up."""

    def __init__(self, fail: bool = False) -> None:
        self.made: list[WarmBackend] = []
        self.calls = 0
        self.fail = fail

    def __call__(self, spec: str, base_url: str | None) -> WarmBackend:
        self.calls += 1
        if self.fail:
            raise ValueError("unknown provider 'nope'")
        b = WarmBackend()
        self.made.append(b)
        return b


class WarmBackend(TimedBackend):
    def __init__(self) -> None:
        super().__init__(first_ms=10, token_ms=1, reasoning=0, visible=2)
        self.warmed_before: int | None = None  # how many requests it had seen when warmed

    async def warm_up(self) -> None:
        self.warmed_before = len(self.requests)


async def test_the_chat_warms_its_backend_up_before_the_first_enter() -> None:
    factory = CountingFactory()
    app = ChatApp("fake:warm", factory=factory, warm_up=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: bool(factory.made) and factory.made[0].warmed_before is not None)
        assert app.chat.session.backend is factory.made[0]
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy)
        assert factory.calls == 1  # the first turn used the warmed backend, it did not make another
        assert factory.made[0].warmed_before == 0
        assert app.chat.session.records[0].status == "ok"


async def test_a_backend_that_cannot_start_still_says_so_on_the_first_turn() -> None:
    from ttft.tui.widgets.error_card import ErrorCard

    factory = CountingFactory(fail=True)
    app = ChatApp("nope:model", factory=factory, warm_up=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: factory.calls == 1)
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: len(app.query(ErrorCard)) == 1)
        assert "unknown provider" in str(app.query_one(ErrorCard).content)
        assert factory.calls == 1  # the warm-up's failure was the first turn's: not paid twice
        assert not app.chat.busy


async def test_a_turn_sent_while_the_backend_is_starting_waits_for_that_one() -> None:
    def slow_factory(spec: str, base_url: str | None) -> WarmBackend:
        import time

        made.append(WarmBackend())
        time.sleep(0.3)  # a process start, on the stream loop
        return made[-1]

    made: list[WarmBackend] = []
    app = ChatApp("fake:slow", factory=slow_factory, warm_up=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: bool(made))
        await send(pilot, app, "hi")  # while the warm-up is still creating it
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy)
        assert len(made) == 1  # one backend: the turn waited for the warm-up's
        assert app.chat.session.records[0].status == "ok"
        assert made[0].warmed_before is not None


class SlowLoadingLocal(TimedBackend):
    """A local engine whose start-up load (``load()``, as the real one has) lasts until the test releases it."""

    provider = "local"

    def __init__(self) -> None:
        super().__init__(first_ms=10, token_ms=1, reasoning=0, visible=2)
        self.release = threading.Event()  # set from the test's thread; the load runs on the stream loop
        self.loaded = False

    async def load(self) -> dict:
        await asyncio.to_thread(self.release.wait, 30)
        self.loaded = True
        return {}


async def test_a_turn_sent_during_the_start_up_load_shows_the_wait_as_its_load_phase(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ttft.tui.session

    made: list[TurnRecorder] = []

    def spy(*args: object, **kwargs: object) -> TurnRecorder:
        made.append(new_recorder(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(ttft.tui.session, "new_recorder", spy)
    backend = SlowLoadingLocal()
    app = ChatApp("local", factory=factory_for(backend), warm_up=True)
    hold_ms = 300

    def release_once_the_turn_waits() -> None:
        # From a thread: while the turn waits for the load, the pilot's own waits for an idle screen do too.
        deadline = time.monotonic() + 30
        while not (made and made[0].load_start_ns is not None) and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(hold_ms / 1000)
        backend.release.set()

    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.chat.session.backend is not None)
        threading.Thread(target=release_once_the_turn_waits, daemon=True).start()
        await send(pilot, app, "hi")  # the load cannot end before the release: no race with a slow machine
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=30)
        m = app.chat.session.records[0].metrics
        rec = made[0]
        assert backend.loaded and rec.load_end_ns is not None and rec.submitted_ns is not None
        assert m.load_ms >= hold_ms  # the wait for the load is the turn's load phase ...
        sent_ns = rec.attempts[0].sent_ns
        rest_ms = (sent_ns - rec.submitted_ns - (rec.load_end_ns - rec.load_start_ns)) / MS
        assert m.own_delay_ms == pytest.approx(rest_ms, abs=0.01)  # ... not its own delay (only the rest)
        assert m.ttft_ms >= 10  # and never inside TTFT


@pytest.fixture(scope="module")
def srv():
    with FakeServer(Schedule(first_token_ms=30, token_ms=5, visible_tokens=5)) as s:
        yield s


async def test_the_real_chat_backend_process_is_started_and_warm_before_the_first_enter(srv: FakeServer) -> None:
    app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)  # the real factory: a backend process
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: not [w for w in app.workers if w.group == "warm-up"], timeout=60)
        backend = app.chat.session.backend
        assert backend is not None and type(backend).__name__ == "ProcessBackend"
        assert not [r for r in srv.requests if r.path.endswith("completions")]  # the warm-up sent nothing
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=30)
        rec = app.chat.session.records[0]
        assert rec.status == "ok", rec.error
        assert app.chat.session.backend is backend
        assert 0 <= rec.metrics.own_delay_ms < 5000


# --- compare -----------------------------------------------------------------------------
class OneShot:
    provider, api, base_url = "fake", "chat.completions", None

    def __init__(self, model: str) -> None:
        self.model = model

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        yield ev.AttemptSent(ev.now_ns(), 1)
        yield ev.TextDelta(ev.now_ns(), "ok")
        yield ev.Finished(ev.now_ns(), "stop")

    async def aclose(self) -> None:
        pass


async def test_compare_turns_count_their_own_delay_from_the_submit() -> None:
    runner = CompareRunner([ComparePane(OneShot("a"), "A"), ComparePane(OneShot("b"), "B")])
    asked = ev.now_ns() - 200 * MS
    result = await runner.run_prompt("hi", repeat=2, submitted_ns=asked)
    own = [[r.to_dict()["metrics"]["own_delay_ms"] for r in trials] for trials in result.records]  # [pane][trial]
    first, second = [o[0] for o in own], [o[1] for o in own]
    assert all(v >= 200 for v in first)  # trial 1: from the user's submit
    assert all(0 <= v < 200 for v in second)  # trial 2 was started by ttft itself, later


async def test_the_compare_screen_warms_every_pane_up_before_the_first_prompt() -> None:
    from ttft.tui.compare.app import CompareApp

    a, b = WarmBackend(), WarmBackend()
    app = CompareApp([a, b], session_id="s1", comparison_id="cmp-1")
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: a.warmed_before is not None and b.warmed_before is not None)
        app.query_one("#prompt").value = "hi"  # type: ignore[attr-defined]
        before = ev.now_ns()
        await pilot.press("enter")
        after = ev.now_ns()
        await wait_until(pilot, lambda: bool(app.results) and not app.in_flight, timeout=15)
        assert (a.warmed_before, b.warmed_before) == (0, 0)  # before their first request
        records = [r for pane in app.results[-1][0].records for r in pane]
        assert len(records) == 2
        for r in records:
            assert r.metrics.own_delay_ms > 0 and r.timestamps.sent is not None
            submitted = r.timestamps.sent - r.metrics.own_delay_ms * MS  # where its own delay was counted from
            assert before - 1e3 <= submitted <= after + 1e3  # the Enter (to the µs), not the warm-up or the start


# --- ttft ask ----------------------------------------------------------------------------
def test_ask_records_its_own_delay(srv: FakeServer, capsys: pytest.CaptureFixture[str], sunk: list) -> None:
    before = ev.now_ns()
    assert main(["ask", "-m", "compat:x", "--base-url", srv.openai_base_url, "--json", "hi"]) == 0
    d = json.loads(capsys.readouterr().out)
    [rec] = sunk
    assert d["metrics"]["own_delay_ms"] == pytest.approx(rec.metrics.own_delay_ms, abs=1e-3)  # printed as recorded
    assert rec.metrics.own_delay_ms > 0 and rec.timestamps.sent is not None
    # called in-process, ask counts from the call (a command line: from the process start, below)
    submitted = rec.timestamps.sent - rec.metrics.own_delay_ms * MS
    assert before - 1e3 <= submitted <= rec.timestamps.sent
    assert d["metrics"]["ttft_ms"] >= 30


def test_ask_from_a_fresh_process_counts_from_its_start_and_says_so(srv: FakeServer, data_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ttft.tui.cli",
            "ask",
            "-m",
            "compat:x",
            "--base-url",
            srv.openai_base_url,
            "--json",
            "hi",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)["metrics"]
    # the process start includes importing the SDK: never a few ms (and never inside TTFT)
    assert m["own_delay_ms"] > 20
    assert "ttft's own" in proc.stderr.splitlines()[-1]


IMPORT_CHECK = """
import json, sys
from tests.fakes import FakeServer, Schedule
with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=2)) as srv:
    from ttft.tui.cli import main
    rc = main(["ask", "-m", "compat:x", "--base-url", srv.openai_base_url, "--json", "hi", *sys.argv[1:]])
print(json.dumps({"rc": rc, "loaded": sorted(m for m in ("anthropic", "openai", "textual") if m in sys.modules)}))
"""


@pytest.mark.parametrize(("flags", "loaded"), [((), []), (("--sdk",), ["openai"])])
def test_ask_on_a_compat_model_imports_no_sdk_and_no_textual(flags: tuple[str, ...], loaded: list[str]) -> None:
    # the lean Chat Completions path: no SDK at all (--sdk: the OpenAI SDK, never Anthropic's);
    # aiohttp (the fake server) must not drag any in; a separate process sees only what ask imports
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_CHECK, *flags],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"rc": 0, "loaded": loaded}


def test_a_plain_http_server_costs_no_ca_bundle_and_tls_would_fail_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    import ssl

    from ttft.backends.transport.http import needs_ca_bundle, no_tls_context

    for k in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(k, raising=False)
    assert not needs_ca_bundle("http://127.0.0.1:8080/v1")
    assert needs_ca_bundle("https://api.openai.com/v1") and needs_ca_bundle(None)
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")  # the proxy itself may speak TLS
    assert needs_ca_bundle("http://127.0.0.1:8080/v1")
    ctx = no_tls_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname  # verification on ...
    assert ctx.get_ca_certs() == []  # ... against no roots: nothing would be trusted
