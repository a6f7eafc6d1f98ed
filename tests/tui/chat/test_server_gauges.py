"""The chat against a compat server that publishes /metrics: the pane shows the server's queue and KV use
as the turn's request left, and the record keeps them (the real factory: the backend in its own process)."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest
from ttft.tui.chat.app import ChatApp

from tests.fakes.gauged_server import GaugedServer
from tests.support.tui_support import wait_until


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


def _occupy(url: str, tokens: int) -> None:
    body = f'{{"model":"m","stream":true,"max_tokens":{tokens},"messages":[{{"role":"user","content":"x"}}]}}'
    req = urllib.request.Request(url + "/chat/completions", body.encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        r.read()


async def test_the_pane_shows_the_queue_the_turn_met() -> None:
    with GaugedServer(slots=1, token_ms=20, prefill_ms=5, default_tokens=8, kv_per_slot=0.71) as srv:
        app = ChatApp("compat:gauged-fake", base_url=srv.base_url)
        async with app.run_test(size=(140, 44)) as pilot:
            await wait_until(pilot, lambda: app.chat.session.backend is not None, timeout=30)
            others = [threading.Thread(target=_occupy, args=(srv.base_url, 40), daemon=True) for _ in range(3)]
            for t in others:
                t.start()
            await wait_until(pilot, lambda: srv.in_flight >= 3, timeout=10)  # one on the slot, two queued
            app.query_one("#prompt").value = "hi"
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=30)
            rec = app.chat.session.records[0].to_dict()
            pane = str(app.chat.pane.query_one("#live").content)
            for t in others:
                t.join(10)
    assert rec["status"] == "ok", rec["error"]
    gauges = rec["server"]["gauges"]
    assert gauges["server"] == "vllm" and gauges["running"] == 1 and gauges["waiting"] >= 1  # others queued
    line = next(x for x in pane.splitlines() if "server queue" in x)
    n = round(gauges["waiting"])
    assert f"{n} request{'' if n == 1 else 's'} waiting · 1 running · KV 71% (vllm)" in line
