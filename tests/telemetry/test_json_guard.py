"""The guard for untrusted JSON (issue 28): nesting measured without recursion and exactly, size
bounded, every refusal one typed error in words, and what can be kept (a message beside a hostile
part, the start of a body cut short) kept."""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from ttft.telemetry import json_guard
from ttft.telemetry.json_guard import MAX_DEPTH, PRUNED, JsonRefused, depth_bound

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECTS = '{"a":' * 100_000 + "1" + "}" * 100_000


def _depth(value: Any) -> int:
    """The nesting of a parsed value, as the parser recursed to read it (the reference)."""
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


# Strings full of what a naive bracket count would trip on: brackets, quotes, backslashes.
_tricky = st.text(alphabet=st.sampled_from('[]{}"\\ab\u00e9\n'), max_size=12)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _tricky,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_tricky, inner, max_size=4),
    max_leaves=40,
)


def _nest(value: Any, levels: int) -> Any:
    for i in range(levels):
        value = [value] if i % 2 else {"k[": value}
    return value


@given(value=_values, extra=st.integers(0, 2 * MAX_DEPTH), ascii_only=st.booleans())
@example(value='["\\"]', extra=MAX_DEPTH, ascii_only=True)  # an escaped quote, then brackets in a string
@example(value="\\", extra=MAX_DEPTH + 1, ascii_only=False)
def test_the_depth_is_never_under_and_never_refuses_a_document_within_the_limit(
    value: Any, extra: int, ascii_only: bool
) -> None:
    doc = _nest(value, extra)
    text = json.dumps(doc, ensure_ascii=ascii_only)
    depth = _depth(doc)
    bound = depth_bound(text)
    assert depth_bound(text.encode()) == bound
    if depth <= MAX_DEPTH:  # brackets inside strings may count, but never past the limit
        assert depth <= bound <= MAX_DEPTH
    else:
        assert bound == MAX_DEPTH + 1
    if depth > MAX_DEPTH:  # past the limit, it is always caught (brackets in strings never hide it)
        with pytest.raises(JsonRefused) as caught:
            json_guard.loads(text)
        assert caught.value.reason == "too_deep"
    else:
        assert json_guard.loads(text) == doc


@pytest.mark.parametrize("doc", [DEEP, DEEP_OBJECTS, "[" * 100_000, '{"a":"x","b":' + DEEP + "}"])
def test_a_document_100000_deep_is_refused_in_words_without_recursing(doc: str) -> None:
    for data in (doc, doc.encode()):
        with pytest.raises(JsonRefused) as caught:
            json_guard.loads(data, "the arguments")
        err = caught.value
        assert isinstance(err, ValueError)  # every caller that catches a parse failure catches this too
        assert err.reason == "too_deep" and err.what == "the arguments"
        assert str(err) == f"the arguments: JSON nested more than {MAX_DEPTH} levels deep, past ttft's limit"


def test_the_check_never_recurses_even_on_a_nearly_full_stack() -> None:
    def at_depth(n: int) -> Any:
        return at_depth(n - 1) if n else json_guard.loads(DEEP, "deep")

    headroom = sys.getrecursionlimit() - 60  # the check still answers with almost no stack left
    with pytest.raises(JsonRefused):
        at_depth(headroom)


@pytest.mark.parametrize(
    "doc",
    [
        '"' + "[" * 1000,  # an unterminated string: a parser reads none of these as nesting
        '["\\\\", ' + '"' + "[" * 1000 + '"]',  # an escaped backslash before a closing quote
        '["\\"' + "[" * 1000 + '"]',  # an escaped quote inside a string
    ],
)
def test_brackets_inside_strings_are_not_nesting(doc: str) -> None:
    assert depth_bound(doc) <= 2
    try:
        json_guard.loads(doc)
    except JsonRefused as exc:
        assert exc.reason == "not_json"


def test_too_large_and_not_json_are_said_in_words() -> None:
    with pytest.raises(JsonRefused) as caught:
        json_guard.loads('{"a": "' + "x" * 3000 + '"}', "summary.json", max_bytes=2048)
    assert caught.value.reason == "too_large"
    assert str(caught.value) == "summary.json: 2.9 KB of JSON, past ttft's limit of 2.0 KB"
    with pytest.raises(JsonRefused) as caught:
        json_guard.loads("é" * 1500, "x", max_bytes=2048)  # 1,500 characters, 3,000 bytes of UTF-8
    assert caught.value.reason == "too_large"
    with pytest.raises(JsonRefused) as caught:
        json_guard.loads("{nope", "line 3")
    assert caught.value.reason == "not_json"
    assert str(caught.value).startswith("line 3: not JSON (Expecting property name")
    with pytest.raises(JsonRefused) as caught:
        json_guard.loads(b'"\xff"', "line 4")  # bytes that are not UTF-8
    assert caught.value.reason == "not_json"


def test_it_reads_what_the_stdlib_reads_as_the_stdlib_reads_it() -> None:
    assert json_guard.loads("-9223372036854775809") == -9223372036854775809  # no float on the way
    assert math.isnan(json_guard.loads("NaN"))
    assert json_guard.loads('"\\ud800"') == "\ud800"
    assert json_guard.loads(b'{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


def test_the_message_beside_a_hostile_part_is_kept() -> None:
    body = '{"error": {"message": "quota exceeded", "detail": ' + DEEP + ', "type": "rate"}}'
    value, pruned = json_guard.loads_pruned(body, "the error body")
    assert pruned and value["error"]["message"] == "quota exceeded" and value["error"]["type"] == "rate"
    inner = value["error"]["detail"]
    for _ in range(MAX_DEPTH - 3):  # the detail is the third level: down to the last level kept
        inner = inner[0]
    assert inner == [PRUNED]
    assert json_guard.loads_pruned('{"a": 1}') == ({"a": 1}, False)


def test_the_start_of_a_body_cut_short_is_read_when_it_can_be() -> None:
    body = '{"error": {"message": "quota exceeded", "type": "rate", "detail": ' + DEEP + "}}"
    head = json_guard.salvage(body[:16_384])
    assert head is not None and head["error"]["message"] == "quota exceeded" and head["error"]["type"] == "rate"
    # cut inside the message: kept as far as it went (an escape or a character cut in two dropped)
    assert json_guard.salvage('{"error": {"message": "quota exc') == {"error": {"message": "quota exc"}}
    assert json_guard.salvage(b'{"error": {"message": "a\\') == {"error": {"message": "a"}}
    assert json_guard.salvage(b'{"error": {"message": "a\xc3') == {"error": {"message": "a\ufffd"}}
    assert json_guard.salvage('{"error": {"message"') is None  # a key cut from its value: nothing reads
    assert json_guard.salvage('{"a": [1, 2, {"b": "[[["') == {"a": [1, 2, {"b": "[[["}]}


def test_the_guard_costs_little_where_it_runs_on_every_line() -> None:
    """A sanity bound only (the figures are tests/benchmarks/json_guard_cost.py's): a 100,000-deep
    document is measured in milliseconds, not by 100,000 passes."""
    t = time.perf_counter()
    assert depth_bound(DEEP) == MAX_DEPTH + 1
    assert time.perf_counter() - t < 2.0
