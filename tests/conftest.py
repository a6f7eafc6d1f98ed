"""Fixtures shared by several test modules."""

from __future__ import annotations

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
