"""The real chat on the real local model (SmolLM2 from PyPI), through Textual's pilot.

No fakes: the chat's own backend factory loads llama.cpp in the backend process, a prompt is typed
and sent, and the turn must end ``ok`` with an answer, its figures, and the pane saying where the
model's layers ran (CPU here; a GPU where the build and the machine have one).
"""

from __future__ import annotations

import pytest
from textual.widgets import Static
from ttft.tui.chat.app import ChatApp
from ttft.tui.widgets.telemetry_pane import TelemetryPane

from tests.support.tui_support import wait_until

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'ttft[local]')")
pytestmark = pytest.mark.local


async def test_a_turn_on_the_real_local_model_ends_ok_and_the_pane_says_where_it_ran() -> None:
    app = ChatApp("local")  # the real factory, the real engine
    async with app.run_test(size=(160, 48)) as pilot:
        app.query_one("#prompt").value = "What is the capital of France? Answer in one word."
        await pilot.press("enter")
        # A cold load on 2 busy cores takes seconds; the answer is short.
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=240)
        rec = app.chat.session.records[0]
        assert rec.status == "ok", rec.error
        assert rec.answer.strip()
        assert rec.metrics.ttft_ms is not None and rec.metrics.ttft_ms > 0
        model = rec.server["llama.cpp"]  # the engine where this turn ran (the load itself may be the warm-up's)
        assert 0 <= model["layers_offloaded"] <= model["n_layers"]  # one count: blocks and output layer alike
        live = app.query_one(TelemetryPane).query_one("#live", Static)
        shown = str(live.content)
        where = model["backend"] if model["layers_offloaded"] else "CPU"  # "CUDA 31/31 layers" on an H200
        assert "runs on" in shown and where in shown, shown
