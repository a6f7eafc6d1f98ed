"""Lone surrogates: text no UTF-8 file or terminal can hold, replaced before it spreads.

A server may send ``"\\ud800"`` (valid JSON, and what an ASCII-escaping server emits when it
cuts a character in two); Python decodes it to a lone surrogate, which then makes every
UTF-8 write raise: the log line, the answer on stdout, an export. Each is replaced with
U+FFFD (the Unicode replacement character) once, where wire text becomes an event.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from .. import events as ev

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")

# The events that carry text from the wire, and which of their fields do.
_TEXT_FIELDS: dict[type, tuple[str, ...]] = {
    ev.TextDelta: ("text",),
    ev.ReasoningDelta: ("text",),
    ev.ToolCallDelta: ("name", "arguments"),
    ev.Failed: ("error_type", "message", "hint"),
}


def scrub(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD; the same object when there is none."""
    if text.isascii():  # almost every chunk: a flag check, no scan
        return text
    return _SURROGATE.sub(REPLACEMENT, text) if _SURROGATE.search(text) else text


def scrub_event(e: ev.Event) -> ev.Event:
    """The event with its text fields scrubbed; the same object when they are clean (the usual case)."""
    if type(e) is ev.TextDelta and e.text.isascii():  # almost every event: clean, no lookup or loop
        return e
    names = _TEXT_FIELDS.get(type(e))
    if names is None:
        return e
    changes: dict[str, Any] = {}  # str values, for fields that only the concrete event type declares
    for name in names:
        value = getattr(e, name)
        if value and not value.isascii():
            clean = scrub(value)
            if clean is not value:
                changes[name] = clean
    return replace(e, **changes) if changes else e


def scrub_value(value: Any) -> Any:
    """Any JSON-shaped value with every string in it scrubbed (for what is not an event: a read log line)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_value(v) for v in value]
    return value
