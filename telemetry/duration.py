"""The one way a duration is written for people: 9.8 ms, 312 ms, 1.8 s, 2 m 05 s.

Plain text (no markup, no terminal codes): telemetry's own sentences (the diagnosis, compare
verdicts, the probe's levers) use it, and the UI and the commands reuse it, so a figure reads
the same on the pane, in ``ttft ask``'s summary and in a verdict.
"""

from __future__ import annotations

import math
from typing import Literal

DASH = "–"  # a figure that does not exist (no token came, nothing to time)
Unit = Literal["ms", "s"]


def fmt_ms(
    ms: float | None,
    *,
    digits: int | None = 0,
    s_digits: int = 1,
    unit: Unit | None = None,
    bare: bool = False,
    missing: str = DASH,
) -> str:
    """``ms`` milliseconds as text: milliseconds below a second, seconds below a minute, then minutes.

    ``digits``: decimals in milliseconds (None: one below 10 ms, none above, so 3.2 ms but 180 ms).
    ``s_digits``: decimals in seconds. ``unit``: write it in this unit whatever its size (both ends
    of a range in one unit). ``bare``: leave the unit off (the low end of a range).
    """
    if ms is None or not math.isfinite(ms):
        return missing  # an infinite or NaN figure (an old or hand-edited log) is no duration
    if unit is None:
        if abs(ms) >= 60_000:  # floor division of a negative would write -90 s as "-2 m 30 s"
            sign, whole = ("-" if ms < 0 else ""), abs(ms)
            return f"{sign}{int(whole // 60_000)} m {int(whole % 60_000 // 1000):02d} s"
        unit = "s" if abs(ms) >= 1000 else "ms"
    if unit == "s":
        text = f"{ms / 1000:.{s_digits}f}"
    else:
        places = digits if digits is not None else (1 if abs(ms) < 10 else 0)
        text = f"{ms:.{places}f}"
    return text if bare else f"{text} {unit}"


def unit_for(*values_ms: float) -> Unit:
    """The unit a set of durations is written in together: seconds when any reaches one."""
    return "s" if values_ms and max(abs(v) for v in values_ms) >= 1000 else "ms"
