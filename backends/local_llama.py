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
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import ctypes
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.amx import ExtraBufts, extra_bufts_choice
from backends.base import ChatRequest, Message
from backends.local_model import (
    DEFAULT_MODEL,
    KVShape,
    LocalModelError,
    ShippedModel,
    check_fits_in_memory,
    check_model_file,
    file_sha256,
    kv_shape,
    model_display_name,
    shipped_model,
)
from backends.think import ThinkSplitter
from telemetry import events as ev
from telemetry.kvcache import kv_cache_size

DEFAULT_N_CTX = 4096
DEFAULT_MAX_OUTPUT_TOKENS = 512  # when the turn sets no limit
# When the turn sets none: llama-cpp-python's chat default. A 135M model at 0.8 wanders off the question
# ("What is the capital of France?" got a refusal and a riddle); at 0.2 it answers "Paris".
DEFAULT_TEMPERATURE = 0.2
GEMMA_CHAT_FORMAT = "gemma"  # Gemma GGUFs without a template of their own
FALLBACK_CHAT_FORMAT = "chatml"
GPU_BACKENDS = ("CUDA", "Metal", "Vulkan", "ROCm", "HIP", "SYCL", "MUSA", "CANN", "OpenCL", "Kompute")
_LOG_LOCK = threading.Lock()  # llama.cpp's log callback is process-wide
_PARAMS_LOCK = threading.Lock()  # so is the patched default-params function of _model_params


def llama_cpp_available() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


def gpu_offload_supported() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def detect_backend(system_info: str, offloading: bool) -> str:
    """Which compute backend runs the layers: the GPU backend compiled in when layers are offloaded, else CPU."""
    if offloading:
        for name in GPU_BACKENDS:
            if re.search(rf"\b{name}\b", system_info, re.IGNORECASE):
                return name
        return "GPU"
    return "CPU"


@contextlib.contextmanager
def _model_params(**fields: Any) -> Iterator[None]:
    """Set fields of the ``llama_model_params`` that ``Llama()`` builds, for one load.

    llama-cpp-python's ``Llama`` takes no argument for some of llama.cpp's model
    parameters (``use_extra_bufts`` among them); it starts from
    ``llama_model_default_params()``, so this wraps that call for the duration of the
    load. Fields this build of llama.cpp does not have are skipped.
    """
    import llama_cpp.llama as llama_mod

    lib = llama_mod.llama_cpp  # the binding module that Llama() calls into
    original = lib.llama_model_default_params

    def patched() -> Any:
        params = original()
        for name, value in fields.items():
            if any(f[0] == name for f in type(params)._fields_):
                setattr(params, name, value)
        return params

    with _PARAMS_LOCK:
        lib.llama_model_default_params = patched
        try:
            yield
        finally:
            lib.llama_model_default_params = original


