"""Each server's own account of a turn, normalised into one typed shape.

A record's ``server`` object keeps what each server reported under its own names (so nothing
is lost and old logs stay readable): llama-server's ``timings`` (ms), Ollama's final chunk
(durations in ns), the in-process llama.cpp engine's figures. ``server_timings`` reads them
into ``ServerTimings``: prefill and decode (tokens, ms, tokens/s), prompt tokens reused from
the cache, model load, KV cache use. Front ends draw these fields and know no server's names.
A source of no known format comes back with its scalar fields as text (``other``). Every
text field (names included) comes from a server or an old log, so its control characters are
replaced and its length bounded here, once, for whichever front end draws it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from telemetry.server.gauges import GAUGES_SOURCE

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


def _ns_to_ms(d: Mapping[str, Any], key: str) -> float | None:
    v = _num(d, key)
    return None if v is None else v / NS_PER_MS


def _llama_server(source: str, d: Mapping[str, Any]) -> ServerTimings:
    return ServerTimings(
        source,
        source,
        prefill_tokens=_int(d, "prompt_n"),
        prefill_ms=_num(d, "prompt_ms"),
        prefill_tokens_per_s=_num(d, "prompt_per_second"),
        decode_tokens=_int(d, "predicted_n"),
        decode_ms=_num(d, "predicted_ms"),
        decode_tokens_per_s=_num(d, "predicted_per_second"),
        cache_reused_tokens=_int(d, "cache_n"),
    )


def _ollama(source: str, d: Mapping[str, Any]) -> ServerTimings:
    load = _ns_to_ms(d, "load_duration")
    return ServerTimings(
        source,
        source,
        prefill_tokens=_int(d, "prompt_eval_count"),
        prefill_ms=_ns_to_ms(d, "prompt_eval_duration") or None,  # 0: Ollama did not measure it
        decode_tokens=_int(d, "eval_count"),
        decode_ms=_ns_to_ms(d, "eval_duration") or None,
        load_ms=load or None,
    )


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


def _engine(source: str, d: Mapping[str, Any]) -> ServerTimings:
    spec = d.get("speculative")
    backend, name = d.get("backend"), d.get("model_name")
    return ServerTimings(
        source,
        "engine",
        prefill_tokens=_int(d, "prompt_eval_tokens"),
        prefill_ms=_num(d, "prompt_eval_ms"),
        prefill_tokens_per_s=_num(d, "prefill_tokens_per_s"),
        decode_tokens=_int(d, "decode_tokens"),
        decode_ms=_num(d, "decode_ms"),
        decode_tokens_per_s=_num(d, "decode_tokens_per_s"),
        cache_reused_tokens=_int(d, "prompt_tokens_reused"),
        kv_used_tokens=_int(d, "kv_used_tokens"),
        kv_used_bytes=_int(d, "kv_used_bytes"),
        n_ctx=_int(d, "n_ctx"),
        engine=" · ".join(_text(x) for x in (backend, name) if x) if backend else "",
        draft_refused=isinstance(spec, Mapping) and spec.get("verify_batch") == 1,
        placement=placement(d),
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
        if "prompt_ms" in data or "predicted_ms" in data:
            out.append(_llama_server(name, data))
        elif "eval_duration" in data or "prompt_eval_duration" in data:
            out.append(_ollama(name, data))
        elif "prompt_eval_ms" in data or "decode_ms" in data:
            out.append(_engine(name, data))
        elif name not in ("model", GAUGES_SOURCE):  # the engine's load (in its entry), the server's gauges (no timings)
            shown = [(_text(k), _text(v)) for k, v in data.items() if not isinstance(v, dict | list)]
            if shown:
                out.append(ServerTimings(name, name, other=tuple(shown[:OTHER_SHOWN])))
    return out
