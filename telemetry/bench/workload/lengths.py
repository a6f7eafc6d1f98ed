"""A bench request's length in tokens, drawn from a distribution: ``N``, ``MEAN:STDDEV`` or ``A-B``.

Real prompts and answers are not all one length, and a server's batching reacts to the spread (a
long prompt's prefill stalls the decode of every stream beside it), so ``--input-tokens`` and
``--output-tokens`` take a distribution: a fixed ``N``, a normal ``MEAN:STDDEV`` rounded and clipped
at 1 (as AIPerf's ``--prompt-input-tokens-mean/--stddev``), or ``A-B`` drawn uniformly, both ends
included. A draw depends only on the seed, the request's index and what is drawn, so a request gets
the same length however the run's requests are split over worker processes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Literal

from ...errors import TtftError

Kind = Literal["fixed", "normal", "uniform"]
MAX_TOKENS = 10_000_000  # a length past this is a typo, not a workload (no model's context is longer)
REACH_SIGMAS = 3  # a normal's longest length in practice: MEAN + 3 STDDEV (all but 0.13% of its draws)


class TooLong(TtftError, ValueError):
    """A length past what any model takes: the message names the limit."""


@dataclass(frozen=True, slots=True)
class Lengths:
    """A length distribution in tokens (every draw is a whole number >= 1)."""

    kind: Kind
    mean: float
    stddev: float = 0.0
    low: int = 0  # uniform: both ends included
    high: int = 0

    @classmethod
    def fixed(cls, n: int) -> Lengths:
        return cls("fixed", float(n), low=n, high=n)

    @classmethod
    def parse(cls, text: str) -> Lengths:
        """``"128"``, ``"100:30"`` or ``"50-150"``; ValueError with a message fit to print otherwise."""
        s = text.strip()
        try:
            if ":" in s:
                mean_s, _, std_s = s.partition(":")
                mean, std = float(mean_s), float(std_s)
                if not (math.isfinite(mean) and math.isfinite(std)) or mean < 1 or std < 0:
                    raise ValueError
                lengths = (
                    cls("fixed", mean, low=round(mean), high=round(mean)) if std == 0 else cls("normal", mean, std)
                )
                return lengths.checked(text)
            if "-" in s[1:]:
                lo_s, _, hi_s = s.partition("-")
                lo, hi = int(lo_s), int(hi_s)
                if lo < 1 or hi < lo:
                    raise ValueError
                return cls("uniform", (lo + hi) / 2, math.sqrt(((hi - lo + 1) ** 2 - 1) / 12), lo, hi).checked(text)
            n = int(s)
            if n < 1:
                raise ValueError
            return cls.fixed(n).checked(text)
        except TooLong:
            raise
        except ValueError:
            raise ValueError(
                f"expected a token count N, MEAN:STDDEV (a normal, clipped at 1) or A-B (uniform), "
                f"each at least 1, got {text!r}"
            ) from None

    def checked(self, text: str) -> Lengths:
        """This distribution, or TooLong when its longest length passes :data:`MAX_TOKENS`."""
        if self.reach > MAX_TOKENS:
            shown = f" (MEAN + {REACH_SIGMAS} STDDEV)" if self.kind == "normal" else ""
            raise TooLong(
                f"{text!r} reaches {self.reach:,} tokens{shown}, past ttft's cap of {MAX_TOKENS:,} tokens "
                "(no model's context is longer)"
            )
        return self

    @property
    def reach(self) -> int:
        """The longest length it draws in practice: its end, or a normal's MEAN + 3 STDDEV (draws past that
        are rare, and never past :data:`MAX_TOKENS`)."""
        if self.kind == "normal":
            return math.ceil(self.mean + REACH_SIGMAS * self.stddev)
        return self.high

    def draw(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return self.low
        if self.kind == "uniform":
            return rng.randint(self.low, self.high)
        return min(MAX_TOKENS, max(1, round(rng.gauss(self.mean, self.stddev))))

    def draw_for(self, seed: int, index: int, what: str) -> int:
        """The length of request ``index``'s ``what`` ("input", "output", ...), the same on every run."""
        if self.kind == "fixed":
            return self.low
        return self.draw(random.Random(f"ttft-len-{what}-{seed}-{index}"))

    @property
    def spread(self) -> bool:
        return self.kind != "fixed"

    def text(self) -> str:
        """As the flag takes it: ``128``, ``100:30``, ``50-150``."""
        if self.kind == "fixed":
            return str(self.low)
        if self.kind == "uniform":
            return f"{self.low}-{self.high}"
        return f"{self.mean:g}:{self.stddev:g}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"spec": self.text(), "kind": self.kind, "mean": self.mean}
        if self.kind != "fixed":
            out["stddev"] = self.stddev
        if self.kind == "uniform":
            out.update(min=self.low, max=self.high)
        return out