@dataclass
class _LoadLog:
    """What llama.cpp printed while loading: allocated KV cache, layers offloaded, errors."""

    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def kv_cache_bytes(self) -> int | None:
        sizes = re.findall(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers", self.text)
        return round(sum(float(mib) for mib, _, _ in sizes) * 2**20) if sizes else None

    def kv_cache_parts(self) -> list[dict[str, int | float]]:
        return [
            {"mib": float(m), "cells": int(c), "layers": int(n)}
            for m, c, n in re.findall(
                r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers", self.text
            )
        ]

    def layers_offloaded(self) -> tuple[int, int] | None:
        m = re.search(r"offloaded (\d+)/(\d+) layers to GPU", self.text)
        return (int(m.group(1)), int(m.group(2))) if m else None


@contextlib.contextmanager
def _capture_llama_log(verbose: bool):
    """Collect llama.cpp's log during a load (to read what it allocated), echoing it when verbose."""
    import sys

    import llama_cpp
    import llama_cpp._logger as llama_logger

    log = _LoadLog()

    @llama_cpp.llama_log_callback
    def _cb(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        s = text.decode("utf-8", "replace")
        log.lines.append(s)
        if verbose:
            print(s, end="", file=sys.stderr, flush=True)

    with _LOG_LOCK:
        llama_cpp.llama_log_set(_cb, ctypes.c_void_p(0))
        try:
            yield log
        finally:
            llama_cpp.llama_log_set(llama_logger.llama_log_callback, ctypes.c_void_p(0))


# --- prompt formatting ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FormattedPrompt:
    text: str
    add_bos: bool
    stop: tuple[str, ...]


class ChatTemplate:
    """Messages -> prompt: a named llama-cpp-python chat format, or the GGUF's own Jinja template."""

    def __init__(self, llm: Any, chat_format: str | None) -> None:
        from llama_cpp import llama_chat_format as lcf

        self.name = ""
        self._jinja = None
        self._fn: Callable[..., Any] | None = None
        md = llm.metadata
        if chat_format is None and md.get("tokenizer.chat_template"):
            eos, bos = llm.token_eos(), llm.token_bos()
            try:
                self._jinja = lcf.Jinja2ChatFormatter(
                    template=md["tokenizer.chat_template"],
                    eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                    bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
                    stop_token_ids=[eos],
                )
                self._jinja(messages=[{"role": "user", "content": "hi"}])  # fail here, not mid-turn
                self.name = "gguf-template"
            except Exception:  # an unrenderable template: fall back to a named format
                self._jinja = None
        if self._jinja is None:
            name = chat_format or _guess_format(md)
            fn = getattr(lcf, "format_" + name.replace("-", "_"), None)
            if fn is None:
                raise LocalModelError(
                    "bad_chat_format",
                    f"unknown chat format {name!r}",
                    "use a llama-cpp-python chat format name such as gemma, chatml, llama-3, mistral-instruct",
                )
            self._fn = fn
            self.name = name

    def format(self, messages: tuple[Message, ...]) -> FormattedPrompt:
        msgs = [{"role": m.role, "content": m.content} for m in messages]
        if self.name == "gemma":
            msgs = _fold_system_into_first_user(msgs)  # Gemma has no system role
        if self._jinja is not None:
            r = self._jinja(messages=msgs)
        else:
            assert self._fn is not None
            r = self._fn(messages=msgs)
        stop = () if r.stop is None else (r.stop,) if isinstance(r.stop, str) else tuple(r.stop)
        return FormattedPrompt(r.prompt, add_bos=not r.added_special, stop=stop)


def _guess_format(md: dict[str, str]) -> str:
    arch = md.get("general.architecture", "")
    return GEMMA_CHAT_FORMAT if arch.startswith("gemma") else FALLBACK_CHAT_FORMAT


def _fold_system_into_first_user(msgs: list[dict[str, str]]) -> list[dict[str, str]]:
    system = "\n\n".join(m["content"] for m in msgs if m["role"] == "system")
    rest = [dict(m) for m in msgs if m["role"] != "system"]
    if system:
        for m in rest:
            if m["role"] == "user":
                m["content"] = f"{system}\n\n{m['content']}"
                break
    return rest


class StopMatcher:
    """Stop strings in streamed text; a tail that could start a stop string is held back."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = tuple(s for s in stops if s)
        self._held = ""

    def feed(self, text: str) -> tuple[str, bool]:
        if not self.stops:
            return text, False
        buf = self._held + text
        hits = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if hits:
            self._held = ""
            return buf[: min(hits)], True
        keep = max((_prefix_overlap(buf, s) for s in self.stops), default=0)
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held


def _prefix_overlap(buf: str, s: str) -> int:
    for n in range(min(len(s) - 1, len(buf)), 0, -1):
        if buf.endswith(s[:n]):
            return n
    return 0


# --- the engine (worker thread only) ----------------------------------------------------------
@dataclass
class LoadedModel:
    llm: Any
    path: Path
    info: dict[str, Any]
    template: ChatTemplate
    kv: KVShape | None
    n_gpu_layers: int
    bufts: ExtraBufts
    kv_tokens: list[int] = field(default_factory=list)  # what the KV cache holds, position by position
    verify_batch_max: int = 1  # largest speculative verify batch checked bit-identical to one-token steps
    verify_checked: int = 1  # batch sizes up to this one have been checked
    verify_threads: int = 0  # ... with verify batches on this many threads (0: not checked yet)


class _Cancelled(Exception):
    pass


def _perf(llm: Any) -> dict[str, float]:
    import llama_cpp

    p = llama_cpp.llama_perf_context(llm.ctx)
    # llama.cpp reports max(1, n): a count whose time is 0 never ran.
    return {
        "t_p_eval_ms": p.t_p_eval_ms,
        "n_p_eval": p.n_p_eval if p.t_p_eval_ms > 0 else 0,
        "t_eval_ms": p.t_eval_ms,
        "n_eval": p.n_eval if p.t_eval_ms > 0 else 0,
    }


class LocalLlamaBackend:
    provider = "local"
    api = "llama.cpp"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | ShippedModel | None = None,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_gpu_layers: int | None = None,
        n_threads: int | None = None,
        chat_format: str | None = None,
        flash_attn: bool = True,
        seed: int = 0,
        verbose: bool = False,
        max_memory_bytes: int | None = None,
        extra_bufts: bool | None = None,
    ) -> None:
        self.is_default = model_path is None
        self.shipped: ShippedModel | None = (
            DEFAULT_MODEL if model_path is None else model_path if isinstance(model_path, ShippedModel) else None
        )
        if self.shipped is not None:
            # A shipped model's file may not exist yet (an assembled one, or a missing package):
            # that is the first turn's load failure, with a hint, not an error here.
            self.model_path = self.shipped.path() if self.shipped.installed() else Path(self.shipped.file)
            self.model = self.shipped.name
        else:
            assert not isinstance(model_path, ShippedModel) and model_path is not None
            self.model_path = Path(model_path).expanduser()
            self.model = self.model_path.stem
        self.extra_bufts = extra_bufts
        self.base_url: str | None = None
        self.n_ctx = n_ctx
        self.n_gpu_layers = n_gpu_layers
        self.n_threads = n_threads
        self.chat_format = chat_format if chat_format is not None or self.shipped is None else self.shipped.chat_format
        self.flash_attn = flash_attn
        self.seed = seed
        self.verbose = verbose
        self.max_memory_bytes = max_memory_bytes
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ttft-llama")
        self._loaded: LoadedModel | None = None
        self._closed = False
        self.last_timings: dict[str, Any] | None = None

    # --- public --------------------------------------------------------------------------
    @property
    def loaded(self) -> LoadedModel | None:
        return self._loaded

    async def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ev.Event] = asyncio.Queue()
        cancel = threading.Event()

        def emit(e: ev.Event) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
                loop.call_soon_threadsafe(queue.put_nowait, e)

        fut = loop.run_in_executor(self._executor, self._turn_guarded, request, emit, cancel)
        try:
            while True:
                e = await queue.get()
                yield e
                if isinstance(e, ev.TERMINAL):
                    return
        finally:
            cancel.set()
            await asyncio.wait({fut}, timeout=30)  # stops within a token; keeps turns from overlapping

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._unload)
        self._executor.shutdown(wait=False)

    async def load(self) -> dict[str, Any]:
        """Load now (outside any turn); returns the load info or raises LocalModelError."""
        loop = asyncio.get_running_loop()
        lm = await loop.run_in_executor(
            self._executor, self._ensure_loaded, self._wanted_layers(None), self._wanted_bufts(None), None
        )
        return lm.info

    # --- worker side ----------------------------------------------------------------------
    def _wanted_layers(self, extra: dict[str, Any] | None) -> int:
        v = (extra or {}).get("n_gpu_layers", self.n_gpu_layers)
        if v is None:
            return -1 if gpu_offload_supported() else 0
        return int(v)

    def _wanted_bufts(self, extra: dict[str, Any] | None) -> ExtraBufts:
        """The extra-buffer-type decision for a load: settings extra ``extra_bufts``, the backend option, or auto."""
        v = (extra or {}).get("extra_bufts", self.extra_bufts)
        info = ""  # without llama.cpp the load fails next, with its own message
        if llama_cpp_available():
            import llama_cpp

            info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
        return extra_bufts_choice(None if v is None else bool(v), info)

    def _unload(self) -> None:
        if self._loaded is not None:
            with contextlib.suppress(Exception):
                self._loaded.llm.close()
            self._loaded = None

    def close(self) -> None:
        """Synchronous release (for code without a running loop)."""
        if not self._closed:
            self._closed = True
            self._executor.submit(self._unload).result()
            self._executor.shutdown(wait=True)

    def _turn_guarded(self, request: ChatRequest, emit: Callable[[ev.Event], None], cancel: threading.Event) -> None:
        def emit_and_keep(e: ev.Event) -> None:
            if isinstance(e, ev.ServerTimings):
                self.last_timings = e.data  # what the engine did, even when nobody read the end of the stream
            emit(e)

        try:
            self._turn(request, emit_and_keep, cancel)
        except _Cancelled:
            emit(ev.Cancelled(ev.now_ns()))
        except LocalModelError as exc:
            emit(ev.Failed(ev.now_ns(), exc.error_type, exc.message, None, exc.hint))
        except Exception as exc:  # an engine failure is a failed turn, never a hung stream
            emit(ev.Failed(ev.now_ns(), type(exc).__name__, str(exc) or repr(exc), None, None))

    def _ensure_loaded(
        self, n_gpu_layers: int, bufts: ExtraBufts, emit: Callable[[ev.Event], None] | None
    ) -> LoadedModel:
        """Load (or reload with other GPU layers or buffer types); emits the load phase when ``emit`` is given."""
        lm = self._loaded
        if lm is not None and lm.n_gpu_layers == n_gpu_layers and lm.bufts.use == bufts.use:
            return lm
        if not llama_cpp_available():
            raise LocalModelError(
                "llama_cpp_missing",
                "the local provider needs llama-cpp-python",
                "pip install 'ttft[local]'  (CUDA: CMAKE_ARGS=\"-DGGML_CUDA=on\" pip install llama-cpp-python)",
            )
        self._unload()
        shipped = self.shipped
        if shipped is not None and not shipped.installed():
            raise shipped.missing()
        assembling = shipped is not None and shipped.needs_assembly()
        if emit is not None:
            what = f"loading {self.model_path.name}"
            if assembling:
                where = self.model_path.parent
                what = f"assembling {shipped.name} (first run, about 250 MB) into {where}, then loading"
            emit(ev.ModelLoadStarted(ev.now_ns(), what=what))
        t0 = time.perf_counter()
        if shipped is not None:
            self.model_path = shipped.materialise()
        file_bytes = check_model_file(self.model_path)
        on_gpu = n_gpu_layers != 0 and gpu_offload_supported()
        check_fits_in_memory(file_bytes, 0, on_gpu=on_gpu, available=self.max_memory_bytes)
        sha, sha_cached = file_sha256(self.model_path)
        lm = self._load_llama(n_gpu_layers, bufts, file_bytes)
        lm.info.update(
            model_sha256=sha,
            sha256_from_cache=sha_cached,
            assembled=assembling,
            load_ms=round((time.perf_counter() - t0) * 1000, 1),
        )
        self._loaded = lm
        return lm

    def _load_llama(self, n_gpu_layers: int, bufts: ExtraBufts, file_bytes: int) -> LoadedModel:
        import llama_cpp
        from llama_cpp import Llama

        kwargs: dict[str, Any] = {
            "n_ctx": self.n_ctx,
            "n_gpu_layers": n_gpu_layers,
            "flash_attn": self.flash_attn,
            "seed": self.seed,
            "verbose": self.verbose,
        }
        # Prefill uses as many threads as decode: llama-cpp-python's default of every logical CPU for
        # batches spins badly when cores are shared (measured 3-5x slower prefill on a busy 2-core box).
        threads = self.n_threads or max(1, (os.cpu_count() or 2) // 2)
        kwargs["n_threads"] = kwargs["n_threads_batch"] = threads
        with _capture_llama_log(self.verbose) as log, _model_params(use_extra_bufts=bufts.use):
            try:
                llm = Llama(str(self.model_path), **kwargs)
            except Exception as exc:
                raise _load_error(self.model_path, exc, log.text, n_gpu_layers) from exc
        _warm_up(llm)
        md = dict(llm.metadata)
        shape = kv_shape(md)
        offloading = n_gpu_layers != 0 and gpu_offload_supported()
        system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
        n_layer = llama_cpp.llama_model_n_layer(llm.model)
        off = log.layers_offloaded()
        layers_offloaded = off[0] if off else (n_layer if offloading and n_gpu_layers < 0 else 0)
        kv_full = (
            kv_cache_size(
                shape.layers,
                shape.kv_heads,
                shape.key_length,
                2.0,
                seq_len=llm.n_ctx(),
                value_head_dim=shape.value_length,
            )
            if shape
            else None
        )
        template = ChatTemplate(llm, self.chat_format)
        info: dict[str, Any] = {
            "model_path": str(self.model_path),
            "model_name": self.shipped.display if self.shipped else model_display_name(self.model_path, md),
            "model_file_bytes": file_bytes,
            "architecture": md.get("general.architecture"),
            "size_label": md.get("general.size_label"),
            "n_params": llama_cpp.llama_model_n_params(llm.model),
            "n_ctx": llm.n_ctx(),
            "n_ctx_train": llama_cpp.llama_model_n_ctx_train(llm.model),
            "n_threads": llm.context_params.n_threads,
            "n_threads_batch": llm.context_params.n_threads_batch,
            "backend": detect_backend(system_info, offloading),
            "gpu_offload_supported": gpu_offload_supported(),
            "n_gpu_layers": n_gpu_layers,
            "layers_offloaded": layers_offloaded,
            "n_layers": n_layer,
            "flash_attn": self.flash_attn,
            "chat_format": template.name,
            "kv_bytes_per_token": shape.bytes_per_token() if shape else None,
            "kv_size_full_ctx_bytes": kv_full.total_bytes if kv_full else None,
            "kv_llama_cpp_bytes": log.kv_cache_bytes(),
            "kv_llama_cpp_parts": log.kv_cache_parts(),
            "swa_full": bool(llm.context_params.swa_full),
            "extra_bufts": bufts.use,
            "extra_bufts_reason": bufts.reason,
            "llama_cpp_python": llama_cpp.__version__,
        }
        return LoadedModel(llm, self.model_path, info, template, shape, n_gpu_layers, bufts)

    def _turn(self, request: ChatRequest, emit: Callable[[ev.Event], None], cancel: threading.Event) -> None:
        s = request.settings
        if cancel.is_set():
            raise _Cancelled
        spec = _speculative(s.speculative)
        layers = self._wanted_layers(s.extra)
        bufts = self._wanted_bufts(s.extra)
        lm = self._loaded
        need_load = lm is None or lm.n_gpu_layers != layers or lm.bufts.use != bufts.use
        need_check = spec is not None and spec["verify_batch"] is None
        if need_check and lm is not None and lm.verify_threads != spec["verify_threads"]:
            lm.verify_batch_max = lm.verify_checked = 1  # checked with other threads: that says nothing here
        if need_load or (need_check and lm is not None and lm.verify_checked < spec["num_pred_tokens"] + 1):
            # Loading (and checking which verify batches are bit-identical) is its own phase, before the request.
            lm = self._ensure_loaded(layers, bufts, emit)
            if not need_load:
                emit(ev.ModelLoadStarted(ev.now_ns(), what="checking batch-invariance for speculative decoding"))
            if need_check:
                _check_verify_batch(lm, spec["num_pred_tokens"] + 1, cancel, spec["verify_threads"])
                lm.info["verify_batch_max"] = lm.verify_batch_max
            emit(ev.ModelLoadFinished(ev.now_ns(), info=dict(lm.info)))
        assert lm is not None
        if spec is not None and spec["verify_batch"] is None:
            spec["verify_batch"] = max(1, min(lm.verify_batch_max, spec["num_pred_tokens"] + 1))
        llm = lm.llm
        emit(ev.AttemptSent(ev.now_ns(), 1))
        if cancel.is_set():
            raise _Cancelled

        prompt = lm.template.format(request.messages)
        tokens = llm.tokenize(prompt.text.encode("utf-8"), add_bos=prompt.add_bos, special=True)
        n_ctx = llm.n_ctx()
        # A small base model may never end its turn on its own: cap an unset limit so the
        # default chat answers in seconds, not minutes of run-on text.
        default_max = min(DEFAULT_MAX_OUTPUT_TOKENS, n_ctx - len(tokens))
        max_new = s.max_output_tokens if s.max_output_tokens is not None else default_max
        if len(tokens) + max(max_new, 1) > n_ctx:
            raise LocalModelError(
                "context_overflow",
                f"prompt ({len(tokens)} tokens) + max output tokens ({max_new}) exceeds the context of {n_ctx} tokens",
                "shorten the conversation (/clear), lower max tokens, or load the model with a larger n_ctx",
            )
        gen = _Generation(lm, tokens, prompt, spec, s, emit, cancel)
        gen.run(max_new)


CHECK_TEXT = "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(add(i, i * 2))\n"
# The check runs over a short and a long cached prefix: llama.cpp's CPU kernels switch with the KV length
# too (on 2+ threads, flash attention splits a one-token step's KV across threads once the KV view, padded
# to 256 cells, reaches 512), and a batch computed one way while single steps go the other gives different
# logits. Measured on SmolLM2 135M with 2 threads: identical over a 20-token prefix, argmax changed over 500
# (1 thread: identical at any length). 280 cached tokens cross that line at the least prefill cost.
CHECK_PREFIXES = (4, 280)


def _check_verify_batch(lm: LoadedModel, up_to: int, cancel: threading.Event, verify_threads: int) -> None:
    """Largest verify batch whose logits are bit-identical to one-token decoding, checked on this build/model.

    Speculative decoding keeps a drafted token only if the model picks it at that
    position; that is lossless only if a batch computes the same logits as single
    steps. llama.cpp switches kernels with the batch size (weight repacking, flash
    attention tiles), the KV length and the thread count, so this is measured rather
    than assumed, once per model, over a short and a long context, with one-token steps
    and batches on the threads a speculative turn gives them (``_verify_threads``).
    """
    import numpy as np

    llm = lm.llm
    if up_to <= lm.verify_checked:
        return
    lm.verify_threads = verify_threads
    n_vocab = llm.n_vocab()
    span = max(4, up_to)  # tokens decoded after each prefix: one at a time, then in batches of each size
    prefixes = [p for p in CHECK_PREFIXES if p + span < llm.n_ctx()]
    base = llm.tokenize(CHECK_TEXT.encode(), add_bos=False, special=False)
    toks = llm.tokenize(b"", add_bos=True, special=False)
    while len(toks) < prefixes[-1] + span:
        toks += base

    def steps(prefix: int, b: int) -> list[Any]:
        """Logits of the span after ``prefix``, decoded in batches of ``b`` over the same cached prefix."""
        llm._ctx.kv_cache_seq_rm(-1, prefix, -1)
        rows = []
        for i in range(prefix, prefix + span, b):
            if cancel.is_set():
                raise _Cancelled
            chunk = toks[i : min(i + b, prefix + span)]
            llm._batch.set_batch(chunk, i, True)
            llm._ctx.decode(llm._batch)
            rows += [
                np.ctypeslib.as_array(llm._ctx.get_logits_ith(j), shape=(n_vocab,)).copy() for j in range(len(chunk))
            ]
        return rows

    sizes = list(range(max(2, lm.verify_checked + 1), up_to + 1))
    same = dict.fromkeys(sizes, True)
    lm.kv_tokens = []  # the check overwrites the cache
    try:
        llm._ctx.kv_cache_clear()
        done = 0
        for prefix in prefixes:
            _verify_threads(lm, None)  # the prefix is prefilled as a prompt is, once, then reused
            for i in range(done, prefix, llm.n_batch):
                llm._batch.set_batch(toks[i : min(i + llm.n_batch, prefix)], i, False)
                llm._ctx.decode(llm._batch)
            done = prefix
            _verify_threads(lm, verify_threads)
            single = steps(prefix, 1)
            for b in sizes:
                if same[b]:
                    same[b] = all(np.array_equal(x, y) for x, y in zip(steps(prefix, b), single, strict=True))
            llm._ctx.kv_cache_seq_rm(-1, prefix, -1)
        for b in sizes:
            if lm.verify_batch_max < b - 1:
                break
            lm.verify_checked = b
            if not same[b]:
                lm.verify_checked = 1 << 30  # larger batches are not tried once one differs
                break
            lm.verify_batch_max = b
    finally:
        _verify_threads(lm, None)
        llm._ctx.kv_cache_clear()
        lm.kv_tokens = []


def _verify_threads(lm: LoadedModel, threads: int | None) -> None:
    """Verify batches on ``threads`` (None: back to the load's threads); one-token steps keep theirs.

    llama.cpp runs a one-token decode on ``n_threads`` and any larger batch on
    ``n_threads_batch``. A verify batch gains from a second core (measured on 2 shared
    cores: a batch of 3 in 1.4 one-token steps instead of 2.3, when that core is free),
    a one-token step hardly (22 ms instead of 25). Single steps must stay as a turn
    without speculation runs them; on more than one thread they take a split-KV flash
    attention path over a 512+ cell KV view that no batch takes, which the check finds
    (it then allows no verify batch at all).
    """
    import llama_cpp

    info = lm.info
    batch = info["n_threads_batch"] if threads is None else threads
    llama_cpp.llama_set_n_threads(lm.llm.ctx, info["n_threads"], batch)


def _warm_up(llm: Any) -> None:
    """One throwaway decode inside the load phase: pages the mmap'd weights in and builds the compute graphs,
    so none of that lands in the first turn's TTFT."""
    import llama_cpp

    bos = llm.token_bos()
    tok = bos if bos >= 0 else 0
    for batch in ([tok], [tok, tok]):  # both the one-token (decode) and the batch (prefill) graphs
        llm._batch.set_batch(batch, 0, False)
        llm._ctx.decode(llm._batch)
        llm._ctx.get_logits_ith(-1)  # synchronize
        llm._ctx.kv_cache_clear()
    llama_cpp.llama_perf_context_reset(llm.ctx)


# Replaying code-edit answers with measured batch costs (local_decode.py, section 4): drafts of 2-4 tokens
# are within a few % of each other, 6-8 lose (a CPU verify batch costs ~0.7 of a step per token); matches of
# 2 tokens draft more and keep fewer, 4 miss some.
SPEC_NUM_PRED = 4  # longest draft
SPEC_MIN_MATCH = 3  # shortest match of the context's tail worth a draft
PROGRESS_NS = 100_000_000  # DraftProgress at most every 100 ms


def _speculative(setting: dict[str, Any] | None) -> dict[str, Any] | None:
    if not setting:
        return None
    kind = setting.get("kind", "prompt-lookup")
    if kind != "prompt-lookup":
        raise LocalModelError(
            "bad_setting", f"speculative kind {kind!r} is not supported", "use {'kind': 'prompt-lookup'}"
        )
    vb = setting.get("verify_batch")  # set it to skip the bit-identity check (output may then differ)
    vt = setting.get("verify_threads")
    return {
        "kind": kind,
        "num_pred_tokens": max(1, int(setting.get("num_pred_tokens", SPEC_NUM_PRED))),
        "min_match": max(1, int(setting.get("min_match", SPEC_MIN_MATCH))),
        # a verify batch is compute-bound: by default every logical CPU (one-token steps keep theirs)
        "verify_threads": max(1, int(vt) if vt is not None else os.cpu_count() or 1),
        "verify_batch": int(vb) if vb is not None else None,
    }


class _PromptLookup:
    """Drafts for prompt-lookup decoding: what followed the longest earlier match of the context's tail.

    The context is the prompt and the answer so far (an answer that repeats itself drafts
    from its own text too). An index of every ``min_match``-gram gives the candidates in
    O(1) a step; the longest match wins (the latest on a tie: nearer text is likelier to
    continue the same way), and the draft grows with the match: a match of ``min_match``
    tokens drafts one token, each token more drafts one more. No match, no draft: that
    step is a plain one-token step, at no extra cost.
    """

    MAX_CANDIDATES = 16  # latest occurrences compared: bounds a step's cost in a repetitive text
    MAX_MATCH = 32  # a match this long is as good as any longer one

    def __init__(self, tokens: list[int], min_match: int) -> None:
        self.n = min_match
        self.seq: list[int] = []
        self.at: dict[tuple[int, ...], list[int]] = {}  # n-gram -> positions right after each occurrence
        for t in tokens:
            self.append(t)

    def append(self, tok: int) -> None:
        seq = self.seq
        seq.append(tok)
        if len(seq) >= self.n:
            self.at.setdefault(tuple(seq[-self.n :]), []).append(len(seq))

    def draft(self, room: int) -> list[int]:
        seq, n = self.seq, self.n
        if room <= 0 or len(seq) <= n:
            return []
        best, best_len = -1, 0
        for p in reversed(self.at.get(tuple(seq[-n:]), ())[-self.MAX_CANDIDATES - 1 :]):
            if p >= len(seq):
                continue  # the tail itself
            k = n
            while k < self.MAX_MATCH and p - 1 - k >= 0 and seq[p - 1 - k] == seq[-1 - k]:
                k += 1
            if k > best_len:
                best, best_len = p, k
        if best < 0:
            return []
        return seq[best : best + min(room, best_len - n + 1)]


def _load_error(path: Path, exc: Exception, log: str, n_gpu_layers: int) -> LocalModelError:
    low = log.lower()
    if "out of memory" in low or "failed to allocate" in low or "unable to allocate" in low:
        return LocalModelError(
            "model_too_large",
            f"not enough memory to load {path.name}: {exc}",
            "use a smaller quantization or n_ctx, or fewer GPU layers (settings extra n_gpu_layers)"
            if n_gpu_layers
            else "use a smaller quantization or n_ctx",
        )
    detail = next((ln.strip() for ln in log.splitlines() if "error" in ln.lower() or "failed" in ln.lower()), "")
    return LocalModelError(
        "model_load_failed",
        f"llama.cpp could not load {path}: {detail or exc}",
        "the file may be truncated or from a newer llama.cpp: download it again or upgrade llama-cpp-python",
    )


class _Generation:
    """One turn's decode loop. Runs on the worker thread; every event is stamped as it is produced."""

    def __init__(
        self,
        lm: LoadedModel,
        tokens: list[int],
        prompt: FormattedPrompt,
        spec: dict[str, Any] | None,
        settings: Any,
        emit: Callable[[ev.Event], None],
        cancel: threading.Event,
    ) -> None:
        import llama_cpp

        self.lm = lm
        self.llm = lm.llm
        self.prompt_tokens = tokens
        self.spec = spec
        self.emit = emit
        self.cancel = cancel
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self.is_eog = llama_cpp.llama_vocab_is_eog
        self.piece_buf = ctypes.create_string_buffer(256)
        self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.think = ThinkSplitter(inside=prompt.text.rstrip().endswith("<think>"))
        self.stops = StopMatcher(self._text_stops(prompt.stop))
        self.pending = 0  # tokens generated whose text has not been emitted yet
        self.generated: list[int] = []
        self.reasoning_tokens = 0
        self.drafted = 0
        self.accepted = 0
        self.steps = 0
        self.progress_ns = 0  # when the last DraftProgress went out
        temp = DEFAULT_TEMPERATURE if settings.temperature is None else float(settings.temperature)
        extra = settings.extra or {}
        self.llm.set_seed(int(extra.get("seed", self.llm._seed)))
        self.sampler = self.llm._init_sampler(
            temp=temp,
            top_k=int(extra.get("top_k", 40)),
            top_p=float(extra.get("top_p", 0.95)),
            min_p=float(extra.get("min_p", 0.05)),
            repeat_penalty=float(extra.get("repeat_penalty", 1.0)),
        )
        self.lookup = _PromptLookup(tokens, spec["min_match"]) if spec and spec["verify_batch"] > 1 else None

    def _text_stops(self, stops: tuple[str, ...]) -> tuple[str, ...]:
        """Stop strings that start with an end-of-generation token are already caught token by token."""
        keep = []
        for s in stops:
            toks = self.llm.tokenize(s.encode("utf-8"), add_bos=False, special=True)
            if not (toks and self.is_eog(self.vocab, toks[0])):
                keep.append(s)
        return tuple(keep)

    # --- helpers ------------------------------------------------------------------------------
    def _piece(self, tok: int) -> bytes:
        import llama_cpp

        n = llama_cpp.llama_token_to_piece(self.vocab, tok, self.piece_buf, len(self.piece_buf), 0, False)
        if n < 0:
            self.piece_buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self.vocab, tok, self.piece_buf, len(self.piece_buf), 0, False)
        return self.piece_buf.raw[:n]

    def _decode(self, batch: list[int], n_past: int, all_logits: bool) -> None:
        b = self.llm._batch
        b.set_batch(batch=batch, n_past=n_past, logits_all=all_logits)
        self.llm._ctx.decode(b)

    def _emit_text(self, text: str, t_ns: int) -> None:
        for kind, part in self.think.feed(text):
            self._emit_part(kind, part, t_ns)

    def _emit_part(self, kind: str, part: str, t_ns: int) -> None:
        if not part:
            return
        n, self.pending = self.pending, 0
        if kind == "reasoning":
            self.reasoning_tokens += n
            self.emit(ev.ReasoningDelta(t_ns, part, n))
        else:
            self.emit(ev.TextDelta(t_ns, part, n))

    def _accept_token(self, tok: int) -> str | None:
        """Record one sampled token; returns a stop reason when generation ends at it."""
        t_ns = ev.now_ns()
        if self.is_eog(self.vocab, tok):
            return "stop"
        self.generated.append(tok)
        if self.lookup is not None:
            self.lookup.append(tok)
        self.pending += 1
        text, stopped = self.stops.feed(self.utf8.decode(self._piece(tok)))
        if text:
            self._emit_text(text, t_ns)
        return "stop" if stopped else None

    # --- prefill with cache reuse ------------------------------------------------------------------
    def _prefill(self) -> tuple[int, int]:
        """Evaluate the prompt, reusing the cached prefix. Returns (n_past, tokens reused)."""
        lm, llm, toks = self.lm, self.llm, self.prompt_tokens
        common = 0
        for a, b in zip(lm.kv_tokens, toks, strict=False):
            if a != b:
                break
            common += 1
        reuse = min(common, len(toks) - 1)  # the last prompt token is always evaluated: its logits start the answer
        if reuse > 0 and llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
            lm.kv_tokens = lm.kv_tokens[:reuse]
        else:
            reuse = 0
            llm._ctx.kv_cache_clear()
            lm.kv_tokens = []
        n_past = reuse
        rest = toks[reuse:]
        with self._abortable():
            for i in range(0, len(rest), llm.n_batch):
                chunk = rest[i : i + llm.n_batch]
                self._decode(chunk, n_past, False)
                n_past += len(chunk)
                lm.kv_tokens.extend(chunk)
        return n_past, reuse

    @contextlib.contextmanager
    def _abortable(self):
        """Let cancel interrupt a long prefill inside llama.cpp (CPU backend checks it between graph nodes)."""
        import llama_cpp

        cb = llama_cpp.ggml_abort_callback(lambda _data: self.cancel.is_set())
        llama_cpp.llama_set_abort_callback(self.llm.ctx, cb, None)
        try:
            yield
        except RuntimeError:
            if self.cancel.is_set():
                self.llm._ctx.kv_cache_clear()
                self.lm.kv_tokens = []
                raise _Cancelled from None
            raise
        finally:
            llama_cpp.llama_set_abort_callback(self.llm.ctx, llama_cpp.ggml_abort_callback(), None)

    # --- the loop -------------------------------------------------------------------------------
    def run(self, max_new: int) -> None:
        import llama_cpp

        llm, lm = self.llm, self.lm
        llama_cpp.llama_perf_context_reset(llm.ctx)
        n_past, reused = self._prefill()
        tok = self.sampler.sample(llm._ctx, -1)  # synchronizes: llama.cpp books the prompt's time here
        perf_prefill = _perf(llm)
        stop_reason = "length" if max_new <= 0 else self._accept_token(tok)
        if self.lookup is not None:
            _verify_threads(lm, self.spec["verify_threads"])  # after the prefill, which keeps its own threads
        try:
            stop_reason, cancelled, n_past = self._decode_loop(tok, stop_reason, n_past, max_new)
        finally:
            if self.lookup is not None:
                _verify_threads(lm, None)
        if self.lookup is not None:
            self.emit(ev.DraftProgress(ev.now_ns(), self.drafted, self.accepted, self.steps))
        perf_end = _perf(llm)
        self._finish(stop_reason, cancelled, reused, perf_prefill, perf_end)

    def _decode_loop(
        self, tok: int, stop_reason: str | None, n_past: int, max_new: int
    ) -> tuple[str | None, bool, int]:
        """Decode until a stop; with speculation, each step verifies a draft in the same batch."""
        llm, lm = self.llm, self.lm
        n_ctx = llm.n_ctx()
        cancelled = False
        while stop_reason is None:
            if len(self.generated) >= max_new:
                stop_reason = "length"
                break
            if self.cancel.is_set():
                cancelled = True
                break
            draft: list[int] = []
            if self.lookup is not None:
                room = min(n_ctx - n_past - 1, max_new - len(self.generated) - 1, self.spec["verify_batch"] - 1)
                draft = self.lookup.draft(room)
            batch = [tok, *draft]
            if n_past + len(batch) > n_ctx:
                stop_reason = "length"
                break
            self._decode(batch, n_past, bool(draft))
            self.steps += 1
            self.drafted += len(draft)
            lm.kv_tokens.extend(batch)
            n_past += len(batch)
            for i in range(len(batch)):
                tok = self.sampler.sample(llm._ctx, i if draft else -1)
                stop_reason = self._accept_token(tok)
                hit = i < len(draft) and tok == draft[i]
                if hit:
                    self.accepted += 1
                if stop_reason is not None or not hit or len(self.generated) >= max_new:
                    # positions after i hold rejected (or unused) drafts: drop them from the cache
                    keep = n_past - len(batch) + i + 1
                    if keep < n_past:
                        llm._ctx.kv_cache_seq_rm(-1, keep, -1)
                        del lm.kv_tokens[keep:]
                        n_past = keep
                    break
            if self.lookup is not None and (t := ev.now_ns()) - self.progress_ns >= PROGRESS_NS:
                self.progress_ns = t
                self.emit(ev.DraftProgress(t, self.drafted, self.accepted, self.steps))
        return stop_reason, cancelled, n_past

    def _finish(
        self,
        stop_reason: str | None,
        cancelled: bool,
        reused: int,
        p1: dict[str, float],
        p2: dict[str, float],
    ) -> None:
        t_ns = ev.now_ns()
        tail = self.utf8.decode(b"", final=True) + self.stops.flush()
        if tail and not cancelled:
            self._emit_text(tail, t_ns)
        for kind, part in self.think.flush():
            self._emit_part(kind, part, t_ns)
        n_out = len(self.generated)
        lm = self.lm
        evaluated = p1["n_p_eval"] + p1["n_eval"]
        prefill_ms = p1["t_p_eval_ms"] + p1["t_eval_ms"]
        decode_ms = (p2["t_p_eval_ms"] + p2["t_eval_ms"]) - prefill_ms
        decode_tokens = max(n_out - 1, 0)
        data: dict[str, Any] = {
            "prompt_tokens": len(self.prompt_tokens),
            "prompt_tokens_reused": reused,
            "prompt_eval_tokens": evaluated,
            "prompt_eval_ms": round(prefill_ms, 3),
            "prefill_tokens_per_s": round(evaluated / prefill_ms * 1000, 2) if prefill_ms > 0 else None,
            "generated_tokens": n_out,
            "decode_tokens": decode_tokens,
            "decode_ms": round(decode_ms, 3),
            "decode_steps": self.steps,
            "decode_tokens_per_s": round(decode_tokens / decode_ms * 1000, 2) if decode_ms > 0 else None,
            "n_p_eval": p2["n_p_eval"],
            "t_p_eval_ms": round(p2["t_p_eval_ms"], 3),
            "n_eval": p2["n_eval"],
            "t_eval_ms": round(p2["t_eval_ms"], 3),
            "kv_used_tokens": len(lm.kv_tokens),
            "kv_used_bytes": (lm.kv.bytes_per_token() * len(lm.kv_tokens)) if lm.kv else None,
            "speculative": None,
        }
        if self.spec:
            data["speculative"] = {
                **self.spec,
                "drafted": self.drafted,
                "accepted": self.accepted,
                "acceptance_rate": round(self.accepted / self.drafted, 4) if self.drafted else None,
            }
        for k in (
            "model_name",
            "model_sha256",
            "model_path",
            "backend",
            "n_gpu_layers",
            "layers_offloaded",
            "n_ctx",
            "n_threads",
            "chat_format",
            "kv_bytes_per_token",
            "kv_size_full_ctx_bytes",
            "kv_llama_cpp_bytes",
            "extra_bufts",
            "extra_bufts_reason",
        ):
            data[k] = lm.info.get(k)
        self.emit(ev.Usage(t_ns, len(self.prompt_tokens), reused, n_out, self.reasoning_tokens))
        self.emit(ev.ServerTimings(t_ns, "llama.cpp", data))
        if cancelled:
            self.emit(ev.Cancelled(ev.now_ns()))
        else:
            self.emit(ev.Finished(ev.now_ns(), stop_reason))


def create(rest: str | None = None, **opts: Any) -> LocalLlamaBackend:
    """``-m local`` (rest None or "") uses the default model, ``-m local:NAME`` a shipped one
    (``gemma3-270m``, see ``backends.local_model.SHIPPED``), ``-m local:/path/model.gguf`` any GGUF.

    Nothing is loaded here: the first turn loads the model as its own phase (events
    ModelLoadStarted/ModelLoadFinished), and a missing or broken file becomes that
    turn's Failed event with a hint, logged like any other failure.
    """
    known = {
        "n_ctx",
        "n_gpu_layers",
        "n_threads",
        "chat_format",
        "flash_attn",
        "seed",
        "verbose",
        "max_memory_bytes",
        "extra_bufts",
    }
    kwargs = {k: v for k, v in opts.items() if k in known and v is not None}
    name = rest.strip() if rest else ""
    if not name:
        return LocalLlamaBackend(None, **kwargs)
    return LocalLlamaBackend(shipped_model(name) or name, **kwargs)
