"""QA regression: the probe's advice names the cached prefix in tokens."""

from telemetry.probe.fit import levers
from telemetry.probe.result import CacheFit, Estimate, ProbeFit


def test_probe_levers_name_the_prefix_in_tokens() -> None:
    # a real local probe said "a cached 211 prefix saves 3.1 s": 211 of what?
    fit = ProbeFit(
        base_ttft_ms=None,
        prefill_ms_per_1k_input_tokens=None,
        tpot_ms=None,
        output_ms_per_100_tokens=None,
        cache=CacheFit(detected=True, cached_tokens=211, ttft_saving_ms=Estimate(3053.8, 2477.2, 3630.5)),
    )
    assert "cached 211-token prefix saves 3.1 s" in levers(fit)
