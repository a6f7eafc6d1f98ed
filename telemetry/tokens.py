"""Token estimates: for text when a server reports no usage (the record then says ``estimated``), and
for what one attachment adds to a turn's input, by its API's published rule (no API reports how many
of a turn's input tokens one part took):

- text (a file inlined as a fenced block): 4 characters a token, the rule used wherever ttft estimates;
- an image on Anthropic Messages: width x height / 750 after the API's own downscale (long edge at
  most 1568 px, at most about 1.2 megapixels);
- an image on OpenAI's APIs (Chat Completions, Responses, and compat servers that speak them):
  85 + 170 per 512-px tile after fitting in 2048 x 2048 and the short side to 768 px, the rule for
  ``detail: auto``/``high`` on the GPT-4o family (some models bill images otherwise);
- anything else: unknown (None).
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English BPE vocabularies

OPENAI_APIS = ("chat.completions", "responses")
# Anthropic Messages' downscale before it counts an image (its vision guide).
ANTHROPIC_LONG_EDGE_PX = 1568
ANTHROPIC_MAX_PIXELS = 784 * 1568  # the largest size its guide lists as not scaled (each ratio's is ~1.2 MP)
ANTHROPIC_PIXELS_PER_TOKEN = 750
# OpenAI's tile rule (detail auto/high): fit 2048 x 2048, short side 768, 512-px tiles.
OPENAI_FIT_PX = 2048
OPENAI_SHORT_SIDE_PX = 768
OPENAI_TILE_PX = 512
OPENAI_BASE_TOKENS = 85
OPENAI_TILE_TOKENS = 170


def tokens_for_chars(n_chars: int) -> int:
    return max(1, n_chars // CHARS_PER_TOKEN) if n_chars > 0 else 0


def estimate_tokens(text: str) -> int:
    """Tokens in one streamed chunk: servers send about one token a chunk, longer chunks carry more."""
    n = len(text)  # tokens_for_chars(len(text)), one call less: this runs on every chunk
    return max(1, n // CHARS_PER_TOKEN) if n > 0 else 0


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
