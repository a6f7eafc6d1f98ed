"""Where a proxied request goes and what of it goes along: the upstream URL, the headers, the peer, the API.

- Routing: with no upstream, ``/v1/messages`` (``?beta=true`` and ``/v1/messages/count_tokens`` included)
  goes to Anthropic's API and ``/v1/chat/completions`` and ``/v1/responses`` to OpenAI's; any other path
  to Anthropic when the request carries ``x-api-key`` or ``anthropic-version`` (Anthropic's SDK sends
  both), else to OpenAI. With an upstream, every path goes to it, joined to its own path prefix.
- Headers: the hop-by-hop ones (RFC 9110 7.6.1: ``Connection`` and those it names, ``Keep-Alive``,
  ``Transfer-Encoding``, ``TE``, ``Upgrade``, ``Proxy-*``) stay on their hop; ``Host`` becomes the
  upstream's, ``Content-Length`` is the body's (unchanged, so the same). Everything else, keys included,
  goes as it came: the proxy adds no key and keeps none.
- Peers: only loopback, unless the user said otherwise.
- The API: which of the three wire formats a path speaks, and whether it is a model call or a token count.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Iterable, Mapping

ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com"

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "trailer", "proxy-connection", "host"}
)
# Headers aiohttp sets itself from what it sends: the body's length, never a second one.
_OWN = frozenset({"content-length"})


def target_url(path_qs: str, headers: Mapping[str, str], upstream: str | None) -> str:
    """The upstream URL for the request line's path and query (``path_qs``, as the client sent it)."""
    if upstream:
        base = urllib.parse.urlsplit(upstream)
        prefix = base.path.rstrip("/")
        host = base.netloc.rpartition("@")[
            2
        ]  # credentials in --upstream are never sent: the app's headers carry its key
        return urllib.parse.urlunsplit((base.scheme, host, "", "", "")) + prefix + path_qs
    path = path_qs.split("?", 1)[0]
    if path.startswith("/v1/messages"):
        return ANTHROPIC_URL + path_qs
    if path.startswith(("/v1/chat/completions", "/v1/responses")):
        return OPENAI_URL + path_qs
    lower = {k.lower() for k in headers}
    return (ANTHROPIC_URL if {"x-api-key", "anthropic-version"} & lower else OPENAI_URL) + path_qs


def forward_headers(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers that go on to the next hop, in order, repeated ones kept (see the module doc)."""
    pairs = list(items)
    named = set()
    for k, v in pairs:
        if k.lower() == "connection":
            named |= {n.strip().lower() for n in v.split(",")}
    return [
        (k, v)
        for k, v in pairs
        if (lk := k.lower()) not in HOP_BY_HOP and lk not in named and lk not in _OWN and not lk.startswith("proxy-")
    ]


def loopback(peer: str | None) -> bool:
    """Whether a peer address is on loopback (an IPv4-mapped IPv6 one included); a Unix socket (no address) is."""
    if not peer:
        return True
    try:
        addr = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
    return (mapped or addr).is_loopback


def bind_is_loopback(host: str) -> bool:
    """Whether a listen address is a loopback one (``localhost`` counts)."""
    return host == "localhost" or (loopback(host) and host != "")


# (path suffix, API, whether it is a model step): a token count is a call, but the model generates nothing.
_CALLS = (
    ("/messages/count_tokens", "messages", False),
    ("/messages", "messages", True),
    ("/chat/completions", "chat.completions", True),
    ("/responses", "responses", True),
)


def call_api(method: str, path: str) -> tuple[str, bool] | None:
    """``(api, is_model_step)`` when a request is an LLM call whose answer the proxy reads, else None
    (passed through with no record: model lists, ``GET /``, ``HEAD``, a Responses ``GET`` by id)."""
    if method != "POST":
        return None
    p = path.rstrip("/")
    for suffix, api, step in _CALLS:
        if p.endswith(suffix):
            return api, step
    return None


_PRODUCT = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:/[A-Za-z0-9!#$%&'*+.^_`|~-]+)?")
MAX_CLIENT_CHARS = 64


def client_name(user_agent: str | None) -> str:
    """The User-Agent's first product (``claude-cli/2.0.14``, ``OpenAI/Python 1.99``'s ``OpenAI/Python``):
    token characters only, so nothing from the header reaches a terminal unneutralised; "" when none."""
    if not user_agent:
        return ""
    m = _PRODUCT.match(user_agent.strip()[: MAX_CLIENT_CHARS * 4])
    return m.group(0)[:MAX_CLIENT_CHARS] if m else ""
