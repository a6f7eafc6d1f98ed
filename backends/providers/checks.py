"""What ttft checks of a key, a header value and a base URL before anything is sent.

A key read from a file saved with CRLF (``export OPENAI_API_KEY=$(cat key.txt)``), or pasted with
its line break, would otherwise fail every request inside the HTTP library, as a dropped
connection whose message quotes the header's value. A ``file://`` base URL would be retried as an
unreachable server. Each problem here is said in words that name where the value came from (the
variable, the config key, ``--base-url``) and never the value itself.
"""

from __future__ import annotations

import unicodedata
import urllib.parse

SCHEMES = ("http", "https")


def _char(c: str) -> str:
    name = unicodedata.name(c, "")
    return f"U+{ord(c):04X}" + (f" {name}" if name else "")


def value_problem(value: str) -> str | None:
    """What is wrong with a key or header value as HTTP would carry it (after any surrounding
    whitespace is taken off), in words without the value; None when nothing is."""
    for i, c in enumerate(value, 1):
        if c in "\r\n\u2028\u2029\x85":
            return f"holds a line break inside it (character {i} of {len(value)})"
        if unicodedata.category(c) == "Cc":
            return f"holds a control character ({_char(c)}) inside it (character {i} of {len(value)})"
        if not c.isascii():
            return f"holds a character HTTP headers cannot carry ({_char(c)}, character {i} of {len(value)})"
    return None


def url_problem(url: str) -> str | None:
    """What keeps ``url`` from being a server's base address, in words; None when nothing does."""
    if any(c.isspace() or unicodedata.category(c) == "Cc" for c in url):
        return "holds a space, a line break or a control character"
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # reading it checks it: a port that is no number, or out of range
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if "://" not in url:
        return "is not an http:// or https:// address (it has no scheme in front)"
    if parts.scheme.lower() not in SCHEMES:
        return f"is not an http:// or https:// address ({parts.scheme}://)"
    if not parts.hostname:
        return "has no host"
    return None
