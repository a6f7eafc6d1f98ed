"""Base URLs: what goes to the server, and the only form that is ever stored or shown.

A ``--base-url`` may carry secrets: credentials in its user part
(``http://user:PASSWORD@host/v1``) and values in its query (``?api-key=...``, Azure's
``?api-version=...``). The request needs them; the log, ``--json``, exports and every
message get :func:`redact_url`'s form instead: the user part as ``***`` and each query
value as ``***`` (keys kept, so a reader still sees that a query was sent).

What a person types may hold such a URL too (``/compare compat:m@http://user:PASSWORD@host/v1``, a
pasted link with a token in its query): :func:`redact_urls_in` gives any text the same masking, for
every URL in it that carries credentials or a query, whatever its scheme.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

MASK = "***"
UNREADABLE = "(an unreadable URL)"


@functools.lru_cache(maxsize=256)  # every bench request's recorder masks the same base URL again
def redact_url(url: str | None) -> str | None:
    """``url`` with its credentials and query values masked and its fragment dropped; idempotent."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: any part of it may be the secret
        return UNREADABLE
    netloc = parts.netloc
    if "@" in netloc:  # the whole user part: a lone user name is often a token itself
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = "&".join(f"{quote(k, safe='')}={MASK}" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def split_query(url: str | None) -> tuple[str | None, dict[str, str]]:
    """``(url without query and fragment, query parameters)``.

    The SDKs append their path (``/chat/completions``) to the base URL as a string, so a
    query left in it ends up inside the path (``/v1?api-key=.../chat/completions``, a 404);
    its parameters go to the SDK as default query parameters instead.
    """
    if not url:
        return url, {}
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, {}  # the SDK reports it, through a scrubbed error
    if not parts.query and not parts.fragment:
        return url, {}
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), query


SHORT_USER = 8  # a URL's user name shorter than this, beside a password, is a name rather than a secret


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The parts of ``url`` that must not appear in any message: user, password, query values
    (raw and percent-decoded, as a server or an HTTP library may echo either)."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        user, colon, password = userinfo.partition(":")
        pieces = [userinfo, password]
        # A user beside a password is a name ("user", "admin"), masked in a URL but not as a word of every
        # message; alone, or long, it may be the credential itself (https://TOKEN@host).
        if not colon or len(unquote(user)) >= SHORT_USER:
            pieces.append(user)
        for piece in pieces:
            found += [piece, unquote(piece)]
    for raw in parts.query.split("&"):
        _, _, value = raw.partition("=")
        found += [value, unquote(value.replace("+", " "))]
    return tuple(dict.fromkeys(s for s in found if s and s != MASK))


def without_masked(url: str | None) -> str | None:
    """A stored (redacted) URL made fit to send again: the masked user part and the masked query
    parameters left out, since ``***`` is no credential. The server then says what it misses."""
    if not url or MASK not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    netloc = parts.netloc.rpartition("@")[2] if parts.netloc.startswith(f"{MASK}@") else parts.netloc
    kept = [p for p in parts.query.split("&") if p and p.partition("=")[2] != MASK]
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(kept), ""))


# A URL in free text: a scheme, "://", then what RFC 3986 lets a URL hold (never a space, a quote, <>).
_URL_IN_TEXT = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'`{}|\\^]+")
_TRAILING = ".,;:!?)]"  # a sentence's or a bracket's end after a URL: not part of it


def redact_urls_in(text: str) -> str:
    """``text`` with each URL in it that carries credentials or a query masked as :func:`redact_url`
    masks a base URL; other URLs, and everything around them, stay as written.

    Only the lines holding a ``://`` are searched: a 5 MB paste costs a substring search or two, not a
    regular expression tried at each of its letters."""
    if "://" not in text:
        return text
    return "".join(_URL_IN_TEXT.sub(_redact_one, line) if "://" in line else line for line in text.splitlines(True))


def _redact_one(m: re.Match[str]) -> str:
    url = m.group(0)
    if "@" not in url and "?" not in url and url.count(":") == 1:  # no user, no query, no port: as it is
        return url
    core = url.rstrip(_TRAILING)
    tail = url[len(core) :]
    try:
        parts = urlsplit(core)
    except ValueError:
        return UNREADABLE + tail
    if "@" not in parts.netloc and not _host_and_port(parts.netloc):
        # "http://user:PASSW", typed this far (a draft is saved as it is typed): a password, not a port
        parts = parts._replace(netloc=f"{MASK}@")
    elif "@" not in parts.netloc and not parts.query:
        return url
    return f"{redact_url(urlunsplit(parts))}{tail}"


def _host_and_port(netloc: str) -> bool:
    """Whether ``netloc`` (with no user part) reads as a host with a numeric port or none."""
    _, colon, port = netloc.rpartition("]")[2].partition(":")
    return not colon or port.isdigit() or not port
