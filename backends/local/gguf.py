"""Read a GGUF file's key/value header without llama.cpp: what ``ttft models -m local`` lists.

Only the metadata is read (architecture, name, chat template, sizes); arrays such as the
tokenizer's vocabulary are skipped over, never decoded. The file is untrusted: every length
is bounded by what is left of the file, and a header that does not parse raises
:class:`GGUFError` instead of reading past the end or allocating gigabytes.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from ...telemetry.errors import TtftError

MAGIC = b"GGUF"
MAX_STRING = 16 * 2**20  # a chat template is a few KiB; anything this long is a damaged file

# value type -> struct format for the fixed-size scalars (GGUF v2/v3, little-endian)
_SCALARS: dict[int, str] = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"
}  # fmt: skip
_STRING, _ARRAY = 8, 9

MetaValue = str | int | float | bool | None


class GGUFError(TtftError, ValueError):
    """The file is not a GGUF file this reader understands, or its header is damaged."""


class _Reader:
    """A cursor over the mapped file: no read call per string, so skipping a vocabulary is cheap."""

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf, self.pos, self.size = buf, 0, len(buf)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError("the header ends early (truncated file)")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GGUFError("a length in the header points past the end of the file")
        self.pos += n

    def unpack(self, fmt: str) -> int | float | bool:
        n = struct.calcsize(fmt)
        if self.pos + n > self.size:
            raise GGUFError("the header ends early (truncated file)")
        v: int | float | bool = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += n
        return v

    def string(self, keep: bool = True) -> str | None:
        n = int(self.unpack("<Q"))
        if n > MAX_STRING or self.pos + n > self.size:
            raise GGUFError(f"a string of {n} bytes in the header is longer than the file allows")
        if not keep:
            self.skip(n)
            return None
        return self.take(n).decode("utf-8", "replace")

    def value(self, kind: int) -> MetaValue:
        """One value; an array is skipped and reported as None (its length is what is usually wanted)."""
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item = int(self.unpack("<I"))
            count = int(self.unpack("<Q"))
            if item in _SCALARS:
                self.skip(count * struct.calcsize(_SCALARS[item]))
            elif item == _STRING:
                if count > self.size:  # each string takes at least 8 bytes: a count like this is damage
                    raise GGUFError("an array in the header is longer than the file")
                for _ in range(count):
                    self.string(keep=False)
            else:
                raise GGUFError(f"unsupported array item type {item}")
            return None
        raise GGUFError(f"unknown value type {kind}")


def read_metadata(path: str | os.PathLike[str]) -> dict[str, MetaValue]:
    """The header's key/value pairs (arrays as None). Raises GGUFError or OSError."""
    with Path(path).open("rb") as f:
        if os.fstat(f.fileno()).st_size < 24:
            raise GGUFError("not a GGUF file (too short)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _parse(_Reader(buf))


def _parse(r: _Reader) -> dict[str, MetaValue]:
    if r.take(4) != MAGIC:
        raise GGUFError("not a GGUF file (bad magic)")
    version = int(r.unpack("<I"))
    if version not in (2, 3):
        raise GGUFError(f"GGUF version {version} is not supported here")
    r.unpack("<Q")  # tensor count
    n_kv = int(r.unpack("<Q"))
    if n_kv > r.size:
        raise GGUFError("the header claims more keys than the file has bytes")
    out: dict[str, MetaValue] = {}
    for _ in range(n_kv):
        key = r.string() or ""
        out[key] = r.value(int(r.unpack("<I")))
    return out
