"""Files sent with a prompt: each read and checked once, before anything is sent.

Two calls make the whole API, the same for ``ttft ask -a`` and the chat's ``/attach``:

- :func:`read_attachment` reads one path and returns an :class:`Attachment` (an image or a text
  file) or a :class:`Refused` that says why not in one sentence: no such file, a folder, not
  readable, too large (naming the limit), or a type ttft does not send;
- :func:`check_attachments` says whether a backend's API and model can take them (the local
  engine takes text only; each API has its own image limits), again as a :class:`Refused`.

What is sent: images (png, jpeg, gif, webp, told by their bytes, not their names) as each API's
own image part (:mod:`backends.providers.parts`); text (UTF-8, or UTF-16 with a byte-order mark)
inline, as a fenced block under the file's name (:meth:`Attachment.fenced`), before the prompt.
An attachment's contents never reach the turn's record: it lists name, size and media type
(``telemetry.record.AttachmentInfo``), and the dataclass's repr leaves the contents out too.
"""

from __future__ import annotations

import base64
import math
import mimetypes
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..telemetry.log.surrogates import scrub
from ..telemetry.record import AttachmentInfo
from ..telemetry.tokens import image_tokens, tokens_for_chars

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
TEXT_LIMIT_BYTES = 4 * 1_000_000  # about a million tokens, past any context (stdin takes 4 MiB)
MB = 1_000_000
# The largest image any API here takes (OpenAI's 20 MB per image); each API's own limit is checked
# by check_attachments, where the API is known.
IMAGE_LIMIT_BYTES = 20 * MB
# Per API: the largest image file, the largest side in pixels, and the request's total of image bytes.
OPENAI_IMAGE_BYTES = 20 * MB
OPENAI_REQUEST_BYTES = 50 * MB
ANTHROPIC_IMAGE_B64_BYTES = 5 * 1024 * 1024  # Anthropic counts the base64 text: 5 MiB of it is a 3.75 MiB file
ANTHROPIC_MAX_SIDE_PX = 8000
ANTHROPIC_REQUEST_BYTES = 32 * MB
# Hosted models known to take no images (by the start of their name): refused here, not by a 400 later.
TEXT_ONLY_MODELS = (
    "gpt-3.5",
    "gpt-4-0314",
    "gpt-4-0613",
    "gpt-4-32k",
    "o1-mini",
    "o1-preview",
    "o3-mini",
    "davinci",
    "babbage",
    "claude-2",
    "claude-instant",
)
SENDS = "png, jpeg, gif or webp images, and UTF-8 text"

_PNG = b"\x89PNG\r\n\x1a\n"
_IMAGE_EXTENSIONS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".webp": "webp"}
_TEXTLIKE = ("json", "xml", "javascript", "yaml", "toml", "x-sh", "x-python", "sql", "csv")


def fmt_size(n: int) -> str:
    """A file's size for people, in decimal units as vendors state their limits: 149 bytes, 3 KB, 1.2 MB."""
    if n >= MB:
        return f"{n / MB:.1f} MB"
    return f"{n / 1000:.0f} KB" if n >= 1000 else f"{n} bytes"


@dataclass(frozen=True, slots=True)
class Attachment:
    """One file ready to send: an image's bytes or a text file's text, with its name and type."""

    name: str  # the file's base name (what the model and the record see, never the folders above it)
    media_type: str  # "image/png", "text/plain", "text/markdown", ...
    size: int  # bytes on disk
    text: str | None = field(default=None, repr=False)  # a text file's contents
    data: bytes = field(default=b"", repr=False)  # an image's bytes
    width: int = 0  # an image's size in pixels
    height: int = 0

    @property
    def is_image(self) -> bool:
        return self.text is None

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        """``data:image/png;base64,...``: how OpenAI's APIs take an image inline."""
        return f"data:{self.media_type};base64,{self.base64()}"

    def fenced(self) -> str:
        """A text file as it goes inline: its name, then its text in a fenced block whose fence is
        longer than any run of backticks inside, so a fence in the file never closes it."""
        text = self.text or ""
        longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
        fence = "`" * max(3, longest + 1)
        end = "" if text.endswith("\n") else "\n"
        return f"{self.name}\n{fence}\n{text}{end}{fence}"

    def info(self, api: str) -> AttachmentInfo:
        """What the record lists for this file on ``api``: name, size, type and the input it adds."""
        tokens = image_tokens(api, self.width, self.height) if self.is_image else tokens_for_chars(len(self.fenced()))
        return AttachmentInfo(self.name, self.size, self.media_type, tokens)


@dataclass(frozen=True, slots=True)
class Refused:
    """A file that will not be sent, and why, in words fit to print (after ``ttft ask: ``)."""

    path: str  # as given
    reason: str

    @property
    def sentence(self) -> str:
        return f"{self.path}: {self.reason}"


