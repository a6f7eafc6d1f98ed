"""The local engine and its loader: one worker thread per backend that loads the model as its own phase
(file checks, memory check, llama.cpp's load, warm-up, provenance) and runs each turn's generation."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...telemetry import events as ev
from ...telemetry.cost import PriceRef
from ...telemetry.errors import ErrorKind
from ...telemetry.server.kvcache import kv_cache_size
from ..base import ChatRequest
from . import llama_adapter as llama
from .amx import ExtraBufts, extra_bufts_choice
from .generation import Generation, resolve_verify_batch
from .handoff import Handoff
from .loadlog import load_error
from .models import (
    DEFAULT_MODEL,
    LocalModelError,
    ShippedModel,
    check_fits_in_memory,
    check_model_file,
    file_sha256,
    kv_shape,
    model_display_name,
    shipped_model,
)
from .speculative import SpecSettings, check_verify_batch
from .state import Cancelled, LoadedModel, LoadRequest
from .template import ChatTemplate

DEFAULT_N_CTX = 4096
DEFAULT_MAX_OUTPUT_TOKENS = 512  # when the turn sets no limit
GPU_BACKENDS = ("CUDA", "Metal", "Vulkan", "ROCm", "HIP", "SYCL", "MUSA", "CANN", "OpenCL", "Kompute")


FLASH_ATTN_CHOICES = ("auto", "on", "off")


def flash_attn_choice(value: object) -> str:
    """A flash-attention setting as the engine takes it: "auto" (None too: llama.cpp decides per device),
    "on" (True), "off" (False). Anything else is a bad setting, never silently the default."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str) and value.strip().lower() in FLASH_ATTN_CHOICES:
        return value.strip().lower()
    raise LocalModelError(
        ErrorKind.BAD_SETTING,
        f"flash_attn takes auto, on or off, not {str(value)[:40]!r}",
        "Use --flash-attn auto (llama.cpp's own choice per device), on or off.",
    )


