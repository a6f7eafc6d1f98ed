"""The probe's fit on synthetic points: it recovers a known line through noise and outliers,
its intervals hold the estimate, and it moves exactly as the data do (shift, scale)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from ttft.telemetry.probe.fit import curvature_note, fit_cache, fit_probe, levers, theil_sen
from ttft.telemetry.probe.result import CacheFit, Estimate, ProbeFit, ProbePoint, fit_from_dict

LENGTHS = (128, 400, 1200, 3000, 8000)


def _inputs(base: float, per_token: float, trials: int, noise: float, outliers: int, seed: int) -> list[ProbePoint]:
    rng = random.Random(seed)
    pts = []
    for g, n in enumerate(LENGTHS):
        for t in range(trials):
            y = base + per_token * n + rng.gauss(0, noise)
            pts.append(ProbePoint("input", g, t, n, 0, 4, y, y + 10, 2.0, "usage"))
    for k in rng.sample(range(len(pts)), outliers):  # a stalled request: far above, never below
        p = pts[k]
        pts[k] = ProbePoint("input", p.group, p.trial, p.input_tokens, 0, 4, (p.ttft_ms or 0) + rng.uniform(300, 3000),
                            None, None, "usage")  # fmt: skip
    return pts


@settings(max_examples=25, deadline=None)
@given(
    base=st.floats(5, 500),
    per_1k=st.floats(2, 300),
    trials=st.integers(4, 6),
    noise=st.floats(0, 3),
    outlier_share=st.floats(0, 0.15),
    seed=st.integers(0, 10_000),
)
def test_recovers_a_known_line_through_noise_and_outliers(base, per_1k, trials, noise, outlier_share, seed) -> None:
    pts = _inputs(base, per_1k / 1000, trials, noise, int(outlier_share * trials * len(LENGTHS)), seed)
    fit = fit_probe(pts)
    slope, intercept = fit.prefill_ms_per_1k_input_tokens, fit.base_ttft_ms
    assert slope is not None and intercept is not None
    assert abs(slope.value - per_1k) <= 0.1 * per_1k + 2.0  # 2 ms/1k: the noise over an 8k span
    assert abs(intercept.value - base) <= 15
    assert slope.low <= slope.value <= slope.high and intercept.low <= intercept.value <= intercept.high


def test_least_squares_would_follow_the_outliers_theil_sen_does_not() -> None:
    pts = _inputs(30, 0.04, 5, 1.0, 4, seed=3)
    fit = fit_probe(pts)
    assert fit.prefill_ms_per_1k_input_tokens is not None
    assert abs(fit.prefill_ms_per_1k_input_tokens.value - 40) < 2
    xs = [float(p.input_tokens or 0) for p in pts]
    ys = [float(p.ttft_ms or 0) for p in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    ols = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    assert abs(ols * 1000 - 40) > 5  # the same points, fitted by least squares, miss by more


@settings(max_examples=20, deadline=None)
@given(shift=st.floats(-100, 100), scale=st.floats(0.2, 5), seed=st.integers(0, 1000))
def test_equivariant_to_shift_and_scale(shift, scale, seed) -> None:
    rng = random.Random(seed)
    xs = [rng.uniform(100, 8000) for _ in range(15)]
    ys = [20 + 0.03 * x + rng.gauss(0, 5) for x in xs]
    line = theil_sen(xs, ys)
    moved = theil_sen(xs, [scale * y + shift for y in ys])
    assert line is not None and moved is not None
    assert abs(moved[0] - scale * line[0]) <= 1e-9 * max(1.0, abs(moved[0]))
    assert abs(moved[1] - (scale * line[1] + shift)) <= 1e-6 * max(1.0, abs(moved[1]))


def test_no_figure_without_the_points_for_it() -> None:
    assert theil_sen([1000, 1000, 1000], [10, 20, 30]) is None  # one input length shows no slope
    fit = fit_probe([ProbePoint("input", 0, t, 1000, 0, 4, 50.0, 60.0, 2.0, "usage") for t in range(3)])
    assert fit.base_ttft_ms is None and fit.prefill_ms_per_1k_input_tokens is None
    assert fit.tpot_ms is None and fit.output_ms_per_100_tokens is None and fit.cache.detected is False
    failed = [
        ProbePoint("input", g, 0, n, 0, 4, None, None, None, "usage", status="error") for g, n in enumerate(LENGTHS)
    ]
    assert fit_probe(failed).prefill_ms_per_1k_input_tokens is None
    assert levers(fit_probe([])) == "Not enough successful turns to fit anything."


def _pairs(cold: float, warm: float, cached: int | None, n: int = 4, noise: float = 2.0) -> list[ProbePoint]:
    rng = random.Random(1)
    out = []
    for t in range(n):
        src = "usage" if cached is not None else "estimated"
        out.append(ProbePoint("cache_cold", 1000 + t, t, 4000, 0, 4, cold + rng.gauss(0, noise), None, None, src))
        out.append(ProbePoint("cache_warm", 1000 + t, t, 4000, cached, 4, warm + rng.gauss(0, noise), None, None, src))
    return out


def test_cache_detected_by_usage_or_by_a_saving_beyond_noise() -> None:
    c = fit_cache(_pairs(200, 40, 3968))
    assert c.detected and c.cached_tokens == 3968 and c.ttft_saving_ms is not None
    assert abs(c.ttft_saving_ms.value - 160) < 10
    assert fit_cache(_pairs(200, 40, None)).detected  # no usage, but the timing leaves no doubt
    nothing = fit_cache(_pairs(200, 199, 0))
    assert not nothing.detected and nothing.cached_tokens is None
    assert levers(fit_probe(_pairs(200, 199, 0))) == "No prompt cache was seen."


def test_output_fit_and_levers_in_plain_words() -> None:
    pts = _inputs(30, 0.038, 4, 1.0, 0, seed=5)
    for g, n in enumerate((16, 64, 128, 256)):
        for t in range(4):
            pts.append(ProbePoint("output", 50 + g, t, 30, 0, n, 30.0, 30 + 11.0 * (n - 1), 11.0, "usage"))
    pts += _pairs(190, 40, 3968)
    fit = fit_probe(pts)
    assert fit.output_ms_per_100_tokens is not None and abs(fit.output_ms_per_100_tokens.value - 1100) < 1
    assert fit.tpot_ms is not None and fit.tpot_ms.value == 11.0
    text = levers(fit, 4096)
    assert text.startswith("Each 1k input tokens add 38")
    assert "each 100 output tokens add 1.1 s" in text and "a cached 4k-token prefix saves 150 ms" in text
    assert text.endswith("for this model, shorten answers first.")
    # The saved form reads back to the same figures, without the points.
    back = fit_from_dict(fit.to_dict(points=False))
    assert back.to_dict(points=False) == fit.to_dict(points=False) and back.points == ()


def test_a_bending_line_is_said_and_a_straight_one_is_not() -> None:
    straight = fit_probe(_inputs(30, 0.04, 4, 1.0, 0, seed=2))
    assert curvature_note(straight) == ""
    rng = random.Random(4)
    bent = [  # per-token cost growing with the context, as attention on a small CPU model
        ProbePoint("input", g, t, n, 0, 4, 200 + 30 * n * (1 + n / 3000) + rng.gauss(0, 5), None, None, "usage")
        for g, n in enumerate(LENGTHS)
        for t in range(4)
    ]
    note = curvature_note(fit_probe(bent))
    assert note.startswith("TTFT grows faster than linearly") and "128-8,000 tokens" in note


def test_levers_name_the_cached_prefix_in_tokens() -> None:
    # "a cached 211 prefix saves 3.1 s" would leave the unit to guess
    fit = ProbeFit(
        base_ttft_ms=None,
        prefill_ms_per_1k_input_tokens=None,
        tpot_ms=None,
        output_ms_per_100_tokens=None,
        cache=CacheFit(detected=True, cached_tokens=211, ttft_saving_ms=Estimate(3053.8, 2477.2, 3630.5)),
    )
    assert "cached 211-token prefix saves 3.1 s" in levers(fit)
