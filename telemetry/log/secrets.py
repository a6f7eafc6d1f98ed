"""The one masker for text that leaves ttft: :func:`mask`.

Secrets are masked where text leaves (stderr, the screen, a log, an export, a span, a crash report,
``--json``), never only where it is made: an error ttft did not foresee can quote anything. Each exit
calls :func:`mask` (or :func:`masked` for a ``Failed`` event, :func:`masked_record` for a record), which
masks, keeping every other word of the text:

- the values this process sends (:data:`KNOWN`): the API key, each configured header's value (and the
  token of ``Bearer TOKEN``), a base URL's credentials and query values, an ``[mcp.NAME]`` server's
  env values and headers. Whatever reads a key or a config registers it once (:func:`remember`);
- the values of environment variables named like secrets (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``,
  ``*PASSWORD*``; :func:`environment_secrets`), read from the environment as it is at each call;
- the value after ``Authorization:``, ``Proxy-Authorization:``, ``x-api-key:`` or ``api-key:``, and a
  ``Bearer`` token, wherever a message quotes a header;
- each URL's user info and query values (:func:`telemetry.log.urls.redact_urls_in`).

A known value is masked as it stands and in the forms a library's message quotes it in: escaped as
Python writes a string or a bytes value (``b'Bearer k3y\\r\\n'``), as JSON writes it, percent-encoded. A
value shorter than :data:`MIN_ANYWHERE` characters is masked only where it stands as a word of its
own, so a three-letter key does not eat the letters of every word that holds them.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from .. import events as ev
from .urls import redact_urls_in

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


KNOWN = Secrets()  # this process's: every backend, key and MCP server config read here adds its own


def remember(*values: str | None) -> None:
    """Add values this process sends (a key, a header's value, a URL's credentials) to :data:`KNOWN`."""
    KNOWN.add(*values)


# Names that say a variable holds a secret, as words of the name: OPENAI_API_KEY, GITHUB_TOKEN,
# AWS_SECRET_ACCESS_KEY, DB_PASSWORD. As words, so TOKENIZERS_PARALLELISM=false, SSH_AUTH_SOCK or
# XAUTHORITY never make "false" or a path a secret to mask in every message.
_SECRET_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIALS"})
_SECRET_ANYWHERE = re.compile(r"PASSWORD|PASSWD|SECRET|APIKEY|API_KEY|ACCESS_TOKEN|AUTH_TOKEN", re.IGNORECASE)
# Values that are switches, not secrets (HF_HUB_DISABLE_IMPLICIT_TOKEN=1): masking "1" or "true" as a
# word would eat the numbers and words of every message.
_NOT_SECRET = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null", "0", "1"})


@functools.lru_cache(maxsize=1024)  # asked of every variable at each mask: the names rarely change
def secret_name(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    upper = name.upper()
    return bool(_SECRET_ANYWHERE.search(upper)) or any(w in _SECRET_WORDS for w in upper.split("_"))


def secret_value(value: str) -> bool:
    """Whether a value may be a secret at all: not blank, not a switch, not a tiny number."""
    v = value.strip()
    return len(v) >= 3 and v.lower() not in _NOT_SECRET and not (v.isdigit() and len(v) < 6)


def environment_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of environment variables whose names say they hold a secret."""
    env = os.environ if environ is None else environ
    return tuple(v for k, v in env.items() if secret_value(v) and secret_name(k))


_ENV_CACHE: tuple[tuple[str, ...], Secrets] = ((), Secrets())
_PINNED: Secrets | None = None  # pin_environment's: the environment's secrets, read once


def pin_environment() -> None:
    """Read the environment's secrets once, for the rest of this process, instead of at each mask: for
    a worker process that masks a year of turns and changes no variable (``telemetry.export.log_slices``);
    reading the environment was 40% of such a pass."""
    global _PINNED
    _PINNED = Secrets(environment_secrets())


def _environment() -> Secrets:
    """:func:`environment_secrets` as a :class:`Secrets`, made again only when the environment's secrets change."""
    global _ENV_CACHE
    values = environment_secrets()
    cached = _ENV_CACHE
    if values != cached[0]:
        cached = _ENV_CACHE = (values, Secrets(values))
    return cached[1]


