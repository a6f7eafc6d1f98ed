"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from backends.finish import add_sink
from telemetry.record import TurnRecord


@pytest.fixture
def sunk() -> Iterator[list[TurnRecord]]:
    """Every record handed to the sinks while the test runs, in order."""
    seen: list[TurnRecord] = []
    remove = add_sink(seen.append)
    yield seen
    remove()


@pytest.fixture(autouse=True)
def _data_stays_in_the_test(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that sets no data folder writes into a temporary one, never the user's: a bug path met
    on purpose writes a crash report there (telemetry.log.crashes)."""
    if not os.environ.get("TTFT_DATA_DIR"):
        monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path_factory.mktemp("data")))
