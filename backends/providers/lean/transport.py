"""Which client carries a lean reader's stream: httpx2, aiohttp, or the asyncio Protocol + httptools transport.

The lean readers send through httpx2 unless told otherwise (:meth:`LeanHosted.use_aiohttp`). The
Protocol transport (:mod:`backends.transport.protocol`) keeps the same stamps, wire phases, errors and
retries at a fraction of httpx2's CPU per chunk (h11's parsing in Python was most of what the chat's
backend process spent on a stream), so the bench's load clients and the chat's backend process both use
it where they can. Neither of the lean clients speaks a proxy: a URL that the environment sends through
one is read over httpx2, as every other ttft command reaches that server.
"""

from __future__ import annotations

import importlib.util


def proto_available() -> bool:
    """Whether httptools (the Protocol transport's parser) is installed."""
    return importlib.util.find_spec("httptools") is not None


def default_transport() -> str:
    """The lean reader's load client: ``"proto"`` when httptools is installed, else ``"aiohttp"``."""
    return "proto" if proto_available() else "aiohttp"


def _stream_url(spec: str, base_url: str | None) -> str | None:
    """The address a lean reader streams ``spec`` from; None for a spec with no lean reader (the local
    engine) or one that does not resolve (whoever builds the backend says what is wrong with it)."""
    from ..registry import ProviderError, resolve
    from .chat import chat_url
    from .messages import messages_url
    from .responses import responses_url

    try:
        resolved = resolve(spec, base_url=base_url)
    except ProviderError:
        return None
    url = {"openai": chat_url, "compat": chat_url, "openai-responses": responses_url, "anthropic": messages_url}.get(
        resolved.kind
    )
    return None if url is None else url(resolved.base_url)


def through_proxy(spec: str, base_url: str | None) -> bool:
    """Whether a stream on ``spec`` (any hosted API: each has a lean reader) would go through a proxy set
    in the environment."""
    from ...transport.http import proxied

    url = _stream_url(spec, base_url)
    return url is not None and proxied(url)


def chat_transport(spec: str, base_url: str | None, lean: bool) -> str:
    """The client of one chat's stream: ``"proto"`` for a lean reader reached without a proxy when httptools
    is installed, else ``"httpx2"`` (the SDKs take no other client; ``"none"`` for the local engine)."""
    from ...transport.http import proxied

    url = _stream_url(spec, base_url)
    if url is None:
        return "none"
    if lean and proto_available() and not proxied(url):
        return "proto"
    return "httpx2"