# A header's value as a message quotes it: "Authorization: Bearer X", {'x-api-key': 'X'}, "api-key=X".
# The name and any scheme word are kept, so the text still says which header it was.
_HEADER_VALUE = re.compile(
    r"""(?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]key|\bx-goog-api-key)"""
    r"""(?P<sep>["']?[ \t]*[:=][ \t]*["']?)"""
    r"""(?P<scheme>(?:bearer|basic|token|digest)[ \t]+)?"""
    r"""(?P<value>[^\s"',;&<>(){}\[\]]+)""",
    re.IGNORECASE,
)
# A bearer token anywhere ("Bearer eyJhbGciOi..."): eight characters or more, with a digit in them, so
# prose ("Bearer tokens are ...", "Bearer authentication") keeps its words.
_BEARER = re.compile(
    r"\b(?P<scheme>bearer[ \t]+)(?=[A-Za-z0-9._~+/=-]*\d)(?P<value>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE
)


_HEADER_WORDS = ("authorization", "api-key", "api_key", "bearer")
_LONG = 4096  # a longer text with lines is searched line by line


def _mask_header_values(text: str) -> str:
    """``text`` with each quoted header's value and each bearer token masked. Substring searches first:
    most texts quote no header, and a 5 MB paste runs the expressions only on the lines that name one."""
    lowered = text.lower()
    if not any(w in lowered for w in _HEADER_WORDS):
        return text
    if len(text) > _LONG and "\n" in text:
        return "".join(_mask_header_values(line) for line in text.splitlines(True))
    if "authorization" in lowered or "api-key" in lowered or "api_key" in lowered:
        text = _HEADER_VALUE.sub(_mask_value, text)
    if "bearer" in lowered:
        text = _BEARER.sub(_mask_value, text)
    return text


def _mask_value(m: re.Match[str]) -> str:
    value = m.group("value")
    if value == MASK:
        return m.group(0)
    return m.group(0)[: m.start("value") - m.start(0)] + MASK + m.group(0)[m.end("value") - m.start(0) :]


def mask(text: str) -> str:
    """``text`` as it may leave ttft (stderr, the screen, a log, an export, a span, a crash report):
    every secret the module doc lists replaced by ``***``, every other word kept. Idempotent."""
    if not text:
        return text
    text = KNOWN.mask(text)
    text = (_PINNED if _PINNED is not None else _environment()).mask(text)
    return redact_urls_in(_mask_header_values(text))


def mask_optional(text: str | None) -> str | None:
    """:func:`mask` of a text that may be absent."""
    return mask(text) if text else text


def masked(e: ev.Failed) -> ev.Failed:
    """The event with its message and hint masked (the same object when nothing in them is secret)."""
    message, hint = mask(e.message), mask_optional(e.hint)
    return e if (message, hint) == (e.message, e.hint) else replace(e, message=message, hint=hint)


def masked_value(value: Any) -> Any:
    """Every string in ``value`` (a dict's values, a list's items, nested) masked; anything else as it is."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {k: masked_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(masked_value(v) for v in value)
    return value


# The texts of a record that ttft writes in its own words or quotes a server or an exception in: its
# error, its notices, its diagnosis. The prompt and the answer are the conversation, kept as they are.
_RECORD_TEXTS = ("error", "notices", "diagnosis")


def masked_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A record's dict (as logged, exported or printed with ``--json``) with its error, notices and
    diagnosis masked; the same dict when nothing in them is secret."""
    changed = {k: masked_value(rec[k]) for k in _RECORD_TEXTS if rec.get(k)}
    changed = {k: v for k, v in changed.items() if v != rec[k]}
    return {**rec, **changed} if changed else rec


# A header named like a credential holds one whatever its value; any other (X-Title = "ttft", which
# OpenRouter asks for) holds a secret only when its value is long enough not to be a word of prose.
_CREDENTIAL_HEADER = re.compile(r"auth|key|token|secret|passw|cookie|session|signature|credential", re.IGNORECASE)


def header_secrets(headers: Mapping[str, str]) -> tuple[str, ...]:
    """What to mask of configured headers: each value, and its last word (the token of ``Bearer
    TOKEN``), since a server may echo either. Every header named like a credential (``X-Api-Key``,
    ``Helicone-Auth``, ``api-key``), and the values of :data:`MIN_ANYWHERE` characters or more of any
    other: a header's name cannot always say it carries a secret, and a short plain value masked as a
    word of every message ("ttft") would hide what the message says."""
    out: list[str] = []
    for name, value in headers.items():
        words = value.split()
        found = [value, words[-1] if words else ""]
        if not _CREDENTIAL_HEADER.search(name):
            found = [v for v in found if len(v.strip()) >= MIN_ANYWHERE]
        out += found
    return tuple(dict.fromkeys(v for v in out if v))
