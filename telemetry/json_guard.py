"""Untrusted JSON read within bounds: its size and nesting checked before any parser recurses.

Everything ttft parses came from outside: a model's tool arguments, a server's error body, a
stream's events, a log line, a bench summary, a dataset line, the history and drafts files. The
stdlib's parser recurses once per level and raises ``RecursionError`` (not a ``ValueError``) past
about a thousand levels, fewer when the caller's stack is already deep (a Textual handler);
orjson stops at 1,024 levels, and what either returns may still be too deep for the code that
walks it (``repr``, ``json.dumps``, the typed readers). So a document is measured first:

- its size against ``max_bytes`` (:data:`MAX_BYTES` unless the caller knows a tighter bound);
- its nesting against ``max_depth`` (:data:`MAX_DEPTH`): counted without recursion, outside
  strings, by C-level passes over the bytes (:func:`depth_bound`). A document with no more
  opening brackets than the limit cannot be too deep, so the usual one costs one
  ``bytes.translate`` and a count (~17 us on a 24 KB log line, whose parse takes ~200 us).

Any refusal, and any parse failure, is one :class:`JsonRefused` (a ``ValueError``, so callers that
already catch a parse failure keep working) whose message says what was wrong in words. Where a
caller must keep what it can (an error body holding the server's message), :func:`loads_pruned`
reads the document with each part nested past the limit replaced by a note, and :func:`salvage`
reads the first bytes of one too long to keep whole.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any, Literal

from .errors import TtftError

MAX_DEPTH = 128  # real documents nest under 20 deep; 128 levels leaves room for every walker's stack
MAX_BYTES = 64 * 1024 * 1024  # no document ttft reads is near this; a caller with a tighter bound passes it
PRUNED = "(nested too deep: left out)"  # what stands for a part past the limit in loads_pruned's result

Reason = Literal["too_deep", "too_large", "not_json"]

# Every byte but the brackets: deleted before the bracket passes. Braces read as brackets: a
# mismatch is the parser's to report, and it nests no deeper for it.
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
PASSES = 8  # innermost pairs removed by bytes.replace this many times; deeper, a running count of the rest
_STEP = (ord("[") + 1).__sub__  # "[" -> +1, "]" -> -1
# A string, one bracket, or a quote that opens a string never closed (the document was cut short).
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|"', re.DOTALL)


class JsonRefused(TtftError, ValueError):
    """A JSON document ttft will not read: too deep, too large, or not JSON. The message names
    ``what`` was read and why, in words; ``reason`` says which for a caller that branches on it."""

    def __init__(self, message: str, *, reason: Reason, what: str = "the JSON") -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.what = what


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    if n >= 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n} bytes"


def _as_bytes(data: str | bytes | bytearray) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8", "surrogatepass")  # a lone surrogate is the parser's to judge
    return bytes(data)


def _nesting(brackets: bytes, limit: int) -> int:
    """The deepest nesting of a run of brackets (``[`` and ``]`` only), at most ``limit + 1``."""
    passes = 0
    while brackets and passes < PASSES:
        fewer = brackets.replace(b"[]", b"")
        if len(fewer) == len(brackets):
            break  # no pair left: what stays is unmatched (a parser stops at a closer, nests at an opener)
        brackets, passes = fewer, passes + 1
    if brackets:  # still deep: the rest's running count of open brackets, at its highest
        passes += max(0, max(accumulate(map(_STEP, brackets))))
    return min(passes, limit + 1)


def depth_bound(data: str | bytes | bytearray, limit: int = MAX_DEPTH) -> int:
    """How deep a parser reading ``data`` can recurse, at most (exact for well-formed JSON), and
    never more than ``limit + 1``. Never recurses, and every step is a C-level pass over bytes.

    A document with no more opening brackets than ``limit`` is under it. Otherwise its brackets are
    kept (``bytes.translate``) and a few passes each remove the innermost pairs, one level, with
    ``bytes.replace``: all that a shallow document with many brackets (a log line's chunk stamps)
    needs; past them, a running count gives the depth of what is left. That counts brackets inside
    strings too, an over-estimate: only when it passes ``limit`` are the strings cut out (escaped
    backslashes and quotes first, then every other piece between quotes) and the rest counted again.
    """
    raw = _as_bytes(data)
    brackets = raw.translate(_BRACKETS, _NOT_BRACKETS)
    openers = brackets.count(b"[")
    if openers <= limit:  # the usual case: too few brackets to be too deep
        return openers
    bound = _nesting(brackets, limit)
    if bound <= limit or b'"' not in raw:
        return bound
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Outside strings: pieces 0, 2, 4... between quotes. An unterminated string's piece is the last,
    # odd one, and left out: a parser reads no bracket after its opening quote as nesting.
    outside = b"".join(unescaped.split(b'"')[::2])
    return _nesting(outside.translate(_BRACKETS, _NOT_BRACKETS), limit)


def _byte_size(data: str | bytes | bytearray, max_bytes: int) -> int:
    if isinstance(data, str) and len(data) * 4 > max_bytes:  # only then can its UTF-8 pass the limit
        return len(data.encode("utf-8", "surrogatepass"))
    return len(data)


def check(
    data: str | bytes | bytearray, what: str = "the JSON", *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> None:
    """Refuse (``JsonRefused``) a document too large or too deep to parse safely."""
    size = _byte_size(data, max_bytes)
    if size > max_bytes:
        raise JsonRefused(
            f"{what}: {_size(size)} of JSON, past ttft's limit of {_size(max_bytes)}", reason="too_large", what=what
        )
    if depth_bound(data, max_depth) > max_depth:
        raise JsonRefused(
            f"{what}: JSON nested more than {max_depth} levels deep, past ttft's limit", reason="too_deep", what=what
        )


def loads(
    data: str | bytes | bytearray, what: str = "the JSON", *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> Any:
    """``data`` parsed as the stdlib parses it (integers past 64 bits exact, NaN read, lone
    surrogate escapes kept), once :func:`check` passes; every failure a ``JsonRefused``."""
    check(data, what, max_bytes=max_bytes, max_depth=max_depth)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: only if the caller's stack was already deep
        raise JsonRefused(f"{what}: not JSON ({exc})", reason="not_json", what=what) from None


def prune(data: str | bytes | bytearray, max_depth: int = MAX_DEPTH, *, close: bool = False) -> bytes:
    """``data`` with each array or object nested past ``max_depth`` replaced by the string :data:`PRUNED`,
    so what lies near the top (a server's message beside a deep ``detail``) can still be read.
    ``close``: a document cut short (the first bytes of a long body) is closed, its open string,
    arrays and objects ended, so that its top may parse. A loop over the brackets and strings only
    (each string one regular-expression match), so it is for documents already refused, not the
    hot path."""
    raw = _as_bytes(data)
    note = json.dumps(PRUNED).encode()
    out: list[bytes] = []
    closers: list[bytes] = []  # what ends each array or object open at or above max_depth
    cut = False  # inside a part being left out
    depth = 0
    start = 0  # the start of the text not yet copied
    open_string = False
    for m in _TOKENS.finditer(raw):
        c = raw[m.start()]
        if c == 0x22:  # a string: no bracket inside it counts
            if m.end() - m.start() == 1:  # a quote never closed: all the rest is inside it
                open_string = True
                break
            continue
        if c in b"[{":
            depth += 1
            if depth <= max_depth:
                closers.append(b"]" if c == 0x5B else b"}")
            elif depth == max_depth + 1:
                out.append(raw[start : m.start()])
                cut = True
        else:
            if depth == max_depth + 1 and cut:
                out.append(note)
                start, cut = m.end(), False
            elif 0 < depth <= max_depth and closers:
                closers.pop()
            depth -= 1
    out.append(note if cut else raw[start:])  # never closed: the rest is left out
    if close:
        if open_string and not cut:
            tail = out[-1]
            if (len(tail) - len(tail.rstrip(b"\\"))) % 2:  # cut inside an escape: its backslash goes
                out[-1] = tail[:-1]
            out.append(b'"')
        out.extend(reversed(closers))
    return b"".join(out)


def loads_pruned(
    data: str | bytes | bytearray, what: str = "the JSON", *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
) -> tuple[Any, bool]:
    """``(value, pruned)``: the document read with what nests past ``max_depth`` left out
    (:func:`prune`), and whether anything was. Too large or not JSON: ``JsonRefused``."""
    try:
        return loads(data, what, max_bytes=max_bytes, max_depth=max_depth), False
    except JsonRefused as exc:
        if exc.reason != "too_deep":
            raise
    return loads(prune(data, max_depth), what, max_bytes=max_bytes, max_depth=max_depth), True


def loads_event(data: str | bytes | bytearray, what: str = "a stream event") -> Any:
    """A stream event, read as every reader reads it (the lean readers, and the SDKs' decoders through
    ``backends.providers.hosted.GuardedEvents``): what nests past the depth left out (:func:`prune`),
    so the rest of the event goes on; an event that is nothing but the nesting, too large or not
    JSON is refused (``JsonRefused``)."""
    value, pruned = loads_pruned(data, what)
    if pruned and not isinstance(value, dict):
        check(data, what)  # no event around the deep part: say it is nested too deep
    return value


def salvage(head: str | bytes | bytearray, max_depth: int = MAX_DEPTH) -> Any:
    """What reads of the first bytes of a document too long to keep whole: its parts past
    ``max_depth`` left out and its cut end closed (:func:`prune`), a string cut short ending where
    the cut fell; None when even that is not JSON (a key cut from its value). For a server's
    error body, whose message comes first: never for data that must be whole."""
    closed = prune(head, max_depth, close=True).decode("utf-8", "replace")  # a character cut in two
    try:
        return loads(closed, max_depth=max_depth)
    except JsonRefused:
        return None
