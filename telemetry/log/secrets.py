"""Secrets masked by their known values, wherever an error's text is kept or shown.

The values are the ones ttft itself sends: the API key, each configured header's value (and the
token of ``Bearer TOKEN``), a base URL's credentials and query values. A pattern such as ``sk-...``
misses a short or unusual key; the values themselves cannot be missed. Each is masked as it stands
and in the forms a library's message quotes it in: escaped as Python writes a string or a bytes
value (``b'Bearer k3y\\r\\n'``), as JSON writes it, percent-encoded. A value shorter than
:data:`MIN_ANYWHERE` characters is masked only where it stands as a word of its own, so a
three-letter key does not eat the letters of every word that holds them.

Every backend made in this process adds its values to :data:`KNOWN`; each turn's ``Failed`` event
is masked with them (:func:`masked`) where the stream's events enter the recorder
(``backends.turn``), so the record, the log, stderr and the screen all get the masked text. A
process that runs its backend in a child (``tui.isolated``) gets the child's events masked there.

What a person types is kept on disk masked too (:func:`typed`: the prompt history, the drafts): each
URL's credentials and query values, as the log shows a base URL, and every value :data:`KNOWN` holds.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Iterable
from dataclasses import replace

from telemetry import events as ev
from telemetry.log.urls import redact_urls_in

MASK = "***"
MIN_ANYWHERE = 8  # shorter values are masked as whole words only
# A whole word: not inside a name, and not one part of a dotted number or address, so a short value
# ("1", a query's "v2") never eats a piece of "127.0.0.1" or "1.5"; a sentence's final dot still ends it.
_WORD_START = r"(?<![A-Za-z0-9_\-.])"
_WORD_END = r"(?![A-Za-z0-9_\-]|\.[A-Za-z0-9])"


def _forms(value: str) -> set[str]:
    """The value and the ways an error message may quote it."""
    out = {value, value.strip()}
    out.add(repr(value)[1:-1])
    out.add(repr(value.encode("utf-8", "surrogateescape"))[2:-1])
    out.add(json.dumps(value)[1:-1])
    out.add(json.dumps(value, ensure_ascii=False)[1:-1])
    out.add(urllib.parse.quote(value, safe=""))
    out.add(urllib.parse.quote_plus(value, safe=""))
    return {f for f in out if f}


class Secrets:
    """A set of secret values, and the one regular expression that finds any of them in a text."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._values: set[str] = set()
        self._given: dict[str, None] = {}  # the values as given, in order (their forms are in _values)
        self._lock = threading.Lock()  # backends are made on several threads (compare panes, bench workers)
        self._pattern: re.Pattern[str] | None = None
        self.add(*values)

    def add(self, *values: str | None) -> None:
        new = {f for v in values if v for f in _forms(v)} - self._values
        if not new:
            return
        with self._lock:
            self._given.update(dict.fromkeys(v for v in values if v))
            self._values |= new
            # Longest first, so "Bearer tok" is masked whole rather than leaving "Bearer " before a mask.
            words = sorted(self._values, key=len, reverse=True)
            alternatives = [
                re.escape(w) if len(w) >= MIN_ANYWHERE else rf"{_WORD_START}{re.escape(w)}{_WORD_END}" for w in words
            ]
            self._pattern = re.compile("|".join(alternatives))

    def mask(self, text: str) -> str:
        """``text`` with every known value (in any of its quoted forms) replaced by ``***``."""
        pattern = self._pattern
        if pattern is None or not text:
            return text
        if not any(v in text for v in self._values):  # a substring search each: a pasted 5 MB draft, 20 ms
            return text
        return pattern.sub(MASK, text)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def given(self) -> tuple[str, ...]:
        """The values as they were added (what another process needs to mask the same)."""
        return tuple(self._given)


KNOWN = Secrets()  # this process's: every backend made here adds its own


def remember(*values: str | None) -> None:
    """Add values this process sends (a key, a header's value, a URL's credentials) to :data:`KNOWN`."""
    KNOWN.add(*values)


def mask(text: str) -> str:
    """``text`` with every value :data:`KNOWN` holds masked."""
    return KNOWN.mask(text)


def typed(text: str) -> str:
    """Text a person typed (a prompt, a command, a draft) as it may be kept on disk: every URL in it
    with its credentials and query values masked (:func:`telemetry.log.urls.redact_urls_in`), and every
    secret value this process knows (an API key pasted into a prompt) masked."""
    return KNOWN.mask(redact_urls_in(text))


def masked(e: ev.Failed) -> ev.Failed:
    """The event with its message masked (the same object when nothing in it is secret)."""
    text = KNOWN.mask(e.message)
    return e if text == e.message else replace(e, message=text)


def header_secrets(headers: dict[str, str]) -> tuple[str, ...]:
    """What to mask of configured headers: each value, and its last word (the token of
    ``Bearer TOKEN``), since a server may echo either. Every header, not only those named like
    auth ones: ``X-Api-Key``, ``Helicone-Auth`` or ``api-key`` cannot all be guessed."""
    out: list[str] = []
    for value in headers.values():
        words = value.split()
        out += [value, words[-1] if words else ""]
    return tuple(dict.fromkeys(v for v in out if v))
