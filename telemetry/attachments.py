"""A turn's attachments as its record keeps them, and what they cost the turn in input and prefill.

The record lists each file as ``{name, bytes, media_type, est_tokens}``, never its contents.
``est_tokens`` is the input the file adds by its API's published rule, an estimate (no API says
how many of a turn's input tokens one part took):

- text (inlined as a fenced block): the project's 4-characters-a-token rule over the block;
- an image on Anthropic Messages: width x height / 750 after the API's own downscale (long edge
  at most 1568 px, at most about 1.15 megapixels);
- an image on OpenAI's APIs (Chat Completions, Responses, and compat servers that speak them):
  85 + 170 per 512-px tile after fitting in 2048 x 2048 and the short side to 768 px, the rule
  for ``detail: auto``/``high`` on the GPT-4o family (some models bill images otherwise);
- anything else: unknown (None).

:func:`attachment_cost` is the record-level figure the telemetry pane shows: the estimates'
sum, the share of the turn's input tokens it is, and, where the server or engine reported its
own prefill, the part of that prefill time it accounts for (prefill grows about linearly with
the prompt, so the share of the prefilled tokens is the share of its time). Prompt size is the
first lever on TTFT, so this says how much of the wait a file bought.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from telemetry.tokens import tokens_for_chars

OPENAI_APIS = ("chat.completions", "responses")

# Anthropic Messages' downscale before it counts an image (its vision guide).
ANTHROPIC_LONG_EDGE_PX = 1568
ANTHROPIC_MAX_PIXELS = 1_150_000
ANTHROPIC_PIXELS_PER_TOKEN = 750
# OpenAI's tile rule (detail auto/high): fit 2048 x 2048, short side 768, 512-px tiles.
OPENAI_FIT_PX = 2048
OPENAI_SHORT_SIDE_PX = 768
OPENAI_TILE_PX = 512
OPENAI_BASE_TOKENS = 85
OPENAI_TILE_TOKENS = 170


@dataclass(frozen=True, slots=True)
class AttachmentInfo:
    """One attached file as the record lists it: what it was, never what it held."""

    name: str  # the file's base name
    bytes: int  # its size on disk
    media_type: str  # "image/png", "text/plain", ...
    est_tokens: int | None = None  # the input it adds by its API's rule (see the module doc); None if unknown

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": self.bytes, "media_type": self.media_type, "est_tokens": self.est_tokens}


def fmt_size(n: int) -> str:
    """A file's size for people, in decimal units as vendors state their limits: 149 bytes, 3 KB, 1.2 MB."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    return f"{n / 1000:.0f} KB" if n >= 1000 else f"{n} bytes"


def text_tokens(chars: int) -> int:
    """The input a text attachment adds: its fenced block's characters by the project's rule."""
    return tokens_for_chars(chars)


def image_tokens(api: str, width: int, height: int) -> int | None:
    """The input an image of ``width`` x ``height`` px adds on ``api`` by that API's published rule; None
    where the rule is not known (a local engine takes no images)."""
    if width <= 0 or height <= 0:
        return None
    if api == "messages":
        scale = min(
            1.0, ANTHROPIC_LONG_EDGE_PX / max(width, height), math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height))
        )
        return max(1, math.ceil((width * scale) * (height * scale) / ANTHROPIC_PIXELS_PER_TOKEN))
    if api in OPENAI_APIS:
        fit = min(1.0, OPENAI_FIT_PX / max(width, height))
        w, h = width * fit, height * fit
        short = min(1.0, OPENAI_SHORT_SIDE_PX / min(w, h))
        w, h = w * short, h * short
        tiles = math.ceil(w / OPENAI_TILE_PX) * math.ceil(h / OPENAI_TILE_PX)
        return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * tiles
    return None


@dataclass(frozen=True, slots=True)
class AttachmentCost:
    """What a turn's attachments added: tokens (estimated), their share of the input, their prefill."""

    count: int
    tokens: int | None  # the estimates' sum, at most the turn's input; None when no estimate is known
    input_tokens: int | None  # the turn's whole input (usage or estimate)
    share: float | None  # tokens / input_tokens
    prefill_ms: float | None  # the part of the reported prefill these tokens account for
    prefill_source: str | None  # who reported that prefill ("llama-server", "llama.cpp", ...)


class PrefillReport(Protocol):
    """A server's or engine's own prefill figures (``telemetry.server.timings.ServerTimings`` is one)."""

    @property
    def label(self) -> str: ...
    @property
    def prefill_ms(self) -> float | None: ...
    @property
    def prefill_tokens(self) -> int | None: ...


def attachment_cost(
    attachments: Sequence[AttachmentInfo], input_tokens: int | None, reports: Sequence[PrefillReport] = ()
) -> AttachmentCost | None:
    """The record-level figure for a turn's attachments; None for a turn without any.

    ``input_tokens``: the turn's input (``tokens.input``); ``reports``: what the server or engine
    said of its prefill (``server_timings(record.server)``), which gives the time.
    """
    if not attachments:
        return None
    known = [a.est_tokens for a in attachments if a.est_tokens is not None]
    tokens = sum(known) if known else None
    if tokens is not None and input_tokens:
        tokens = min(tokens, input_tokens)  # an estimate above what the server counted would be a guess
    share = tokens / input_tokens if tokens is not None and input_tokens else None
    prefill_ms = source = None
    if tokens:
        for st in reports:
            if st.prefill_ms is not None and st.prefill_tokens:
                prefill_ms = st.prefill_ms * min(1.0, tokens / st.prefill_tokens)
                source = st.label
                break
    return AttachmentCost(len(attachments), tokens, input_tokens, share, prefill_ms, source)
