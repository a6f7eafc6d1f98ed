"""``ttft bench --find-capacity``: the capacity search's options and its live output.

The search itself is :func:`backends.load.capacity.find_capacity` (judged by :mod:`telemetry.bench.capacity`);
this module adds its flags to ``ttft bench`` and words each probe as it ends (the level table's
row, then each objective's share met and verdict); ``tui.commands.bench.args`` reads them into the plan.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from ....backends.load.capacity import Probe
from ....telemetry.log.quote import quoted
from ..flags import positive_int

DEFAULT_LIMIT = 1024


def attainment(text: str) -> float:
    """``95``, ``95%`` or ``0.95`` -> 0.95; with a ``%`` sign always a percentage (``0.5%`` is 0.005)."""
    stripped = text.strip()
    percent = stripped.endswith("%")
    try:
        v = float(stripped.removesuffix("%"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 95 or 95%, got {quoted(text)}") from exc
    v = v / 100 if percent or v > 1 else v
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError("attainment must be between 0 and 100% (exclusive)")
    return v


def _load(text: str) -> float:
    """``--capacity-limit``: a load above 0 (0, a negative or nan would end the search before its first probe)."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (0 < v < math.inf):
        raise argparse.ArgumentTypeError(f"expected a number of users or requests/s above 0, got {quoted(text)}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("capacity search (--find-capacity)")
    g.add_argument(
        "--find-capacity",
        action="store_true",
        help="search the most concurrent users (or, with --rate, requests/s) meeting --slo: doubles, then bisects",
    )
    g.add_argument(
        "--attainment",
        type=attainment,
        help="share of requests that must meet an SLO bound given without a percentile (default 95%%); "
        "ttft_p90=500ms sets its own (90%%)",
    )
    g.add_argument(
        "--capacity-limit",
        type=_load,
        help=f"the most users (or requests/s) the search tries (default {DEFAULT_LIMIT})",
    )
    g.add_argument(
        "--probe-max-requests",
        type=positive_int,
        default=None,
        help="most requests one probe may send while its interval cannot decide (default 8x its first batch)",
    )


def probe_lines(p: Probe, row: Callable[[dict[str, Any]], str]) -> list[str]:
    return [row(p.aggregate), f"          {p.result.verdict.upper()}: {p.result.describe()}"]
