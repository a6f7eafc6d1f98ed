"""Capacity search: the most load a server carries within latency objectives (pure: no I/O).

``ttft bench --find-capacity --slo ttft_p90=500ms,tpot_p90=50ms`` asks: how many concurrent
users (or requests/s, ``--rate``) can this server carry while its requests meet the objectives?

- An objective bounds one metric of a request (TTFT, TPOT, E2E) and names the share of requests
  that must meet it: ``tpot_p90=50ms`` means at least 90 % of requests have TPOT <= 50 ms; a bound
  without a percentile (``ttft=500ms``) takes the run's ``--attainment`` (default 95 %). A failed
  request misses every objective; a one-token answer has no TPOT and misses no TPOT bound.
- A probe (one load level) is judged per objective by the Wilson score interval of the share met
  (95 % confidence): it passes when the interval's low end clears the target, fails when its high
  end is under it, and is undecided otherwise; the driver then sends more requests at that level,
  up to a limit, and the result says when the interval still could not decide (counted as a miss).
- :class:`Search` doubles the load from a start until a probe misses, then bisects between the last
  pass and the first miss until the bracket is within ``resolution`` (10 %, at least one user).
- :func:`knee` finds where total throughput stops growing with the load: the break of a two-segment
  line fit of output tokens/s against the level (as GuideLLM does), reported when the second
  segment's slope is under a quarter of the first's and no heavier load got a quarter more.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..record import TurnRecord
from .requests import BenchTurn, Mode, measured
from .slo import SLO, parse_duration_ms

Verdict = Literal["pass", "fail", "undecided"]
Z_95 = 1.959964  # two-sided 95 % normal quantile
DEFAULT_ATTAINMENT = 0.95
KNEE_SLOPE_RATIO = 0.25  # past the knee, each extra user buys under a quarter of what one did before it
KNEE_GAIN = 0.25  # ... and no heavier load gets more than a quarter more throughput in all

_KEY = re.compile(r"^(ttft|tpot|e2e|e2el)(?:_p(\d{1,2}(?:\.\d+)?))?$")
_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}


@dataclass(frozen=True, slots=True)
class Objective:
    metric: str  # "ttft" | "tpot" | "e2e"
    bound_ms: float
    target: float  # share of requests that must meet the bound, 0-1

    @property
    def key(self) -> str:
        return f"{self.metric}_ms"

    def describe(self) -> str:
        return f"p{self.target * 100:g} {_NAMES[self.metric]} <= {self.bound_ms:g} ms"

    @property
    def per_user_tokens_per_s(self) -> float | None:
        """A TPOT bound as the per-user decode speed it allows (1000 / TPOT, as ``decode_tokens_per_s``)."""
        return 1000 / self.bound_ms if self.metric == "tpot" and self.bound_ms > 0 else None

    def value(self, rec: TurnRecord) -> float | None:
        """The request's figure for this objective's metric."""
        m = rec.metrics
        return m.ttft_ms if self.metric == "ttft" else m.tpot_ms if self.metric == "tpot" else m.e2e_ms

    def met(self, rec: TurnRecord) -> bool:
        if rec.status != "ok":
            return False
        v = self.value(rec)
        if v is None:
            return self.metric == "tpot" and rec.metrics.ttft_ms is not None  # one token: no TPOT to miss
        return v <= self.bound_ms

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "bound_ms": self.bound_ms, "target": self.target}


@dataclass(frozen=True, slots=True)
class Objectives:
    terms: tuple[Objective, ...]
    attainment: float = DEFAULT_ATTAINMENT

    @classmethod
    def parse(cls, text: str, attainment: float = DEFAULT_ATTAINMENT) -> Objectives:
        """``ttft_p90=500ms,tpot_p90=50ms,e2e=10s``: ``_pNN`` sets that bound's share, else ``attainment``."""
        if not 0 < attainment < 1:
            raise ValueError(f"attainment must be between 0 and 1 (exclusive), got {attainment:g}")
        terms: list[Objective] = []
        for part in text.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            m = _KEY.match(key.strip().lower())
            if not sep or not m:
                raise ValueError(f"bad SLO {part.strip()!r}: use e.g. ttft_p90=500ms,tpot_p90=50ms (or ttft=500ms)")
            metric = "e2e" if m.group(1) == "e2el" else m.group(1)
            target = float(m.group(2)) / 100 if m.group(2) else attainment
            if not 0 < target < 1:
                raise ValueError(f"bad SLO {part.strip()!r}: the percentile must be between p1 and p99.9")
            terms.append(Objective(metric, parse_duration_ms(value), target))
        if not terms:
            raise ValueError("--find-capacity needs objectives, e.g. --slo ttft_p90=500ms,tpot_p90=50ms")
        return cls(tuple(terms), attainment)

    def slo(self) -> SLO:
        """The per-request bounds, for goodput (a request meeting them all is good)."""
        bound = {t.metric: t.bound_ms for t in self.terms}
        return SLO(bound.get("ttft"), bound.get("tpot"), bound.get("e2e"))

    def describe(self) -> str:
        return ", ".join(t.describe() for t in self.terms)

    def min_requests(self) -> int:
        """The fewest requests with which a probe can pass at all (every one meeting the bounds)."""
        return max(requests_to_pass(t.target) for t in self.terms)


