"""Reading what llama.cpp printed while loading a model: the KV cache it allocated, the layers it
offloaded, what its flash-attention auto chose and why, how often its graph hops between devices,
and the line that explains a failed load."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ...telemetry.errors import ErrorKind
from .models import LocalModelError

_KV_SIZE = re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers")
# llama.cpp's flash-attention auto (llama_context::resolve_fused_ops) builds a graph and checks that each
# layer's attention sits on that layer's device; it logs the verdict, and on a mismatch the reason first.
_FA_VERDICT = re.compile(r"Flash Attention (enabled|not supported, set to disabled)")
_FA_MISMATCH = re.compile(r"(layer \d+ is assigned to device \S+ but Flash Attention is assigned to device \S+)")
# "graph: nodes = 1000, splits = 2" or "graph (pp bs=512, tg bs=1): nodes = 1000 / 990, splits = 65 / 64"
_SPLITS = re.compile(r"graph[^:\n]*: nodes = [\d /]+, splits = (\d+)(?: / (\d+))?")


@dataclass
class LoadLog:
    """What llama.cpp printed while loading: allocated KV cache, layers offloaded, errors."""

    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def kv_cache_bytes(self) -> int | None:
        sizes = _KV_SIZE.findall(self.text)
        return round(sum(float(mib) for mib, _, _ in sizes) * 2**20) if sizes else None

    def kv_cache_parts(self) -> list[dict[str, int | float]]:
        return [{"mib": float(m), "cells": int(c), "layers": int(n)} for m, c, n in _KV_SIZE.findall(self.text)]

    def layers_offloaded(self) -> tuple[int, int] | None:
        m = re.search(r"offloaded (\d+)/(\d+) layers to GPU", self.text)
        return (int(m.group(1)), int(m.group(2))) if m else None

    def flash_attn_auto(self) -> bool | None:
        """What llama.cpp's flash-attention auto chose (True: enabled), None when it did not decide (not asked)."""
        verdicts = _FA_VERDICT.findall(self.text)
        return verdicts[-1] == "enabled" if verdicts else None

    def flash_attn_mismatch(self) -> str | None:
        """Why the auto turned flash attention off: the layer whose attention would have run elsewhere."""
        m = _FA_MISMATCH.search(self.text)
        return m.group(1) if m else None

    def graph_splits(self) -> tuple[int, int] | None:
        """(prefill, one-token) graph splits: how many pieces the scheduler cut each graph into between
        devices. With every layer on one GPU it is a handful; one or more per layer means some op of every
        layer ran on another device (the CPU), with a copy each way."""
        found = _SPLITS.findall(self.text)
        if not found:
            return None
        pp, tg = found[-1]
        return int(pp), int(tg or pp)


def load_error(path: Path, exc: Exception, log: str, n_gpu_layers: int) -> LocalModelError:
    """The user's error for a failed load: out of memory, or the log's first error line."""
    low = log.lower()
    if "out of memory" in low or "failed to allocate" in low or "unable to allocate" in low:
        return LocalModelError(
            ErrorKind.MODEL_TOO_LARGE,
            f"not enough memory to load {path.name}: {exc}",
            "use a smaller quantization or n_ctx, or fewer GPU layers (settings extra n_gpu_layers)"
            if n_gpu_layers
            else "use a smaller quantization or n_ctx",
        )
    detail = next((ln.strip() for ln in log.splitlines() if "error" in ln.lower() or "failed" in ln.lower()), "")
    return LocalModelError(
        ErrorKind.MODEL_LOAD_FAILED,
        f"llama.cpp could not load {path}: {detail or exc}",
        "the file may be truncated or from a newer llama.cpp: download it again or upgrade llama-cpp-python",
    )
