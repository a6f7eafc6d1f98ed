"""<think> splitting over streamed chunks: tags cut anywhere must not change the result."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from ttft.backends.think import ThinkSplitter


def split_all(chunks: list[str], *, inside: bool = False) -> tuple[str, str, list[tuple[str, str]]]:
    sp = ThinkSplitter(inside=inside)
    parts: list[tuple[str, str]] = []
    for c in chunks:
        parts += sp.feed(c)
    parts += sp.flush()
    reasoning = "".join(t for k, t in parts if k == "reasoning")
    text = "".join(t for k, t in parts if k == "text")
    return reasoning, text, parts


def test_whole_block_in_one_chunk() -> None:
    r, t, _ = split_all(["<think>plan it</think>The answer."])
    assert (r, t) == ("plan it", "The answer.")


def test_tags_cut_across_chunks() -> None:
    r, t, parts = split_all(["<thi", "nk>step 1, ", "step 2</th", "ink>", "Done", "."])
    assert (r, t) == ("step 1, step 2", "Done.")
    # reasoning comes out before any visible text, and nothing of the tags leaks
    kinds = [k for k, _ in parts]
    assert kinds.index("text") > max(i for i, k in enumerate(kinds) if k == "reasoning")
    assert all("<" not in p for _, p in parts)


def test_one_character_chunks() -> None:
    s = "<think>a<b</think>c</d"
    r, t, _ = split_all(list(s))
    assert (r, t) == ("a<b", "c</d")


def test_text_that_only_looks_like_a_tag_start_is_released() -> None:
    r, t, _ = split_all(["x <", "thin", "g"])
    assert (r, t) == ("", "x <thing")
    # a held fragment at the very end is text, not swallowed
    r, t, _ = split_all(["ends with <thi"])
    assert (r, t) == ("", "ends with <thi")


def test_partial_tag_is_held_until_decided() -> None:
    sp = ThinkSplitter()
    assert sp.feed("hello <th") == [("text", "hello ")]
    assert sp.feed("ink>why") == [("reasoning", "why")]
    assert sp.feed("</think") == []
    assert sp.feed(">ok") == [("text", "ok")]


def test_template_that_opens_the_block_in_the_prompt() -> None:
    r, t, _ = split_all(["thinking...", "</think>\n\nhi"], inside=True)
    assert (r, t) == ("thinking...", "\n\nhi")


def test_no_tags_is_all_text() -> None:
    r, t, parts = split_all(["plain ", "answer"])
    assert (r, t) == ("", "plain answer")
    assert parts == [("text", "plain "), ("text", "answer")]


def test_unclosed_think_is_all_reasoning() -> None:
    r, t, _ = split_all(["<think>still going", " and going"])
    assert (r, t) == ("still going and going", "")


_alphabet = st.sampled_from(["<", ">", "/", "t", "h", "i", "n", "k", " ", "a", "\n", "<think>", "</think>", "é"])
_texts = st.lists(_alphabet, max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_texts, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12), inside=st.booleans())
def test_any_split_gives_the_same_result_as_unsplit(text: str, cuts: list[int], inside: bool) -> None:
    points = sorted({c % (len(text) + 1) for c in cuts})
    chunks, prev = [], 0
    for p in [*points, len(text)]:
        chunks.append(text[prev:p])
        prev = p
    whole_r, whole_t, _ = split_all([text], inside=inside)
    r, t, parts = split_all(chunks, inside=inside)
    assert (r, t) == (whole_r, whole_t)
    assert all(p for _, p in parts)  # never an empty piece
    # and nothing is lost but the tags themselves
    assert len(r) + len(t) <= len(text)
