"""One record as one JSON line: orjson for plain JSON values, the stdlib for anything else.

A bench writes every request's record to ``turns.jsonl`` and a chat every turn to its session
log; the stdlib's encoder spent ~100 us on a 4 KB record, orjson a tenth. Every line reads back
as the stdlib's would: orjson writes NaN and infinities as null, numpy's floats and enums its own
way, and refuses lone surrogates, integers past 64 bits and keys not str: a line that does not
read back equal to its record (orjson's parse and a C-level compare, a third of the stdlib's
encoding) or that orjson refuses is the stdlib's, as before.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from .surrogates import scrub

# datetimes and dataclasses to default=str, as the stdlib's default=str writes them
_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def stdlib_line(data: Any) -> bytes:
    """The line as the stdlib writes it: a value JSON cannot hold is written as its text, a lone
    surrogate the backends' edge missed (a server's notice, a hand-made record) replaced."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        return scrub(text).encode() + b"\n"


def encode_line(data: dict[str, Any]) -> bytes:
    """One record as a JSON line that is always valid UTF-8 and reads back as the stdlib's line."""
    try:
        line = orjson.dumps(data, default=str, option=_OPTIONS)
    except TypeError:  # a lone surrogate, an integer past 64 bits, a key not a str, nesting too deep
        return stdlib_line(data)
    # What reads back equal to the record is what the stdlib's line reads back as; NaN (written as
    # null), numpy's floats and enums (orjson's own way) and tuples (lists) do not, and take the stdlib.
    return line if orjson.loads(line) == data else stdlib_line(data)
