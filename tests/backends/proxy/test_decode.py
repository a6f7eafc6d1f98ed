"""The tap's decoded copy: every encoding the standard library reads, read by read, and what it cannot read said."""

from __future__ import annotations

import gzip
import zlib

from ttft.backends.proxy import decode
from ttft.backends.proxy.decode import BodyDecoder

TEXT = b"data: " + b"hello world " * 500 + b"\n\n"


def _by_reads(dec: BodyDecoder, packed: bytes, size: int = 7) -> bytes:
    return b"".join(dec.feed(packed[i : i + size]) for i in range(0, len(packed), size))


def test_gzip_deflate_and_raw_deflate_decode_read_by_read() -> None:
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw_deflate = raw.compress(TEXT) + raw.flush()
    for enc, packed in (("gzip", gzip.compress(TEXT)), ("deflate", zlib.compress(TEXT)), ("deflate", raw_deflate)):
        dec = BodyDecoder(enc)
        assert _by_reads(dec, packed) == TEXT and dec.error is None, enc
    assert BodyDecoder(None).feed(b"plain") == b"plain" and BodyDecoder("identity").feed(b"x") == b"x"
    both = BodyDecoder("deflate, gzip")  # applied in order: gzip last, undone first
    assert _by_reads(both, gzip.compress(zlib.compress(TEXT))) == TEXT


def test_what_cannot_be_read_is_said_and_nothing_raises() -> None:
    unknown = BodyDecoder("x-magic")
    assert unknown.feed(b"abc") == b"" and unknown.error is not None and "x-magic" in unknown.error
    br = BodyDecoder("br")
    if br.error is not None:  # brotli not installed here: named as the reason
        assert "brotli" in br.error
    corrupt = BodyDecoder("gzip")
    assert corrupt.feed(b"\x1f\x8b\x08\x00garbage-not-deflate") == b""
    assert corrupt.error is not None and "did not decode" in corrupt.error
    assert corrupt.feed(gzip.compress(TEXT)) == b""  # stays blind for the rest of the body


def test_a_decompression_bomb_is_cut_at_the_cap(monkeypatch: object) -> None:
    import pytest

    mp = pytest.MonkeyPatch()
    mp.setattr(decode, "MAX_DECODED_BYTES", 1 << 20)
    try:
        bomb = gzip.compress(b"\x00" * (8 << 20))  # 8 MiB of zeros in a few KB
        dec = BodyDecoder("gzip")
        out = _by_reads(dec, bomb, 4096)
        assert len(out) <= 2 << 20 and dec.error is not None and "MiB" in dec.error
    finally:
        mp.undo()
