"""telemetry.log.json_line: orjson's lines read back exactly as the stdlib's lines did, whatever the record holds."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from ttft.telemetry.log import turns as log_turns
from ttft.telemetry.log.json_line import encode_line, stdlib_line


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclass
class Point:
    x: int


def read(line: bytes) -> str:
    """The value a line reads back as, shown so NaN compares equal to NaN and -0.0 differs from 0.0."""
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    return repr(json.loads(line.decode("utf-8")))  # always valid UTF-8


odd = st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, 2**70, -(2**64), "\ud800 lone", "\x00\x1f\x7f\u2028", Colour.RED,
     Level.HIGH, np.float64(1.5), np.int64(7), dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), Point(1), (1, 2)]
)  # fmt: skip
leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), odd)
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers(0, 9)), inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.text(max_size=8), values, max_size=6))
def test_reads_back_as_the_stdlib_line(data: dict[str, Any]) -> None:
    assert read(encode_line(data)) == read(stdlib_line(data))


def test_a_record_takes_orjson_and_odd_values_the_stdlib() -> None:
    record = {"schema": "ttft.turn/2", "turn_index": 3, "metrics": {"ttft_ms": 12.5, "itl_ms": {"p50": 1e-05}},
              "chunks": [{"t_ms": 20.125, "kind": "text", "tokens": 1}], "answer": "héllo \u2028"}  # fmt: skip
    line = encode_line(record)
    assert json.loads(line) == record
    assert b"1e-05" not in line  # orjson's own float text (0.00001): the line came from orjson
    for odd_value in (math.nan, Colour.RED, np.float64(2.5), (1, 2), 2**70):
        rec = {**record, "server": {"x": odd_value}}
        assert encode_line(rec) == stdlib_line(rec)
    assert log_turns.encode_line is encode_line  # the session log writes its lines the same way
