"""Speculative decoding, normalized: drafted and accepted tokens, acceptance rate, tokens per decode step.

Three sources report it under their own names (kept as they are in the record's ``server``):
- the local llama.cpp engine: ``server["llama.cpp"]["speculative"]`` (``drafted``,
  ``accepted``) and ``decode_steps``, and live, ``events.DraftProgress``;
- vLLM's per-request metrics (``--per-request-spec-decode-metrics``): ``metrics.speculative_decoding``
  (``num_draft_tokens``, ``num_accepted_draft_tokens``, ``num_spec_steps``), kept under
  ``server["vllm"]``. Its steps are its verification steps only (steps without a draft are not
  counted), so its ``tokens_per_step`` is its ``mean_acceptance_length``;
- llama-server: ``timings.draft_n`` and ``draft_n_accepted`` (present only when it drafted),
  with ``predicted_n``. It does not report its steps: each decode step yields one token
  plus the drafts it accepted, so the steps after the first token are
  ``predicted_n - 1 - draft_n_accepted``.

``tokens_per_step`` counts every decode step, plain ones too: it is what decides the speed
(a CPU verify batch of k costs more than one step, so it pays only when this is higher
than that cost ratio).
"""

from __future__ import annotations

from typing import Any


def draft_stats(drafted: int, accepted: int, steps: int, source: str = "llama.cpp") -> dict[str, Any] | None:
    """The normalized figures; None when nothing was drafted (speculation off, or never a match)."""
    if drafted <= 0:
        return None
    return {
        "source": source,
        "drafted": drafted,
        "accepted": accepted,
        "acceptance_rate": round(accepted / drafted, 4),
        "steps": steps,
        # each step keeps its token plus the drafts it accepted
        "tokens_per_step": round((steps + accepted) / steps, 3) if steps > 0 else None,
    }


def _int(v: object) -> int:
    """A count from a server's JSON (untrusted): an int >= 0, else 0."""
    return v if type(v) is int and v > 0 else 0


def speculative_summary(server: dict[str, Any] | None) -> dict[str, Any] | None:
    """From a record's ``server`` dict (either source); None when no drafting was reported."""
    if not server:
        return None
    engine = server.get("llama.cpp")
    if isinstance(engine, dict) and isinstance(engine.get("speculative"), dict):
        spec = engine["speculative"]
        return draft_stats(
            int(spec.get("drafted") or 0), int(spec.get("accepted") or 0), int(engine.get("decode_steps") or 0)
        )
    vllm = server.get("vllm")
    spec = vllm.get("speculative_decoding") if isinstance(vllm, dict) else None
    if isinstance(spec, dict) and _int(spec.get("num_draft_tokens")):
        return draft_stats(
            _int(spec.get("num_draft_tokens")),
            _int(spec.get("num_accepted_draft_tokens")),
            _int(spec.get("num_spec_steps")),
            "vllm",
        )
    timings = server.get("llama-server")
    if isinstance(timings, dict) and timings.get("draft_n"):
        accepted = int(timings.get("draft_n_accepted") or 0)
        predicted = timings.get("predicted_n")
        steps = int(predicted) - 1 - accepted if isinstance(predicted, int | float) else 0
        return draft_stats(int(timings["draft_n"]), accepted, max(steps, 0), "llama-server")
    return None
