"""Each server's own account of a turn, normalised into one typed shape.

A record's ``server`` object keeps what each server reported under its own names (so nothing
is lost and old logs stay readable): llama-server's ``timings`` (ms), Ollama's final chunk
(durations in ns), the in-process llama.cpp engine's figures. ``server_timings`` reads them
into ``ServerTimings``: prefill and decode (tokens, ms, tokens/s), prompt tokens reused from
the cache, model load, KV cache use. Front ends draw these fields and know no server's names.
Each known server is one row of ``FORMATS`` (the keys that mark its format, and where each field is
found), read by one reader. A source of no known format comes back with its scalar fields as text
(``other``). Every text field (names included) comes from a server or an old log, so its control
characters are replaced and its length bounded here, once, for whichever front end draws it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .gauges import GAUGES_SOURCE

NS_PER_MS = 1_000_000
OTHER_SHOWN = 8  # fields of an unknown source that are shown
MAX_TEXT = 80  # characters of one server-given name or value that are shown


def _text(v: object) -> str:
    """Server-given text as a front end may draw it: no control character (an escape sequence
    would reach the terminal), at most MAX_TEXT characters."""
    s = str(v)[:MAX_TEXT]
    return s if s.isprintable() else "".join(ch if ch.isprintable() else "\ufffd" for ch in s)


@dataclass(frozen=True, slots=True)
class ServerTimings:
    source: str  # the key under ``server``: "llama-server", "ollama", "llama.cpp", ...
    label: str  # what a front end calls it: the source, or "engine" for the in-process one
    prefill_tokens: int | None = None
    prefill_ms: float | None = None
    prefill_tokens_per_s: float | None = None
    decode_tokens: int | None = None
    decode_ms: float | None = None
    decode_tokens_per_s: float | None = None
    cache_reused_tokens: int | None = None  # prompt tokens served from the KV cache, not prefilled
    load_ms: float | None = None
    kv_used_tokens: int | None = None
    kv_used_bytes: int | None = None
    n_ctx: int | None = None
    engine: str = ""  # the engine's compute backend and model name, when it said
    draft_refused: bool = False  # the engine turned speculative decoding off (batches not bit-identical)
    placement: str = ""  # the engine: where its layers ran, "CPU, 2 threads, flash attn on (auto)"
    other: tuple[tuple[str, str], ...] = ()  # an unknown format: its scalar fields as (name, text)

    @property
    def is_engine(self) -> bool:
        return self.label == "engine"


def _num(d: Mapping[str, Any], key: str) -> float | None:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _int(d: Mapping[str, Any], key: str) -> int | None:
    v = _num(d, key)
    return None if v is None else int(v)


def _ns_measured(d: Mapping[str, Any], key: str) -> float | None:
    """Nanoseconds as ms; 0 reads as not measured (Ollama says 0 for what it did not time)."""
    v = _num(d, key)
    return v / NS_PER_MS if v else None


Reader = Callable[[Mapping[str, Any], str], Any]


@dataclass(frozen=True, slots=True)
class _Format:
    """One server's way of reporting a turn: the keys that say a source is in it, and where each
    ServerTimings field is found there and how it is read."""

    markers: tuple[str, ...]  # any of these keys in a source's object says it is in this format
    fields: Mapping[str, tuple[str, Reader]]  # ServerTimings field -> (the server's key, its reader)
    label: str | None = None  # what a front end calls it; None: the source's own name
    extra: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None  # fields read otherwise

    def read(self, source: str, d: Mapping[str, Any]) -> ServerTimings:
        found = {name: reader(d, key) for name, (key, reader) in self.fields.items()}
        return ServerTimings(source, self.label or source, **found, **(self.extra(d) if self.extra else {}))


def placement(d: Mapping[str, Any]) -> str:
    """Where the in-process engine ran a turn, from its load facts: "CPU, 2 threads, flash attn on (auto)",
    "CUDA 31/31 layers, flash attn off (auto)"; "" when it did not say."""
    backend, threads = d.get("backend"), _int(d, "n_threads")
    off, n = _int(d, "layers_offloaded"), _int(d, "n_layers")
    if not isinstance(backend, str) or not backend:
        return ""
    cpu = f"{threads} thread{'s' if threads != 1 else ''}" if threads else ""
    if backend == "CPU" or not off:
        where = ", ".join(x for x in ("CPU", cpu) if x)
    else:
        where = f"{_text(backend)} {off}/{n} layers" if n else f"{_text(backend)} {off} layers"
        if n and off < n and cpu:
            where += f", the rest on CPU ({cpu})"
    fa, asked = d.get("flash_attn"), d.get("flash_attn_requested")
    if isinstance(fa, bool):
        where += f", flash attn {'on' if fa else 'off'}" + (" (auto)" if asked == "auto" else "")
    if d.get("layers_split") is True:
        where += ", part of every layer on CPU"
    return where


def load_import_ms(server: object) -> float | None:
    """The part of a turn's model load spent importing llama.cpp (a GPU build starts its runtime then)."""
    model = server.get("model") if isinstance(server, Mapping) else None
    return _num(model, "llama_import_ms") if isinstance(model, Mapping) else None


