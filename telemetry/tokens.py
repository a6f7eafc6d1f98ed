"""Token estimates for when a server reports no usage (the record then says ``estimated``)."""

from __future__ import annotations

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English BPE vocabularies


def tokens_for_chars(n_chars: int) -> int:
    return max(1, n_chars // CHARS_PER_TOKEN) if n_chars > 0 else 0


def estimate_tokens(text: str) -> int:
    """Tokens in one streamed chunk: servers send about one token a chunk, longer chunks carry more."""
    n = len(text)  # tokens_for_chars(len(text)), one call less: this runs on every chunk
    return max(1, n // CHARS_PER_TOKEN) if n > 0 else 0
