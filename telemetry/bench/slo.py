"""Service-level objectives for goodput: parsed from ``ttft=500ms,tpot=50ms,e2e=10s``, checked per request."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from ..record import TurnRecord

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*$", re.IGNORECASE)


def parse_duration_ms(text: str) -> float:
    """'500ms' -> 500, '10s' -> 10000, '1.5m' -> 90000, a bare number is ms."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 500ms, 10s)")
    value, unit = float(m.group(1)), (m.group(2) or "ms").lower()
    return value * {"ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


@dataclass(frozen=True, slots=True)
class SLO:
    """Service-level objectives for goodput; a None bound is not checked."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> SLO | None:
        """``ttft=500ms,tpot=50ms,e2e=10s`` (any subset)."""
        if not text:
            return None
        bounds: dict[str, float] = {}
        for part in text.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            # a percentile (ttft_p90, as --find-capacity takes) does not change a request's own bound
            key = re.sub(r"_p\d{1,2}(\.\d+)?$", "", key.strip().lower())
            if not sep or key not in ("ttft", "tpot", "e2e", "e2el"):
                raise ValueError(f"bad SLO {part!r}: use ttft=500ms,tpot=50ms,e2e=10s")
            bounds["e2e" if key == "e2el" else key] = parse_duration_ms(value)
        return cls(bounds.get("ttft"), bounds.get("tpot"), bounds.get("e2e"))

    def met(self, rec: TurnRecord) -> bool:
        """True when the request succeeded and every bound holds; an error is a miss."""
        if rec.status != "ok":
            return False
        m = rec.metrics
        checks = (("ttft", self.ttft_ms, m.ttft_ms), ("tpot", self.tpot_ms, m.tpot_ms), ("e2e", self.e2e_ms, m.e2e_ms))
        for name, bound, v in checks:
            if bound is None:
                continue
            # A one-token answer has no TPOT: nothing to violate.
            if v is None and name == "tpot" and m.ttft_ms is not None:
                continue
            if v is None or v > bound:
                return False
        return True

    def describe(self) -> str:
        named = (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("e2e", self.e2e_ms))
        return ", ".join(f"{n}<={v:g}ms" for n, v in named if v is not None)

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)