def _count(value: object, name: str, least: int) -> int | None:
    """A GPU-layer or thread count from a setting (untrusted: a config, an old log, the settings screen)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        what = "-1 (every layer) or more" if least < 0 else f"a whole number, at least {least}"
        raise LocalModelError(
            ErrorKind.BAD_SETTING, f"{name} takes {what}, not {str(value)[:40]!r}", f"Fix {name} in the settings (F2)."
        )
    return value


def default_threads() -> int:
    """Threads for decode and prefill when nobody chose: one CPU left for the chat's UI, and no more
    than the physical cores (llama.cpp's own default: SMT siblings share the units its kernels use).

    Measured with the chat's UI beside the engine (tests/benchmarks/local_threads.py, 2 rounds x 3
    turns x 96 tokens, SmolLM2 135M, 2 shared cores; two runs, at load 5-6 and 2-4): 1 thread TPOT
    60 / 31 ms; 2 threads 374 / 108 ms (3.5-6x slower: a decode thread that loses its core to the UI
    stalls the whole step, as llama.cpp's threads wait for each other), the UI loop's worst tick
    576 / 107 ms late against 298 / 81. On 16 logical CPUs with 8 cores this gives 8, as on the
    H200's host.
    """
    try:
        logical = len(os.sched_getaffinity(0))  # the CPUs this process may use (a container's share)
    except (AttributeError, OSError):
        logical = os.cpu_count() or 1
    import psutil  # only here: a load's own time

    physical = min(psutil.cpu_count(logical=False) or logical, logical)
    return max(1, min(physical, logical - 1))


def detect_backend(system_info: str, offloading: bool) -> str:
    """Which compute backend runs the layers: the GPU backend compiled in when layers are offloaded, else CPU."""
    if offloading:
        for name in GPU_BACKENDS:
            if re.search(rf"\b{name}\b", system_info, re.IGNORECASE):
                return name
        return "GPU"
    return "CPU"


def warm_up(llm: llama.LlamaHandle) -> None:
    """One throwaway decode inside the load phase: pages the mmap'd weights in and builds the compute graphs,
    so none of that lands in the first turn's TTFT."""
    bos = llm.token_bos()
    tok = bos if bos >= 0 else 0
    for batch in ([tok], [tok, tok]):  # both the one-token (decode) and the batch (prefill) graphs
        llm.decode(batch, 0, False)
        llm.synchronize()
        llm.kv_clear()
    llm.perf_reset()


def flash_attn_resolved(requested: str, auto_choice: bool | None) -> bool | None:
    """Whether attention runs as flash attention: what was forced, or what llama.cpp's auto chose."""
    if requested == "auto":
        return auto_choice
    return requested == "on"


def layers_split(layers_offloaded: int, splits: tuple[int, int] | None) -> bool | None:
    """Whether some op of every offloaded layer ran off the GPU: the scheduler cut the graph at least once
    per offloaded layer (a whole offload is a handful of pieces; a partial one, a few more). That is how
    a forced flash attention without kernels for the device shows: attention on the CPU, copies each way.
    None when it cannot be told (no GPU layers, too few of them, or no graph line in the log)."""
    if splits is None or layers_offloaded < 4:
        return None
    return splits[0] >= layers_offloaded


def _missing_llama(detail: str = "") -> LocalModelError:
    return LocalModelError(
        ErrorKind.LLAMA_CPP_MISSING,
        "the local provider needs llama-cpp-python" + detail,
        "pip install 'ttft[local]'  (CUDA: CMAKE_ARGS=\"-DGGML_CUDA=on\" pip install llama-cpp-python)",
    )


class LocalLlamaBackend:
    provider = "local"
    api = "llama.cpp"
    price: PriceRef | None = None  # the config's prices for a local model, if it sets any (telemetry.cost)

    def __init__(
        self,
        model_path: str | os.PathLike[str] | ShippedModel | None = None,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_gpu_layers: int | None = None,
        n_threads: int | None = None,
        chat_format: str | None = None,
        flash_attn: bool | str | None = None,
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
        self.flash_attn = flash_attn_choice(flash_attn)
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
        handoff = Handoff(loop)
        cancel = threading.Event()
        fut = loop.run_in_executor(self._executor, self._turn_guarded, request, handoff, cancel)
        try:
            while True:
                for e in await handoff.take():
                    yield e
                    if isinstance(e, ev.TERMINAL):
                        return
        finally:
            cancel.set()
            await asyncio.wait({fut}, timeout=30)  # stops within a token; keeps turns from overlapping
            fut.add_done_callback(lambda _: handoff.close())  # its pipe goes once the worker cannot write to it

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._unload)
        self._executor.shutdown(wait=False)

    async def load(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Load now (outside any turn) as turns with settings ``extra`` would; returns the load info or
        raises LocalModelError."""
        loop = asyncio.get_running_loop()
        lm = await loop.run_in_executor(self._executor, self._ensure_loaded, self._request(extra), None)
        return lm.info

    def close(self) -> None:
        """Synchronous release (for code without a running loop)."""
        if not self._closed:
            self._closed = True
            self._executor.submit(self._unload).result()
            self._executor.shutdown(wait=True)

    # --- worker side ----------------------------------------------------------------------
    def _request(self, extra: dict[str, Any] | None) -> LoadRequest:
        """What a load is asked for: the turn's settings (``extra``: n_gpu_layers, n_threads, flash_attn,
        extra_bufts) over the backend's own options. Resolving it (does this build offload? which buffer
        types?) imports llama.cpp, so that waits for the load phase."""
        ex = extra or {}
        bufts = ex.get("extra_bufts", self.extra_bufts)
        return LoadRequest(
            n_gpu_layers=_count(ex.get("n_gpu_layers", self.n_gpu_layers), "n_gpu_layers", -1),
            n_threads=_count(ex.get("n_threads", self.n_threads), "n_threads", 1),
            flash_attn=flash_attn_choice(ex.get("flash_attn", self.flash_attn)),
            extra_bufts=None if bufts is None else bool(bufts),
        )

    def _unload(self) -> None:
        if self._loaded is not None:
            with contextlib.suppress(Exception):
                self._loaded.llm.close()
            self._loaded = None

    def _turn_guarded(self, request: ChatRequest, handoff: Handoff, cancel: threading.Event) -> None:
        emit = handoff.put

        def emit_and_keep(e: ev.Event) -> None:
            if isinstance(e, ev.ServerTimings):
                self.last_timings = e.data  # what the engine did, even when nobody read the end of the stream
            emit(e)

        try:
            self._turn(request, emit_and_keep, cancel, handoff)
        except Cancelled:
            emit(ev.Cancelled(ev.now_ns()))
        except Exception as exc:  # a LocalModelError with its kind and hint; any other failure, a failed turn too
            emit(ev.Failed.of(exc))

    def _ensure_loaded(self, want: LoadRequest, emit: Callable[[ev.Event], None] | None) -> LoadedModel:
        """Load (or reload when the request changed); emits the load phase when ``emit`` is given.

        Everything that touches llama.cpp happens after ModelLoadStarted, the import of llama-cpp-python
        first: on a GPU build it initialises the GPU runtime (1.5-1.8 s of CUDA on an H200), which is
        the load's time, never ttft's own delay before the send."""
        lm = self._loaded
        if lm is not None and lm.request == want:
            return lm
        if not llama.available():
            raise _missing_llama()
        self._unload()
        shipped = self.shipped
        if shipped is not None and not shipped.installed():
            raise shipped.missing()
        assembling = shipped is not None and shipped.needs_assembly()
        if emit is not None:
            what = f"loading {self.model_path.name}"
            if shipped is not None and assembling:
                where = self.model_path.parent
                what = f"assembling {shipped.name} (first run, about 250 MB) into {where}, then loading"
            emit(ev.ModelLoadStarted(ev.now_ns(), what=what))
        t0 = time.perf_counter()
        try:
            import_ms = llama.import_ms()
        except ImportError as exc:  # installed but broken (a wheel for another CPU or CUDA)
            raise _missing_llama(f" ({exc})") from exc
        if shipped is not None:
            self.model_path = shipped.materialise()
        file_bytes = check_model_file(self.model_path)
        offload = llama.gpu_offload_supported()
        n_gpu_layers = want.n_gpu_layers if want.n_gpu_layers is not None else (-1 if offload else 0)
        check_fits_in_memory(file_bytes, 0, on_gpu=n_gpu_layers != 0 and offload, available=self.max_memory_bytes)
        sha, sha_cached = file_sha256(self.model_path)
        bufts = extra_bufts_choice(want.extra_bufts, llama.system_info())
        lm = self._load_llama(want, n_gpu_layers, bufts, file_bytes)
        lm.info.update(
            model_sha256=sha,
            sha256_from_cache=sha_cached,
            assembled=assembling,
            llama_import_ms=round(import_ms, 1),
            load_ms=round((time.perf_counter() - t0) * 1000, 1),
        )
        self._loaded = lm
        return lm

    def _load_llama(self, want: LoadRequest, n_gpu_layers: int, bufts: ExtraBufts, file_bytes: int) -> LoadedModel:
        kwargs: dict[str, Any] = {
            "n_ctx": self.n_ctx,
            "n_gpu_layers": n_gpu_layers,
            "flash_attn": want.flash_attn == "on",  # Llama() takes a bool; "auto" is set by context_params
            "seed": self.seed,
            "verbose": self.verbose,
        }
        # Prefill uses as many threads as decode: llama-cpp-python's default of every logical CPU for
        # batches spins badly when cores are shared (measured 3-5x slower prefill on a busy 2-core box).
        threads = want.n_threads or default_threads()
        kwargs["n_threads"] = kwargs["n_threads_batch"] = threads
        fa_type = llama.FLASH_ATTN_TYPES[want.flash_attn]
        with (
            llama.capture_log(self.verbose) as log,
            llama.model_params(use_extra_bufts=bufts.use),
            llama.context_params(flash_attn_type=fa_type),
        ):
            try:
                llm = llama.LlamaHandle.open(self.model_path, **kwargs)
            except Exception as exc:
                raise load_error(self.model_path, exc, log.text, n_gpu_layers) from exc
        warm_up(llm)
        md = llm.metadata
        shape = kv_shape(md)
        offloading = n_gpu_layers != 0 and llama.gpu_offload_supported()
        # llama.cpp's own count ("offloaded 31/31 layers to GPU") includes the output layer, which
        # n_layer() (the 30 blocks) does not: the pane's "31/30 layers" read like a bug on an H200.
        off = log.layers_offloaded()
        n_layer = off[1] if off else llm.n_layer()
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
        n_threads, n_threads_batch = llm.threads()
        fa = flash_attn_resolved(llm.flash_attn_type(), log.flash_attn_auto())
        splits = log.graph_splits()
        info: dict[str, Any] = {
            "model_path": str(self.model_path),
            "model_name": self.shipped.display if self.shipped else model_display_name(self.model_path, md),
            "model_file_bytes": file_bytes,
            "architecture": md.get("general.architecture"),
            "size_label": md.get("general.size_label"),
            "n_params": llm.n_params(),
            "n_ctx": llm.n_ctx(),
            "n_ctx_train": llm.n_ctx_train(),
            "n_threads": n_threads,
            "n_threads_batch": n_threads_batch,
            "backend": detect_backend(llama.system_info(), offloading),
            "gpu_offload_supported": llama.gpu_offload_supported(),
            "n_gpu_layers": n_gpu_layers,
            "layers_offloaded": layers_offloaded,
            "n_layers": n_layer,
            "flash_attn_requested": llm.flash_attn_type(),  # as the context was created: auto, on, off
            "flash_attn": fa,  # what llama.cpp chose (None: this build did not say)
            "flash_attn_reason": log.flash_attn_mismatch(),  # why auto chose off, in llama.cpp's words
            "graph_splits": splits[0] if splits else None,  # prefill graph's pieces between devices
            "layers_split": layers_split(layers_offloaded, splits),
            "chat_format": template.name,
            "kv_bytes_per_token": shape.bytes_per_token() if shape else None,
            "kv_size_full_ctx_bytes": kv_full.total_bytes if kv_full else None,
            "kv_llama_cpp_bytes": log.kv_cache_bytes(),
            "kv_llama_cpp_parts": log.kv_cache_parts(),
            "swa_full": llm.swa_full,
            "extra_bufts": bufts.use,
            "extra_bufts_reason": bufts.reason,
            "llama_cpp_python": llama.version(),
        }
        return LoadedModel(llm, self.model_path, info, template, shape, n_gpu_layers, bufts, want)

    def _turn(
        self, request: ChatRequest, emit: Callable[[ev.Event], None], cancel: threading.Event, handoff: Handoff
    ) -> None:
        s = request.settings
        if cancel.is_set():
            raise Cancelled
        images = [a.name for m in request.messages for a in m.attachments if a.is_image]
        if images:  # refused before the send by backends.attachments; here too, for any other caller
            raise LocalModelError(
                ErrorKind.UNSUPPORTED_ATTACHMENT,
                f"the local engine takes text only, and {', '.join(images)} is an image.",
                "Attach text files only, or pick a model that reads images with -m.",
            )
        spec = SpecSettings.parse(s.speculative)
        want = self._request(s.extra)
        lm = self._loaded
        need_load = lm is None or lm.request != want
        need_check = spec is not None and spec.verify_batch is None
        if spec is not None and need_check and lm is not None and lm.verify_threads != spec.verify_threads:
            lm.verify_batch_max = lm.verify_checked = 1  # checked with other threads: that says nothing here
        checked_enough = spec is None or lm is None or lm.verify_checked >= spec.num_pred_tokens + 1
        if need_load or (need_check and not checked_enough):
            # Loading (and checking which verify batches are bit-identical) is its own phase, before the request.
            lm = self._ensure_loaded(want, emit)
            if not need_load:
                emit(ev.ModelLoadStarted(ev.now_ns(), what="checking batch-invariance for speculative decoding"))
            if spec is not None and need_check:
                check_verify_batch(lm, spec.num_pred_tokens + 1, cancel, spec.verify_threads)
                lm.info["verify_batch_max"] = lm.verify_batch_max
            emit(ev.ModelLoadFinished(ev.now_ns(), info=dict(lm.info)))
        assert lm is not None
        spec = resolve_verify_batch(spec, lm)
        emit(ev.AttemptSent(ev.now_ns(), 1))
        if cancel.is_set():
            raise Cancelled

        llm = lm.llm
        prompt = lm.template.format(request.messages)
        tokens = llm.tokenize(prompt.text.encode("utf-8"), add_bos=prompt.add_bos, special=True)
        n_ctx = llm.n_ctx()
        # A small base model may never end its turn on its own: cap an unset limit so the
        # default chat answers in seconds, not minutes of run-on text.
        default_max = min(DEFAULT_MAX_OUTPUT_TOKENS, n_ctx - len(tokens))
        max_new = s.max_output_tokens if s.max_output_tokens is not None else default_max
        if len(tokens) + max(max_new, 1) > n_ctx:
            # With no limit set, the prompt alone overflowed: a limit of "-934" tokens explains nothing.
            asked = f" + max output tokens ({max_new})" if s.max_output_tokens is not None else ""
            raise LocalModelError(
                ErrorKind.CONTEXT_OVERFLOW,
                f"the prompt ({len(tokens)} tokens){asked} exceeds the context of {n_ctx} tokens, leaving no room"
                " to answer.",
                "Start a new chat (ctrl+n) or shorten the prompt, lower max output tokens, or load the model with a"
                " larger n_ctx.",
            )
        with handoff.held():  # the loop is woken once a decode step, as the step enters llama.cpp (see handoff)
            Generation(lm, tokens, prompt, spec, s, emit, cancel, handoff.flush).run(max_new)


_OPTIONS = frozenset(
    {"n_ctx", "n_gpu_layers", "n_threads", "chat_format", "flash_attn", "seed", "verbose", "max_memory_bytes"}
    | {"extra_bufts"}
)


def create(rest: str | None = None, **opts: Any) -> LocalLlamaBackend:
    """``-m local`` (rest None or "") uses the default model, ``-m local:NAME`` a shipped one
    (``gemma3-270m``, see ``backends.local.models.SHIPPED``), ``-m local:/path/model.gguf`` any GGUF.

    Nothing is loaded here: the first turn loads the model as its own phase (events
    ModelLoadStarted/ModelLoadFinished), and a missing or broken file becomes that
    turn's Failed event with a hint, logged like any other failure.
    """
    kwargs = {k: v for k, v in opts.items() if k in _OPTIONS and v is not None}
    name = rest.strip() if rest else ""
    if not name:
        return LocalLlamaBackend(None, **kwargs)
    return LocalLlamaBackend(shipped_model(name) or name, **kwargs)
