"""``ttft bench``'s flag values: each flag's text read into its value, or argparse's error saying why."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from ....backends.agent.stub import latency_problem
from ....backends.load.cluster.address import ClusterAddress
from ....backends.load.cluster.address import parse as parse_cluster_address
from ....telemetry.bench.probe import check_rate
from ....telemetry.bench.workload.lengths import Lengths
from ....telemetry.log.quote import quoted


def _floats(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {quoted(text)}") from exc
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError("levels must be > 0")
    return vals


MAX_START_AHEAD_S = 24 * 3600  # a start further ahead than this is a typo, not a plan


def start_time(text: str) -> float:
    """``--start-at``: an ISO 8601 time with its zone (``2026-12-01T16:00:00Z``) or Unix seconds, as
    Unix seconds. A time without a zone is refused: each machine would read it in its own."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a time like 2026-12-01T16:00:00Z or Unix seconds, got {quoted(text)}"
        ) from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} has no zone: add Z or +HH:MM, so every machine reads the same moment"
        )
    return when.timestamp()


def check_start(start_at: float | None, now: float) -> str | None:
    """Why ``--start-at`` cannot be kept, or None. A time already past at launch is refused: a run
    started late would not load the server together with the others."""
    if start_at is None:
        return None
    if start_at < now:
        return f"--start-at has already passed ({now - start_at:.0f} s ago)"
    if start_at - now > MAX_START_AHEAD_S:
        return "--start-at is more than 24 hours ahead"
    return None


def cluster_address(text: str) -> ClusterAddress:
    """``--cluster``'s address (``backends.load.cluster.address``; read without importing Ray)."""
    try:
        return parse_cluster_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _lengths(text: str) -> Lengths:
    try:
        return Lengths.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(least: int) -> Any:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {quoted(text)}") from None
        if n < least:
            raise argparse.ArgumentTypeError(f"expected {least} or more, got {n}")
        return n

    return parse


def _seconds(text: str) -> float:
    try:
        s = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {quoted(text)}") from None
    if not 0 <= s <= 3600:
        raise argparse.ArgumentTypeError(f"expected 0 to 3600 seconds, got {text}")
    return s


def _probe_rate(text: str) -> float:
    """``--probe-rate``: requests/s of the one user beside the load, above 0 and at most a thousand."""
    try:
        rate = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected requests/s, e.g. 0.5, got {quoted(text)}") from None
    if (why := check_rate(rate)) is not None:
        raise argparse.ArgumentTypeError(why)
    return rate


def _tool_latency(text: str) -> float:
    """``--tool-latency``: the stub tool's delay in milliseconds, from 0 up (never NaN or infinite)."""
    try:
        ms = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected milliseconds, e.g. 50, got {quoted(text)}") from None
    if (why := latency_problem(ms)) is not None:
        raise argparse.ArgumentTypeError(why)
    return ms
