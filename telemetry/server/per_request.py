"""vLLM's per-request metrics: its ``metrics`` object read from untrusted JSON, field by field.

With ``--enable-per-request-metrics`` vLLM puts a ``metrics`` object on the final usage chunk of a
Chat Completions stream, at the top of a non-streamed answer, and in the ``response`` of a
Responses ``response.completed``: its queue (``queue_time_ms``), its TTFT measured from scheduling
(``time_to_first_token_ms``), its decode (``generation_time_ms``, ``mean_itl_ms``,
``tokens_per_second``); with ``--enable-per-request-output-token-metrics`` an
``output_token_metrics`` block per category (``reasoning``, ``content``: ``token_count``,
``time_to_first_token_ms`` from the same scheduling origin, ``generation_time_ms``,
``mean_itl_ms``, ``tokens_per_second``) and ``unclassified_token_count``; with
``--per-request-spec-decode-metrics`` a ``speculative_decoding`` block.

:func:`read_metrics` keeps of such an object what it knows, as the server sent it (the record's
``server["vllm"]``), and says what it dropped: a field of the wrong type, a negative or non-finite
number, an unknown nested value. It never walks what it does not know, so an object nested
100,000 deep costs one look at its top. The join with the client's own figures is
:func:`telemetry.wire.server_report`'s (a root module reads the kept entry again: a log may hold anything).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..typed_read import RecordError, convert, kind_of

SOURCE = "vllm"  # the key of the kept object under a record's ``server``
TIMING = ("time_to_first_token_ms", "queue_time_ms", "generation_time_ms", "mean_itl_ms", "tokens_per_second")
CATEGORY = ("time_to_first_token_ms", "generation_time_ms", "mean_itl_ms", "tokens_per_second")
CATEGORIES = ("reasoning", "content")
SPEC_COUNTS = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens")
SPEC_RATES = ("mean_acceptance_length", "draft_acceptance_rate")
MAX_HISTOGRAM = 64  # buckets of an acceptance histogram kept (num_spec_tokens + 1: a handful in practice)
MAX_DROPPED_SHOWN = 6  # dropped fields named in the notice
NOTICE = "server_metrics"  # the record's ``notices`` key when part of the object was dropped


def _number(value: object, where: str, dropped: list[str]) -> float | None:
    """A finite number >= 0, or None (null stays None silently; anything else is dropped and named)."""
    if value is None:
        return None
    try:
        v: float = convert(float, value, where)
    except RecordError:
        dropped.append(f"{where} ({kind_of(value)})")
        return None
    if not math.isfinite(v) or v < 0:
        dropped.append(f"{where} ({'not finite' if not math.isfinite(v) else 'negative'})")
        return None
    return v


def _count(value: object, where: str, dropped: list[str]) -> int | None:
    """A count: an int >= 0, or None."""
    if value is None:
        return None
    if type(value) is not int or value < 0:
        dropped.append(f"{where} ({'negative' if type(value) is int else kind_of(value)})")
        return None
    return value


def _keep(out: dict[str, Any], src: Mapping[str, Any], name: str, value: float | None) -> None:
    """``out[name] = value`` when it was read, or when the server sent null (it had no figure: kept as sent)."""
    if value is not None or (name in src and src[name] is None):
        out[name] = value


def _block(obj: object, where: str, dropped: list[str]) -> Mapping[str, Any] | None:
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        dropped.append(f"{where} ({kind_of(obj)})")
        return None
    return obj


def read_metrics(obj: object) -> tuple[dict[str, Any] | None, list[str]]:
    """The parts of a ``metrics`` object ttft knows, as sent (numbers checked), and what was dropped.

    None when nothing usable is left (a null, a list, a string, an object of no known field)."""
    dropped: list[str] = []
    top = _block(obj, "metrics", dropped)
    if top is None:
        return None, dropped
    out: dict[str, Any] = {}
    for name in TIMING:
        _keep(out, top, name, _number(top.get(name), f"metrics.{name}", dropped))
    otm = _block(top.get("output_token_metrics"), "metrics.output_token_metrics", dropped)
    if otm is not None:
        kept: dict[str, Any] = {}
        for cat in CATEGORIES:
            where = f"metrics.output_token_metrics.{cat}"
            block = _block(otm.get(cat), where, dropped)
            if block is None:
                continue
            part: dict[str, Any] = {}
            _keep(part, block, "token_count", _count(block.get("token_count"), f"{where}.token_count", dropped))
            for name in CATEGORY:
                _keep(part, block, name, _number(block.get(name), f"{where}.{name}", dropped))
            if part:
                kept[cat] = part
        name = "unclassified_token_count"
        _keep(kept, otm, name, _count(otm.get(name), f"metrics.output_token_metrics.{name}", dropped))
        if kept:
            out["output_token_metrics"] = kept
    spec = _block(top.get("speculative_decoding"), "metrics.speculative_decoding", dropped)
    if spec is not None:
        sd: dict[str, Any] = {}
        for name in SPEC_COUNTS:
            _keep(sd, spec, name, _count(spec.get(name), f"metrics.speculative_decoding.{name}", dropped))
        for name in SPEC_RATES:
            _keep(sd, spec, name, _number(spec.get(name), f"metrics.speculative_decoding.{name}", dropped))
        hist = spec.get("acceptance_histogram")
        if hist is not None:
            if isinstance(hist, list) and len(hist) <= MAX_HISTOGRAM and all(type(x) is int and x >= 0 for x in hist):
                sd["acceptance_histogram"] = list(hist)
            else:
                dropped.append("metrics.speculative_decoding.acceptance_histogram (not a short list of counts)")
        if sd:
            out["speculative_decoding"] = sd
    known = {*TIMING, "output_token_metrics", "speculative_decoding"}
    unknown = [str(k)[:40] for k in top if k not in known]
    if unknown and not out:
        dropped.append(f"metrics (no known field; {len(unknown)} other)")
    if not any(v is not None for v in out.values()) and not any(isinstance(v, dict) for v in out.values()):
        out = {}  # nulls alone: the server had no figure for this request
    return (out or None), dropped


def notice_text(dropped: list[str]) -> str:
    """The record's notice for what :func:`read_metrics` dropped (bounded, printable)."""
    shown = ", ".join(dropped[:MAX_DROPPED_SHOWN])
    more = f" and {len(dropped) - MAX_DROPPED_SHOWN} more" if len(dropped) > MAX_DROPPED_SHOWN else ""
    text = f"the server's per-request metrics were partly unreadable and left out: {shown}{more}"
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in text)
