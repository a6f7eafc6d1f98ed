"""The ``local`` provider: llama-cpp-python in-process, producing the same events as any backend.

The engine runs on one worker thread per backend (llama.cpp contexts are not
thread-safe, and the UI's event loop must never block on a decode). The worker
stamps each event with :func:`telemetry.events.now_ns` the moment the engine
produced it and hands it to the loop with ``call_soon_threadsafe``.

Generation is driven token by token (not through ``create_chat_completion``):
- token counts are exact (each delta says how many tokens it carries);
- cancel is a flag checked before every decode step (and inside a long prefill
  through llama.cpp's abort callback on CPU);
- the KV cache is kept across turns and the longest common prefix with the new
  prompt is reused (reported as ``prompt_tokens_reused``);
- speculative decoding (prompt lookup) is a per-turn setting: drafts are verified
  in one batch and a token is kept only if the model itself picks it at that
  position, so the output is the same as without it; only the batch's logits that
  are needed are computed.

The package, one idea a module:
- ``engine``: the backend, its worker thread and the loader;
- ``generation``: one turn's prefill and decode loop;
- ``speculative``: prompt-lookup settings, drafter and the batch-invariance check;
- ``template``: chat templates and stop strings;
- ``loadlog``: what llama.cpp's load log says;
- ``state``: what the worker keeps between turns;
- ``llama_adapter``: the only module that touches llama-cpp-python.
"""

from __future__ import annotations

from backends.local.engine import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    DEFAULT_N_CTX,
    GPU_BACKENDS,
    LocalLlamaBackend,
    create,
    detect_backend,
)
from backends.local.llama_adapter import available as llama_cpp_available
from backends.local.llama_adapter import gpu_offload_supported
from backends.local.speculative import SPEC_MIN_MATCH, SPEC_NUM_PRED, PromptLookup, SpecSettings
from backends.local.state import LoadedModel

__all__ = [
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_N_CTX",
    "GPU_BACKENDS",
    "SPEC_MIN_MATCH",
    "SPEC_NUM_PRED",
    "LoadedModel",
    "LocalLlamaBackend",
    "PromptLookup",
    "SpecSettings",
    "create",
    "detect_backend",
    "gpu_offload_supported",
    "llama_cpp_available",
]
