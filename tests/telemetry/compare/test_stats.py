"""telemetry.compare.stats: rankings, medians/p90, bootstrap verdicts, failures kept per pane."""

from __future__ import annotations

import numpy as np
import pytest
from ttft.telemetry.compare.stats import METRICS, MIN_TRIALS, bootstrap_median_diff, compare, fmt_amount
from ttft.telemetry.record import TurnRecord


def rec(
    ttft: float | None = 200.0,
    tpot: float | None = 10.0,
    out: int = 100,
    *,
    ttfvt: float | None = None,
    status: str = "ok",
    model: str = "m",
) -> TurnRecord:
    e2e = None if ttft is None or tpot is None else ttft + tpot * (out - 1)
    return TurnRecord.from_dict(
        {
            "schema": "ttft.turn/1",
            "session_id": "s",
            "turn_index": 0,
            "provider": "openai",
            "model": model,
            "status": status,
            "error": {"type": "APIError", "message": "boom", "status_code": 500} if status == "error" else None,
            "metrics": {
                "ttft_ms": ttft,
                "ttfvt_ms": ttfvt if ttfvt is not None else ttft,
                "tpot_ms": tpot,
                "e2e_ms": e2e,
            },
            "tokens": {"output": out},
        }
    )


def noisy(rng: np.random.Generator, n: int, ttft: float, tpot: float, out: int = 100) -> list[TurnRecord]:
    return [rec(ttft + rng.normal(0, 15), tpot + rng.normal(0, 0.5), out) for _ in range(n)]


def test_ranking_marks_winner_per_column() -> None:
    # A: fast first token, slow decode. B: the opposite.
    c = compare({"A": [rec(100, 20, 50)], "B": [rec(400, 5, 80)]})
    assert c.rankings["ttft"].winners == ("A",)
    assert c.rankings["tpot"].winners == ("B",)
    assert c.rankings["e2e"].order == ("B", "A")  # 400+5*79=795 vs 100+20*49=1080
    assert c.rankings["output_tokens"].winners == ("A",)
    assert c.rankings["ttft"].rank == {"A": 1, "B": 2}


def test_ties_share_the_win() -> None:
    c = compare({"A": [rec(100)], "B": [rec(100)], "C": [rec(300)]})
    assert c.rankings["ttft"].winners == ("A", "B")
    assert c.rankings["ttft"].rank == {"A": 1, "B": 1, "C": 3}


def test_medians_and_p90_per_pane() -> None:
    recs = [rec(float(t)) for t in (100, 200, 300, 400, 500)]
    s = compare({"A": recs}).stats["A"].metrics["ttft"]
    assert s.median == 300
    assert s.p90 == pytest.approx(460)
    assert s.n == 5


def test_clear_difference_is_detected_with_words() -> None:
    rng = np.random.default_rng(1)
    c = compare({"A": noisy(rng, 10, 200, 10), "B": noisy(rng, 10, 380, 10)})
    v = next(v for v in c.verdicts if v.metric == "ttft")
    assert v.clear and v.better == "A"
    assert v.low is not None and v.high is not None and v.high < 0  # A - B < 0
    assert v.text.startswith("A reaches the first token 1")
    assert "sooner than B (95% interval" in v.text
    amount = -v.diff  # type: ignore[operator]
    assert 140 < amount < 220


def test_identical_distributions_not_declared_different() -> None:
    rng = np.random.default_rng(7)
    c = compare({"A": noisy(rng, 10, 250, 8), "B": noisy(rng, 10, 250, 8)})
    for v in c.verdicts:
        if v.metric in ("ttft", "tpot", "e2e"):
            assert not v.clear, v.text
    tpot = next(v for v in c.verdicts if v.metric == "tpot")
    assert tpot.text.startswith("no clear difference between A and B in TPOT (interval ")


def test_false_positive_rate_stays_low() -> None:
    """Same distribution, many independent draws: few should be called different."""
    rng = np.random.default_rng(123)
    hits = 0
    trials = 60
    for i in range(trials):
        a = rng.lognormal(5.5, 0.3, 12)
        b = rng.lognormal(5.5, 0.3, 12)
        _, lo, hi = bootstrap_median_diff(a, b, resamples=1000, seed=i)
        hits += lo > 0 or hi < 0
    assert hits <= trials * 0.15


def test_bootstrap_is_seeded() -> None:
    a, b = [1.0, 2, 3, 4, 9], [2.0, 3, 5, 7, 8]
    assert bootstrap_median_diff(a, b) == bootstrap_median_diff(a, b)