def read_attachment(path: str | os.PathLike[str]) -> Attachment | Refused:
    """One file read and checked (see the module doc); never raises for what the disk holds."""
    shown = scrub(os.fspath(path))
    name = scrub(os.path.basename(os.fspath(path).rstrip("/"))) or shown
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Refused(shown, "no such file")
    except (PermissionError, OSError) as exc:
        return Refused(shown, f"cannot be read ({exc.strerror or exc})")
    if stat.S_ISDIR(st.st_mode):
        return Refused(shown, "is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        return Refused(shown, "is not a regular file (a device, a pipe or a socket)")
    try:
        with open(path, "rb") as f:
            head = f.read(16)
            kind = _image_kind(head)
            limit = IMAGE_LIMIT_BYTES if kind else TEXT_LIMIT_BYTES
            if st.st_size > limit:
                what = "an image" if kind else "a text file"
                return Refused(shown, f"is {fmt_size(st.st_size)}; the largest {what} ttft sends is {fmt_size(limit)}")
            data = head + f.read(limit + 1 - len(head))
    except (PermissionError, OSError) as exc:
        return Refused(shown, f"cannot be read ({exc.strerror or exc})")
    if len(data) > limit:  # it grew since stat()
        return Refused(shown, f"is larger than the {fmt_size(limit)} ttft sends")
    ext = os.path.splitext(name)[1].lower()
    if kind:
        size = _image_size(kind, data)
        if size is None:
            return Refused(shown, f"starts like a {kind} image but its header is damaged (no image size in it)")
        return Attachment(name, f"image/{kind}", len(data), data=data, width=size[0], height=size[1])
    if ext in _IMAGE_EXTENSIONS:
        return Refused(shown, f"is named {ext} but its bytes are not a png, jpeg, gif or webp image")
    if data.startswith(b"%PDF-"):
        return Refused(shown, f"is a PDF; ttft sends {SENDS} (convert it to text first, e.g. pdftotext)")
    text = _text(data)
    if text is None:
        return Refused(shown, f"is of a type ttft does not send (not {SENDS})")
    return Attachment(name, _text_type(name), len(data), text=text)


def _text(data: bytes) -> str | None:
    """The file's text: UTF-8 (a byte-order mark dropped), or UTF-16 with its mark; None for binary."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _text_type(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed and (guessed.startswith("text/") or guessed.endswith(_TEXTLIKE)):
        return guessed
    return "text/plain"


def _image_kind(head: bytes) -> str | None:
    if head.startswith(_PNG):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


def _image_size(kind: str, data: bytes) -> tuple[int, int] | None:
    """(width, height) from the image's header; None when the header does not hold them."""
    try:
        if kind == "png":
            if data[12:16] != b"IHDR":
                return None
            return _positive(int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))
        if kind == "gif":
            return _positive(int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little"))
        if kind == "webp":
            return _webp_size(data)
        return _jpeg_size(data)
    except IndexError:
        return None


def _positive(w: int, h: int) -> tuple[int, int] | None:
    return (w, h) if w > 0 and h > 0 else None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":  # extended: 24-bit width-1, height-1
        return _positive(int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1)
    if chunk == b"VP8L":  # lossless: 14 bits each after a signature byte
        bits = int.from_bytes(data[21:25], "little")
        return _positive((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8 ":  # lossy: after the 3-byte start code, 14 bits each
        if data[23:26] != b"\x9d\x01\x2a":
            return None
        return _positive(int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """The frame header's size: walk the segments to the first SOFn marker."""
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return _positive(int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big"))
        if length < 2:
            return None
        i += 2 + length
    return None


def check_attachments(attachments: Sequence[Attachment], *, api: str, model: str) -> Refused | None:
    """The first reason this API and model cannot take these files, or None when they can.

    Checked here, before the send, so a user reads one clear sentence rather than a server's 400
    after the wait: the local engine (``llama.cpp``) takes text only; a model known to take no
    images (:data:`TEXT_ONLY_MODELS`) is refused one; each API's image limits (file size, pixels,
    the request's total) are its own documented ones.
    """
    images = [a for a in attachments if a.is_image]
    if not images:
        return None
    first = images[0]
    if api == "llama.cpp":
        return Refused(first.name, "is an image, and the local engine takes text only (attach text files, or use -m"
                       " with a model that reads images)")  # fmt: skip
    lowered = model.lower().rpartition("/")[2]
    if lowered.startswith(TEXT_ONLY_MODELS):
        return Refused(first.name, f"is an image, and {model} takes text only")
    if api == "messages":
        for a in images:
            b64 = 4 * math.ceil(a.size / 3)
            if b64 > ANTHROPIC_IMAGE_B64_BYTES:
                return Refused(
                    a.name,
                    f"is {fmt_size(a.size)}; Anthropic takes images up to 5 MB once base64-encoded, which is a file of"
                    f" at most {fmt_size(ANTHROPIC_IMAGE_B64_BYTES * 3 // 4)}",
                )
            if max(a.width, a.height) > ANTHROPIC_MAX_SIDE_PX:
                return Refused(
                    a.name,
                    f"is {a.width} x {a.height} px; Anthropic takes images up to {ANTHROPIC_MAX_SIDE_PX} px a side",
                )
        total, limit = sum(4 * math.ceil(a.size / 3) for a in images), ANTHROPIC_REQUEST_BYTES
    else:
        for a in images:
            if a.size > OPENAI_IMAGE_BYTES:
                return Refused(
                    a.name, f"is {fmt_size(a.size)}; this API takes images up to {fmt_size(OPENAI_IMAGE_BYTES)}"
                )
        total, limit = sum(4 * math.ceil(a.size / 3) for a in images), OPENAI_REQUEST_BYTES
    if total > limit:
        return Refused(
            ", ".join(a.name for a in images),
            f"are {fmt_size(total)} together once base64-encoded; one request takes up to {fmt_size(limit)}",
        )
    return None
