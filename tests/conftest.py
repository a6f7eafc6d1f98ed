"""Fixtures shared by several test modules, and the Hypothesis profiles every run uses."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from ttft.backends.local.llama_adapter import import_before_numpy

# On a CUDA build of llama.cpp a model load segfaults in a process that imported numpy first
# (import_before_numpy's docstring): on an NVIDIA machine llama.cpp is imported here, before any test
# module imports numpy. A pytest plugin may have imported numpy before this file (jaxtyping's does):
# then the in-process engine's tests skip, saying so, rather than end the whole run with a segfault.
ON_NVIDIA = Path("/dev/nvidiactl").exists()
LLAMA_FIRST = import_before_numpy() if ON_NVIDIA else True

from ttft.backends.finish import add_sink  # noqa: E402
from ttft.telemetry.record import TurnRecord  # noqa: E402

# Hypothesis: one verdict per commit. The ``ci`` profile (every run's, CI's and a developer's alike)
# draws each test's examples from its own code (derandomize), never from a random seed or from the
# failures an earlier run left in a local database, a fixed number of them, with no time limit
# (deadline, too_slow: a loaded machine is no failure). A failure prints its reproducing blob.
# Every example a fuzz has found is pinned with @example on its test, so it runs first, every time.
# ``--hypothesis-profile=hunt --hypothesis-seed=N`` draws anew (random, or from seed N) to look for
# more; tests/benchmarks/fuzz_readers.py is the wide random fuzz of the stream readers.
_STEADY = {"database": None, "deadline": None, "print_blob": True, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, max_examples=100, **_STEADY)
settings.register_profile("hunt", derandomize=False, **_STEADY)
settings.load_profile("ci")  # the plugin's --hypothesis-profile, read after this file, overrides it


@pytest.fixture
def sunk() -> Iterator[list[TurnRecord]]:
    """Every record handed to the sinks while the test runs, in order."""
    seen: list[TurnRecord] = []
    remove = add_sink(seen.append)
    yield seen
    remove()


@pytest.fixture(autouse=True)
def _every_notice_is_heard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each app keeps every notice it showed (``tests.support.tui_support.heard``): Textual forgets a toast
    5 s after it is shown, and late in a full run on 2 cores a pilot reads it later than that."""
    from textual.app import App

    real = App.notify

    def notify(self: App[Any], message: str, *args: Any, **kwargs: Any) -> None:
        self.__dict__.setdefault("_ttft_heard", []).append(str(message))
        real(self, message, *args, **kwargs)

    monkeypatch.setattr(App, "notify", notify)


@pytest.fixture(autouse=True)
def _data_stays_in_the_test(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that sets no data folder writes into a temporary one, never the user's: a bug path met
    on purpose writes a crash report there (telemetry.log.crashes)."""
    if not os.environ.get("TTFT_DATA_DIR"):
        monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path_factory.mktemp("data")))