def wilson(met: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a share ``met / n``."""
    if n <= 0:
        return 0.0, 1.0
    p = met / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def requests_to_pass(target: float, z: float = Z_95) -> int:
    """Smallest n whose interval clears ``target`` when all n requests meet the bound: n/(n+z²) >= target."""
    return math.ceil(z * z * target / (1 - target))


@dataclass(frozen=True, slots=True)
class TermResult:
    objective: Objective
    requests: int
    met: int
    low: float
    high: float
    observed_ms: float | None  # the metric at the objective's percentile (failures count as infinite)
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.objective.to_dict(),
            "requests": self.requests,
            "met": self.met,
            "share": self.met / self.requests if self.requests else None,
            "interval": [self.low, self.high],
            "observed_ms": self.observed_ms,
            "verdict": self.verdict,
        }


@dataclass(frozen=True, slots=True)
class ProbeResult:
    level: float
    requests: int
    terms: tuple[TermResult, ...]

    @property
    def verdict(self) -> Verdict:
        kinds = {t.verdict for t in self.terms}
        return "fail" if "fail" in kinds else "undecided" if "undecided" in kinds else "pass"

    def describe(self) -> str:
        parts = [
            f"{t.objective.describe()}: {t.met}/{t.requests} met (95% interval {t.low:.0%}-{t.high:.0%}) -> {t.verdict}"
            for t in self.terms
        ]
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "requests": self.requests,
            "verdict": self.verdict,
            "objectives": [t.to_dict() for t in self.terms],
        }


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def judge(turns: Sequence[BenchTurn], objectives: Objectives, level: float) -> ProbeResult:
    """One probe's verdict per objective (warm-up requests are left out)."""
    recs = [t.record for t in measured(turns)]
    n = len(recs)
    terms = []
    for obj in objectives.terms:
        met = sum(1 for r in recs if obj.met(r))
        low, high = wilson(met, n)
        verdict: Verdict = "pass" if low >= obj.target else "fail" if high < obj.target else "undecided"
        values = [
            v if r.status == "ok" and (v := obj.value(r)) is not None
            else (0.0 if obj.met(r) else math.inf)
            for r in recs
        ]  # fmt: skip
        observed = _quantile(values, obj.target)
        terms.append(TermResult(obj, n, met, low, high, None if observed == math.inf else observed, verdict))
    return ProbeResult(level, n, tuple(terms))


@dataclass
class Search:
    """Doubling, then bisection, over the load (pure: the driver runs each level it names)."""

    start: float = 1.0
    integer: bool = True  # concurrency (whole users) rather than a request rate
    limit: float = 4096.0
    resolution: float = 0.10
    passed: float | None = None  # the most load that met the objectives so far
    missed: float | None = None  # the least load that did not
    history: list[tuple[float, Verdict]] = field(default_factory=list)

    def record(self, level: float, verdict: Verdict) -> None:
        self.history.append((level, verdict))
        if verdict == "pass":
            self.passed = level if self.passed is None else max(self.passed, level)
        else:
            self.missed = level if self.missed is None else min(self.missed, level)

    def step(self) -> float:
        """How close the bracket must close: ``resolution`` of the passing load, at least one user."""
        base = self.passed or self.start
        return max(1.0, math.ceil(base * self.resolution)) if self.integer else base * self.resolution

    def next_level(self) -> float | None:
        """The next load to probe, or None when the search is done."""
        if self.missed is None:  # still doubling
            nxt = self.start if self.passed is None else self.passed * 2
            if self.integer:
                nxt = float(max(1, round(nxt)))
            return nxt if nxt <= self.limit and (self.passed is None or nxt > self.passed) else None
        if self.passed is None:
            return None  # the first probe already missed: nothing carried at the start load
        if self.missed - self.passed <= self.step():
            return None
        mid = (self.passed + self.missed) / 2
        if self.integer:
            mid = float(math.floor(mid))
            if mid <= self.passed:
                return None
        return mid


@dataclass(frozen=True, slots=True)
class Knee:
    level: float
    output_throughput: float  # tokens/s at the knee
    beyond_max: float  # the most tokens/s any heavier load reached

    def to_dict(self) -> dict[str, float]:
        return {"level": self.level, "output_throughput": self.output_throughput, "beyond_max": self.beyond_max}


def knee(points: Sequence[tuple[float, float]]) -> Knee | None:
    """Where total throughput stops growing with the load, or None when it does not (or too few points).

    Two least-squares lines, one up to and one from a break point (a probed level), breaks tried
    from the least total squared error up; the first whose slope after is under KNEE_SLOPE_RATIO
    of the slope before (a positive one), and past which no heavier load got more than KNEE_GAIN
    more throughput, is the knee.
    """
    pts = sorted({p[0]: p for p in points if p[1] is not None}.values())
    if len(pts) < 4:
        return None
    fits = []
    for i in range(1, len(pts) - 1):
        (s1, e1), (s2, e2) = _fit(pts[: i + 1]), _fit(pts[i:])
        fits.append((e1 + e2, i, s1, s2))
    for _, i, s1, s2 in sorted(fits):
        beyond = max(p[1] for p in pts[i + 1 :])
        if s1 > 0 and s2 < KNEE_SLOPE_RATIO * s1 and beyond <= pts[i][1] * (1 + KNEE_GAIN):
            return Knee(pts[i][0], pts[i][1], beyond)
    return None


def _fit(pts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Slope and squared error of the least-squares line through ``pts``."""
    n = len(pts)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    slope = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else 0.0
    err = sum((p[1] - (my + slope * (p[0] - mx))) ** 2 for p in pts)
    return slope, err


def _load(level: float, mode: Mode) -> str:
    if mode == "rate":
        return f"{level:g} requests/s"
    return f"{int(level)} concurrent user" + ("" if int(level) == 1 else "s")


def conclusion(
    capacity: float | None,
    *,
    mode: Mode,
    objectives: Objectives,
    goodput: float | None,
    knee_at: Knee | None,
    undecided: Sequence[float],
    start: float,
    limit_reached: bool,
) -> str:
    """The search's answer in one or two plain sentences."""
    what = objectives.describe()
    if capacity is None:
        text = f"This server does not carry even {_load(start, mode)} at {what}."
    else:
        gp = f" (goodput {goodput:.1f} req/s)" if goodput is not None else ""
        text = f"This server carries {_load(capacity, mode)} at {what}{gp}"
        text += f"; the search stopped at its limit of {_load(capacity, mode)}." if limit_reached else "."
    if knee_at is not None:
        unit = " requests/s" if mode == "rate" else " users"
        more = knee_at.beyond_max / knee_at.output_throughput - 1 if knee_at.output_throughput else 0.0
        text += (
            f" Past {knee_at.level:g}{unit}, total throughput stops growing ({knee_at.output_throughput:.0f} "
            f"tokens/s there, at most {max(more, 0.0):.0%} more beyond) while each user's speed keeps falling."
        )
    if undecided:
        levels = ", ".join(f"{lv:g}" for lv in undecided)
        text += (
            f" The interval could not decide at {levels} within the requests allowed (counted as a miss): "
            "raise --requests for a firmer answer."
        )
    return text