def _engine_extras(d: Mapping[str, Any]) -> dict[str, Any]:
    """What the in-process engine says beyond the figures: its backend and model, a refused draft, where it ran."""
    spec = d.get("speculative")
    backend, name = d.get("backend"), d.get("model_name")
    return {
        "engine": " · ".join(_text(x) for x in (backend, name) if x) if backend else "",
        "draft_refused": isinstance(spec, Mapping) and spec.get("verify_batch") == 1,
        "placement": placement(d),
    }


# The servers whose accounts are known, tried in this order.
FORMATS = (
    _Format(  # llama-server's ``timings`` (ms)
        ("prompt_ms", "predicted_ms"),
        {
            "prefill_tokens": ("prompt_n", _int),
            "prefill_ms": ("prompt_ms", _num),
            "prefill_tokens_per_s": ("prompt_per_second", _num),
            "decode_tokens": ("predicted_n", _int),
            "decode_ms": ("predicted_ms", _num),
            "decode_tokens_per_s": ("predicted_per_second", _num),
            "cache_reused_tokens": ("cache_n", _int),
        },
    ),
    _Format(  # Ollama's final chunk (ns)
        ("eval_duration", "prompt_eval_duration"),
        {
            "prefill_tokens": ("prompt_eval_count", _int),
            "prefill_ms": ("prompt_eval_duration", _ns_measured),
            "decode_tokens": ("eval_count", _int),
            "decode_ms": ("eval_duration", _ns_measured),
            "load_ms": ("load_duration", _ns_measured),
        },
    ),
    _Format(  # the in-process llama.cpp engine (ms)
        ("prompt_eval_ms", "decode_ms"),
        {
            "prefill_tokens": ("prompt_eval_tokens", _int),
            "prefill_ms": ("prompt_eval_ms", _num),
            "prefill_tokens_per_s": ("prefill_tokens_per_s", _num),
            "decode_tokens": ("decode_tokens", _int),
            "decode_ms": ("decode_ms", _num),
            "decode_tokens_per_s": ("decode_tokens_per_s", _num),
            "cache_reused_tokens": ("prompt_tokens_reused", _int),
            "kv_used_tokens": ("kv_used_tokens", _int),
            "kv_used_bytes": ("kv_used_bytes", _int),
            "n_ctx": ("n_ctx", _int),
        },
        label="engine",
        extra=_engine_extras,
    ),
)


def server_timings(server: object) -> list[ServerTimings]:
    """A record's ``server`` object (untrusted: any JSON, or None) as one entry per source."""
    if not isinstance(server, Mapping):
        return []
    out: list[ServerTimings] = []
    for source, data in server.items():
        if not isinstance(data, Mapping):
            continue
        name = _text(source)
        known = next((f for f in FORMATS if any(m in data for m in f.markers)), None)
        if known is not None:
            out.append(known.read(name, data))
        elif name not in ("model", GAUGES_SOURCE):  # the engine's load (in its entry), the server's gauges (no timings)
            shown = [(_text(k), _text(v)) for k, v in data.items() if not isinstance(v, dict | list)]
            if shown:
                out.append(ServerTimings(name, name, other=tuple(shown[:OTHER_SHOWN])))
    return out
