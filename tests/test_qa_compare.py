"""QA regression: parallel compare releases every pane together, also on a process's first prompt."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from backends.base import ChatRequest
from backends.compare.runner import ComparePane, CompareRunner
from tests.support.compare_fakes import ScheduledBackend


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


@dataclass
class ColdSdkBackend(ScheduledBackend):
    """Like the hosted backends: the first stream pays a CPU-bound warm-up (the SDK building its
    typed models) unless ``warm_up()`` paid it already."""

    warm_s: float = 0.4  # well above a loaded machine's scheduling noise, so the skew bound can be wide
    warmed: bool = False

    def _warm(self) -> None:
        if not self.warmed:
            self.warmed = True
            time.sleep(self.warm_s)  # CPU work: it blocks the event loop, as the SDK's does

    async def warm_up(self) -> None:
        self._warm()

    async def stream(self, request: ChatRequest):  # type: ignore[no-untyped-def]
        self._warm()
        async for e in super().stream(request):
            yield e


async def test_first_parallel_prompt_is_released_together() -> None:
    # Headless compare measured the first trial's sends 94 ms apart (later trials 4 ms): the
    # warm-up ran after the barrier, inside one pane's turn, while the other had already sent.
    panes = [ComparePane(ColdSdkBackend(f"m{i}", ttft_s=0.02, gap_s=0.002, tokens=3), chr(65 + i)) for i in range(2)]
    res = await CompareRunner(panes).run_prompt("hi", repeat=2)
    assert all(b.backend.warmed for b in panes)
    assert max(res.start_skew_ms) < 200, res.start_skew_ms  # a warm-up between the sends would add 400 ms
