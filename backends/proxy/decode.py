"""The tap's copy of a compressed body: decoded as it arrives, while the client gets the bytes as sent.

The proxy never decompresses what it forwards (no byte of content is rewritten); the tap reads a
decoded copy. ``gzip`` and ``deflate`` (zlib or raw) are read with the standard library, ``br`` where
the ``brotli`` module is installed, ``zstd`` where ``zstandard`` is. Anything else, or a copy that
stops decoding (corrupt, or past :data:`MAX_DECODED_BYTES`, a decompression bomb), leaves the tap
blind for the rest of the body: the call is still forwarded whole, and its record says why it could not
be read.
"""

from __future__ import annotations

import importlib
import zlib
from typing import Any

MAX_DECODED_BYTES = 256 * 1024 * 1024
# Each read's output bound: a small compressed read cannot expand past this at once.
_STEP = 4 * 1024 * 1024


class _Zlib:
    def __init__(self, wbits: int) -> None:
        self._d = zlib.decompressobj(wbits)
        self._raw_fallback = wbits == zlib.MAX_WBITS  # deflate: zlib-wrapped, or raw as some servers send it
        self._first = True

    def feed(self, data: bytes) -> bytes:
        try:
            out = self._d.decompress(data, _STEP)
        except zlib.error:
            if self._raw_fallback and self._first:
                self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                self._raw_fallback = False
                return self.feed(data)
            raise
        self._first = False
        while self._d.unconsumed_tail:  # bounded steps, so the size check sees each one
            more = self._d.decompress(self._d.unconsumed_tail, _STEP)
            if not more:
                break
            out += more
            if len(out) > MAX_DECODED_BYTES:
                break
        return out


class _Module:
    """A decoder from an optional module (``brotli``'s Decompressor, ``zstandard``'s decompressobj)."""

    def __init__(self, obj: Any, method: str) -> None:
        self._feed = getattr(obj, method)

    def feed(self, data: bytes) -> bytes:
        return bytes(self._feed(data))


def _optional(encoding: str) -> _Module | None:
    try:
        if encoding == "br":
            return _Module(importlib.import_module("brotli").Decompressor(), "process")
        if encoding == "zstd":
            return _Module(importlib.import_module("zstandard").ZstdDecompressor().decompressobj(), "decompress")
    except ImportError:
        return None
    return None


class BodyDecoder:
    """Decodes one body's ``Content-Encoding`` (a list, applied in order) read by read."""

    def __init__(self, content_encoding: str | None) -> None:
        names = [e.strip().lower() for e in (content_encoding or "").split(",") if e.strip()]
        self.encoding = ", ".join(names)
        self.error: str | None = None  # why the copy could not be read (then feed gives b"")
        self.decoded = 0
        self._chain: list[Any] = []
        for name in reversed(names):  # the last applied is the first to undo
            if name == "identity":
                continue
            if name in ("gzip", "x-gzip"):
                self._chain.append(_Zlib(16 + zlib.MAX_WBITS))
            elif name == "deflate":
                self._chain.append(_Zlib(zlib.MAX_WBITS))
            elif (mod := _optional(name)) is not None:
                self._chain.append(mod)
            else:
                missing = {"br": "the brotli module", "zstd": "the zstandard module"}.get(name)
                self.error = f"the body's encoding {name[:32]!r} cannot be read" + (
                    f" ({missing} is not installed)" if missing else ""
                )
                self._chain = []
                break

    def feed(self, data: bytes) -> bytes:
        """The decoded bytes of one read (``b""`` once the copy could not be read)."""
        if self.error is not None:
            return b""
        try:
            for d in self._chain:
                data = d.feed(data)
        except Exception as exc:  # zlib.error, brotli.error, zstd's ZstdError: a copy that stops decoding
            self.error = f"the {self.encoding} body did not decode ({type(exc).__name__})"
            return b""
        self.decoded += len(data)
        if self.decoded > MAX_DECODED_BYTES:
            self.error = f"the {self.encoding} body decodes to more than {MAX_DECODED_BYTES >> 20} MiB; not read"
            return b""
        return data
