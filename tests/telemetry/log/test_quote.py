"""Values from outside, as an error message quotes them: never more than 200 characters of one."""

from __future__ import annotations

from ttft.telemetry.log.quote import LIMIT, cut, quoted


def test_a_short_value_is_quoted_whole() -> None:
    assert quoted("openai:gpt-x") == "'openai:gpt-x'" and cut("abc") == "abc"
    assert quoted(5) == "5" and quoted("a\x1bb") == "'a\\x1bb'"  # control characters escaped
    assert cut("x" * LIMIT) == "x" * LIMIT


def test_a_long_value_keeps_its_start_and_end_and_says_its_length() -> None:
    text = "start-" + "x" * 100_000 + "-end.gguf"
    shown = cut(text)
    assert shown.startswith("start-x") and "…" in shown and shown.endswith("-end.gguf (100,015 characters)")
    assert len(shown.split(" (")[0]) == LIMIT
    q = quoted(text)
    assert q.startswith("'start-") and "-end.gguf' (100,017 characters)" in q
    assert len(cut("y" * 500, 20).split(" (")[0]) == 20
