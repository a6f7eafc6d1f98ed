"""The probe's fit: how a model's latency grows with its work, with intervals, from measured points.

Pure (numpy only). The points come from ``ttft probe``'s designed experiment:

- ``input``: TTFT at several input lengths, unique text per trial (nothing cached);
- ``cache_cold`` / ``cache_warm``: one long prefix sent twice, a pair per trial;
- ``output``: E2E at several output lengths.

Slopes are Theil-Sen (the median of the pairwise slopes): a few stalled or
retried requests among many move it little, where least squares would follow
them. Intervals are 95% percentile bootstraps that resample trials *within*
each design point, so every resample keeps the experiment's spread of lengths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ..duration import fmt_ms, unit_for
from .result import CacheFit, Estimate, PointKind, ProbeFit, ProbePoint

N_BOOT = 600
CONFIDENCE = 0.95
# A cache "saving" smaller than this share of the cold TTFT is within the noise of one request.
CACHE_MIN_SHARE = 0.1

FloatArray = npt.NDArray[np.float64]


# --- robust line ----------------------------------------------------------------------------
def theil_sen(xs: Sequence[float] | FloatArray, ys: Sequence[float] | FloatArray) -> tuple[float, float] | None:
    """(slope, intercept): the median pairwise slope and the median residual. None without two distinct x."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    if not keep.any():
        return None
    slope = float(np.median((y[j] - y[i])[keep] / dx[keep]))
    return slope, float(np.median(y - slope * x))