def test_failures_counted_and_excluded() -> None:
    a = [rec(100), rec(None, None, 0, status="error"), rec(120), rec(110)]
    b = [rec(300), rec(310), rec(290), rec(305)]
    c = compare({"A": a, "B": b})
    s = c.stats["A"]
    assert (s.turns, s.ok, s.failed) == (4, 3, 1)
    assert s.metrics["ttft"].n == 3
    assert s.metrics["ttft"].median == 110
    assert s.errors == ("HTTP 500 APIError: boom",)
    assert c.rankings["ttft"].winners == ("A",)
    row = next(r for r in c.rows() if r["pane"] == "A")
    assert row["failed"] == 1 and row["ttft_winner"] is True


def test_all_failed_pane_ranks_last_without_value() -> None:
    c = compare({"A": [rec(status="error", ttft=None, tpot=None)], "B": [rec(300)]})
    r = c.rankings["ttft"]
    assert r.order == ("B", "A") and r.rank["A"] is None and r.winners == ("B",)
    v = next(v for v in c.verdicts if v.metric == "ttft")
    assert not v.clear and "no value for A" in v.text


def test_too_few_trials_never_claims_clear() -> None:
    a = [rec(100)] * (MIN_TRIALS - 1)
    b = [rec(900)] * (MIN_TRIALS - 1)
    v = next(v for v in compare({"A": a, "B": b}).verdicts if v.metric == "ttft")
    assert not v.clear
    assert v.text.startswith("A reaches the first token 800 ms sooner than B in this run")
    assert "too few turns" in v.text


def test_every_pair_gets_verdicts() -> None:
    c = compare({k: [rec()] for k in "ABCD"})
    pairs = {(v.a, v.b) for v in c.verdicts}
    assert len(pairs) == 6
    assert len(c.verdicts) == 6 * 5


def test_seconds_and_tokens_wording() -> None:
    a = [rec(100, 10, 50)] * 5
    b = [rec(100, 30, 90)] * 5
    c = compare({"A": a, "B": b})
    e2e = next(v for v in c.verdicts if v.metric == "e2e")
    assert e2e.text == "A finishes 2.18 s sooner than B (95% interval 2.18 to 2.18 s)"
    out = next(v for v in c.verdicts if v.metric == "output_tokens")
    assert out.text == "A writes 40 fewer output tokens than B (95% interval 40 to 40 tokens)"


def test_fmt_amount() -> None:
    assert fmt_amount(180.4, "ms") == "180 ms"
    assert fmt_amount(3.24, "ms") == "3.2 ms"
    assert fmt_amount(1234, "ms") == "1.23 s"
    assert fmt_amount(40, "tokens") == "40 tokens"


def test_wins_name_the_columns_a_pane_ranks_first_in() -> None:
    c = compare({"A": [rec(100, 20, 50)], "B": [rec(400, 5, 80)], "C": [rec(100, 30, 90)]})
    assert c.wins("A") == ("ttft", "ttfvt", "output_tokens")  # TTFT and TTFVT shared with C
    assert c.wins("B") == ("tpot", "e2e")
    assert c.wins("C") == ("ttft", "ttfvt")
    assert c.wins("nobody") == ()


def test_a_pane_compared_with_nobody_wins_nothing() -> None:
    assert compare({"A": [rec(100)]}).wins("A") == ()


def test_shown_verdicts_leave_out_panes_without_a_good_turn() -> None:
    c = compare({"A": [rec(100)] * 3, "B": [rec(400)] * 3, "C": [rec(status="error")]})
    shown = c.shown_verdicts()
    assert shown and all({v.a, v.b} == {"A", "B"} for v in shown)
    assert len(shown) == len(METRICS)  # one per metric for the one pair that has turns to compare
    # same decode speed and length: only the waits (and so E2E) differ
    assert [v.metric for v in c.shown_verdicts(only_clear=True)] == ["ttft", "ttfvt", "e2e"]


def test_each_panes_cost_is_summed_with_its_failed_turns_and_what_was_not_priced() -> None:
    def priced(r: TurnRecord, usd: float | None) -> TurnRecord:
        from dataclasses import replace

        from ttft.telemetry.cost import Cost

        return replace(r, cost=None if usd is None else Cost(usd / 2, usd / 2, usd, "openai:m", "genai-prices 0.2.3"))

    c = compare(
        {
            "A": [priced(rec(100, 10), 0.002), priced(rec(status="error"), 0.001)],  # a failed turn is billed too
            "B": [priced(rec(200, 10), 0.004), priced(rec(210, 10), None)],
            "C": [rec(300, 10)],
        }
    )
    rows = {r["pane"]: r for r in c.rows()}
    assert rows["A"]["cost_usd"] == pytest.approx(0.003) and rows["A"]["cost_priced_turns"] == 2
    assert (rows["B"]["cost_usd"], rows["B"]["cost_unpriced_turns"]) == (0.004, 1)
    assert rows["C"]["cost_usd"] is None and c.priced
    assert not compare({"C": [rec(300, 10)]}).priced
