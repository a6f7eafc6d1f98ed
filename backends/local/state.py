"""What the engine's worker thread keeps between turns: the loaded model, what its KV cache holds, and
what the speculative batch check found; plus the exception that unwinds a cancelled turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...telemetry.errors import TtftError
from .amx import ExtraBufts
from .llama_adapter import LlamaHandle
from .models import KVShape
from .template import ChatTemplate


@dataclass(frozen=True, slots=True)
class LoadRequest:
    """What a load was asked for, before anything is resolved against the build (None: the engine's
    default). A turn whose settings ask for another loads the model again, as that turn's load phase."""

    n_gpu_layers: int | None = None  # -1: every layer
    n_threads: int | None = None
    flash_attn: str = "auto"  # "auto" (llama.cpp decides), "on", "off"
    extra_bufts: bool | None = None


@dataclass
class LoadedModel:
    llm: LlamaHandle
    path: Path
    info: dict[str, Any]
    template: ChatTemplate
    kv: KVShape | None
    n_gpu_layers: int
    bufts: ExtraBufts
    request: LoadRequest = field(default_factory=LoadRequest)
    kv_tokens: list[int] = field(default_factory=list)  # what the KV cache holds, position by position
    verify_batch_max: int = 1  # largest speculative verify batch checked bit-identical to one-token steps
    verify_checked: int = 1  # batch sizes up to this one have been checked
    verify_threads: int = 0  # ... with verify batches on this many threads (0: not checked yet)


class Cancelled(TtftError):
    """The turn was cancelled; raised on the worker thread, reported as a Cancelled event."""