def _interval(samples: Sequence[float], value: float) -> Estimate:
    arr = np.asarray(samples, dtype=float)
    tail = (1 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(arr, [tail, 100 - tail]) if len(arr) else (value, value)
    # A percentile interval of a median can sit beside the point estimate on tiny samples: widen to hold it.
    return Estimate(value, min(float(lo), value), max(float(hi), value))


def _groups(points: Sequence[ProbePoint]) -> list[list[int]]:
    by: dict[int, list[int]] = {}
    for k, p in enumerate(points):
        by.setdefault(p.group, []).append(k)
    return list(by.values())


def _bootstrap(
    groups: list[list[int]], stat: Callable[[npt.NDArray[np.intp]], float | None], rng: np.random.Generator
) -> list[float]:
    """``stat`` over resamples that draw, within each group, as many indices as it has (with replacement)."""
    out: list[float] = []
    for _ in range(N_BOOT):
        v = stat(_boot_indices(groups, rng))
        if v is not None and np.isfinite(v):
            out.append(v)
    return out


def fit_line(
    points: Sequence[ProbePoint], x: Callable[[ProbePoint], float], y: Callable[[ProbePoint], float], *, seed: int = 0
) -> tuple[Estimate, Estimate] | None:
    """Theil-Sen line through ``points`` with bootstrap intervals: (slope, intercept)."""
    if not points:
        return None
    xs = np.array([x(p) for p in points], dtype=float)
    ys = np.array([y(p) for p in points], dtype=float)
    line = theil_sen(xs, ys)
    if line is None:
        return None
    rng = np.random.default_rng(seed)
    groups = _groups(points)
    fits = [theil_sen(xs[i], ys[i]) for i in (_boot_indices(groups, rng) for _ in range(N_BOOT))]
    good = [f for f in fits if f is not None]
    return _interval([f[0] for f in good], line[0]), _interval([f[1] for f in good], line[1])


def _boot_indices(groups: list[list[int]], rng: np.random.Generator) -> npt.NDArray[np.intp]:
    return np.concatenate([rng.choice(g, size=len(g)) for g in groups])


def median_estimate(points: Sequence[ProbePoint], value: Callable[[ProbePoint], float], *, seed: int = 0) -> Estimate:
    vals = np.array([value(p) for p in points], dtype=float)
    rng = np.random.default_rng(seed)
    samples = _bootstrap(_groups(points), lambda i: float(np.median(vals[i])), rng)
    return _interval(samples, float(np.median(vals)))


# --- the probe's fit ------------------------------------------------------------------------
def _ok(points: Sequence[ProbePoint], kind: PointKind, need: Callable[[ProbePoint], object]) -> list[ProbePoint]:
    return [p for p in points if p.kind == kind and p.status == "ok" and need(p) is not None]


def _fresh(p: ProbePoint) -> float:
    return float(p.fresh_input_tokens or 0)


def fit_probe(points: Sequence[ProbePoint], *, seed: int = 0) -> ProbeFit:
    """Every figure the points support; a figure without enough points is None, never a guess."""
    inputs = _ok(points, "input", lambda p: p.ttft_ms if p.input_tokens is not None else None)
    base = prefill = None
    line = fit_line(inputs, _fresh, lambda p: float(p.ttft_ms or 0.0), seed=seed)
    if line is not None:
        slope, intercept = line
        prefill = Estimate(slope.value * 1000, slope.low * 1000, slope.high * 1000)
        base = intercept

    outputs = _ok(points, "output", lambda p: p.e2e_ms if p.output_tokens is not None else None)
    per_100 = None
    out_line = fit_line(outputs, lambda p: float(p.output_tokens or 0), lambda p: float(p.e2e_ms or 0.0), seed=seed)
    if out_line is not None:
        s = out_line[0]
        per_100 = Estimate(s.value * 100, s.low * 100, s.high * 100)
    decoding = _ok(points, "output", lambda p: p.tpot_ms)
    tpot = median_estimate(decoding, lambda p: float(p.tpot_ms or 0.0), seed=seed) if decoding else None

    return ProbeFit(base, prefill, tpot, per_100, fit_cache(points, seed=seed), tuple(points))


def fit_cache(points: Sequence[ProbePoint], *, seed: int = 0) -> CacheFit:
    """Paired cold/warm sends of one prefix: the saving, and whether it is more than noise.

    Detected when the server's usage says it served tokens from cache, or when the
    whole interval of the saving is above zero and the saving is a real share of the cold TTFT.
    """
    cold = {p.group: p for p in _ok(points, "cache_cold", lambda p: p.ttft_ms)}
    warm = {p.group: p for p in _ok(points, "cache_warm", lambda p: p.ttft_ms)}
    pairs = [(cold[g], warm[g]) for g in sorted(cold.keys() & warm.keys())]
    if not pairs:
        return CacheFit(False, None, None)
    savings = np.array([float(c.ttft_ms or 0.0) - float(w.ttft_ms or 0.0) for c, w in pairs])
    rng = np.random.default_rng(seed)
    samples = _bootstrap([list(range(len(pairs)))], lambda i: float(np.median(savings[i])), rng)
    saving = _interval(samples, float(np.median(savings)))
    # What the second send had cached beyond the first (the first may share a template's head, or more).
    reported = [
        w.cached_tokens - (c.cached_tokens or 0)
        for c, w in pairs
        if w.tokens_source == "usage" and w.cached_tokens and w.cached_tokens > (c.cached_tokens or 0)
    ]
    cached = int(np.median(reported)) if reported else None
    cold_ttft = float(np.median([float(c.ttft_ms or 0.0) for c, _ in pairs]))
    by_timing = len(pairs) >= 2 and saving.low > 0 and saving.value >= CACHE_MIN_SHARE * cold_ttft
    return CacheFit(bool(cached) or by_timing, cached, saving)


# --- plain words ----------------------------------------------------------------------------
def _dur(ms: float) -> str:
    return fmt_ms(ms, digits=None)


def _range(e: Estimate) -> str:
    """Both ends in the value's unit: 40–45 ms, 1.2–1.4 s."""
    unit = unit_for(e.value)
    return f"{fmt_ms(e.low, digits=None, unit=unit, bare=True)}–{fmt_ms(e.high, digits=None, unit=unit)}"


def _k(tokens: float) -> str:
    return f"{tokens / 1000:.1f}k".replace(".0k", "k") if tokens >= 1000 else f"{tokens:.0f}"


def levers(fit: ProbeFit, cache_prefix_tokens: int | None = None) -> str:
    """The fit as advice: what each lever buys on this model, and which to pull first."""
    parts: list[str] = []
    pre, out = fit.prefill_ms_per_1k_input_tokens, fit.output_ms_per_100_tokens
    if pre is not None:
        parts.append(f"each 1k input tokens add {_dur(pre.value)} ({_range(pre)})")
    if out is not None:
        parts.append(f"each 100 output tokens add {_dur(out.value)} ({_range(out)})")
    c = fit.cache
    if c.ttft_saving_ms is not None:
        size = c.cached_tokens or cache_prefix_tokens
        what = f"a cached {_k(size)}-token prefix" if size else "a cached prefix"  # "a cached 211 prefix" read oddly
        if c.detected:
            parts.append(f"{what} saves {_dur(c.ttft_saving_ms.value)}")
        else:
            parts.append("no prompt cache was seen")
    if not parts:
        return "Not enough successful turns to fit anything."
    text = "; ".join(parts)
    if pre is not None and out is not None:
        first = "shorten answers" if out.value >= pre.value else "shorten prompts"
        text += f": for this model, {first} first"
    return text[0].upper() + text[1:] + "."


def engine_prefill_per_1k(points: Sequence[ProbePoint], *, seed: int = 0) -> Estimate | None:
    """The engine's own prompt-eval time per 1k fresh input tokens (llama.cpp's ``t_p_eval``), to check the fit."""
    inputs = _ok(points, "input", lambda p: p.server_prefill_ms if p.input_tokens is not None else None)
    line = fit_line(inputs, _fresh, lambda p: float(p.server_prefill_ms or 0.0), seed=seed)
    if line is None:
        return None
    s = line[0]
    return Estimate(s.value * 1000, s.low * 1000, s.high * 1000)


# Ends of the input ladder further off the line than this share of their TTFT: the line is a poor summary.
CURVE_SHARE = 0.1


def curvature_note(fit: ProbeFit) -> str:
    """A sentence when TTFT bends away from the fitted line over the input ladder, else "".

    Both ends of the ladder above the line (and the middle below) is growth faster than linear
    (each token attends over a longer context); both below, slower (a server that batches prefill).
    """
    if fit.prefill_at(0) is None:
        return ""
    by: dict[int, list[ProbePoint]] = {}
    for p in _ok(fit.points, "input", lambda p: p.ttft_ms if p.input_tokens is not None else None):
        by.setdefault(p.group, []).append(p)
    if len(by) < 3:
        return ""
    rungs = sorted(
        (float(np.median([_fresh(p) for p in ps])), float(np.median([float(p.ttft_ms or 0.0) for p in ps])))
        for ps in by.values()
    )
    resid = [y - float(fit.prefill_at(x) or 0.0) for x, y in rungs]
    lo, hi, middle = resid[0], resid[-1], resid[1:-1]
    if lo > 0 and hi > 0 and min(middle) < 0:
        how = "faster than linearly"
    elif lo < 0 and hi < 0 and max(middle) > 0:
        how = "slower than linearly"
    else:
        return ""
    end, share = max(((0, abs(lo) / rungs[0][1]), (-1, abs(hi) / rungs[-1][1])), key=lambda e: e[1])
    if share < CURVE_SHARE:
        return ""
    which = "shortest" if end == 0 else "longest"
    return (
        f"TTFT grows {how} with the input here (the {which} prompts took {share:.0%} "
        f"{'more' if resid[end] > 0 else 'less'} than the line says): the per-1k figure is an average over "
        f"{rungs[0][0]:,.0f}-{rungs[-1][0]:,.0f} tokens, and the base is the line's, not a measured TTFT."
    )
