"""QA regression: a non-streamed answer with reasoning has no TPOT (it had 0.0 ms)."""

from __future__ import annotations

from telemetry import events as ev
from tests.support.turns import at, play


def test_non_streamed_reasoning_and_text_have_no_tpot() -> None:
    # `ttft ask --no-stream` against a reasoning model: the reasoning and the text come in one
    # response, two chunks with one stamp; TPOT came out 0.0 ms (and pulled medians down).
    rec = play(
        [
            ev.AttemptSent(at(0), 1),
            ev.HeadersReceived(at(2600), 1, 200),
            ev.ReasoningDelta(at(2676), "r" * 80, 20),
            ev.TextDelta(at(2676), "w" * 240, 60),
            ev.Usage(at(2676), input=12, cached_input=0, output=80, reasoning=20),
            ev.Finished(at(2677), "stop"),
        ]
    )
    m = rec["metrics"]
    assert m["ttft_ms"] == m["e2e_ms"] == 2676.0
    assert m["tpot_ms"] is None and m["decode_tokens_per_s"] is None


def test_streamed_chunks_still_have_their_tpot() -> None:
    rec = play(
        [
            ev.AttemptSent(at(0), 1),
            ev.HeadersReceived(at(50), 1, 200),
            *(ev.TextDelta(at(100 + 10 * k), "wwww", 1) for k in range(5)),
            ev.Finished(at(141), "stop"),
        ]
    )
    assert rec["metrics"]["tpot_ms"] == 10.0
