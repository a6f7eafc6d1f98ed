"""What part of a turn's prompt its attachments were: in input tokens, and in the prefill time the
server or engine reported for it.

The record-level figure the telemetry pane and ``ttft ask`` show for a turn with files: the files'
estimated tokens (``AttachmentInfo.est_tokens``, by each API's rule in ``telemetry.tokens``), capped at
the input the server counted; their share of that input; and, where the server or engine reported its
own prefill (``telemetry.server.timings``), the part of that time they account for: prefill grows
about linearly with the prompt, so the files' share of the prefilled tokens is their share of its time.
Prompt size is the first lever on TTFT, so this says how much of the wait a file bought.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..record import AttachmentInfo
from .timings import ServerTimings


@dataclass(frozen=True, slots=True)
class AttachmentCost:
    """What a turn's attachments added: tokens (estimated), their share of the input, their prefill."""

    count: int
    tokens: int | None  # the estimates' sum, at most the turn's input; None when no estimate is known
    input_tokens: int | None  # the turn's whole input (usage or estimate)
    share: float | None  # tokens / input_tokens
    prefill_ms: float | None  # the part of the reported prefill these tokens account for
    prefill_source: str | None  # who reported that prefill ("llama-server", "engine", ...)


def attachment_cost(
    attachments: Sequence[AttachmentInfo], input_tokens: int | None, timings: Sequence[ServerTimings] = ()
) -> AttachmentCost | None:
    """The figure for a turn's attachments; None for a turn without any.

    ``input_tokens``: the turn's input (``tokens.input``); ``timings``: what the server or engine said
    of the turn (``server_timings(record.server)``), whose prefill gives the time.
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
        for st in timings:
            if st.prefill_ms is not None and st.prefill_tokens:
                prefill_ms = st.prefill_ms * min(1.0, tokens / st.prefill_tokens)
                source = st.label
                break
    return AttachmentCost(len(attachments), tokens, input_tokens, share, prefill_ms, source)
