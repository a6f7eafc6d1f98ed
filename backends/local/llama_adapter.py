"""The one module that touches llama-cpp-python, typed, so an upgrade of it breaks this file only.

Everything the engine needs goes through here: the ``Llama`` object's public calls and
its private internals (``_ctx``, ``_batch``, ``_model``, ``_init_sampler``, ``_seed``),
the low-level ``llama_cpp`` functions (perf counters, thread counts, the abort callback,
token pieces, the log callback) and its chat formatters. Callers see plain Python types.

llama-cpp-python's internals are only partly annotated, so the wrapped objects are held
as ``Any`` here and each method states the type it returns. ``llama_cpp`` itself is
imported inside the functions: importing this module must work without it installed.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .loadlog import LoadLog

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_LOG_LOCK = threading.Lock()  # llama.cpp's log callback is process-wide
_PARAMS_LOCK = threading.Lock()  # so is the patched default-params function of model_params
_CONTEXT_LOCK = threading.Lock()  # and the patched context constructor of context_params

# ttft's words for llama.cpp's ``llama_flash_attn_type`` (LLAMA_FLASH_ATTN_TYPE_AUTO, _ENABLED, _DISABLED).
FLASH_ATTN_TYPES = {"auto": -1, "on": 1, "off": 0}


def available() -> bool:
    """Whether llama-cpp-python is installed, without importing it: on a CUDA build the import
    initialises CUDA (1.5-1.8 s on an H200), which belongs to the engine's load phase, not before it."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


def import_ms() -> float:
    """Import llama-cpp-python now (and with it the GPU runtime on a GPU build); the milliseconds it took,
    about 0 when it was already imported. Raises ImportError when it is not installed or broken."""
    if "llama_cpp" in sys.modules:
        return 0.0
    t0 = time.perf_counter()
    import llama_cpp  # noqa: F401

    return (time.perf_counter() - t0) * 1000


def import_before_numpy() -> bool:
    """Import llama-cpp-python now, if it is installed and numpy is not yet imported; whether it is
    imported (before numpy) after the call.

    On a CUDA build of llama.cpp a model load segfaults in a process that imported numpy first: seen
    on an H200 (numpy 2.5.2, CUDA 13, llama-cpp-python 0.3.36) in ``ttft probe`` and under pytest
    with a plugin that imports numpy, every time, in the main thread or a worker alike; the same load
    with llama.cpp imported first runs. The commands that run the engine in their own process (bench,
    probe, compare; ask and the chat run it in a child of their own) call this before anything imports
    numpy. The import then happens outside any turn, so no turn's load phase pays for it."""
    if "llama_cpp" in sys.modules:
        return True
    if "numpy" in sys.modules or not available():
        return False
    try:
        import_ms()
    except ImportError:  # a broken install: the first turn's load says so, with its hint
        return False
    return True


def gpu_offload_supported() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def system_info() -> str:
    import llama_cpp

    return str(llama_cpp.llama_print_system_info().decode("utf-8", "replace"))


def version() -> str:
    import llama_cpp

    return str(llama_cpp.__version__)


@contextlib.contextmanager
def model_params(**fields: Any) -> Iterator[None]:
    """Set fields of the ``llama_model_params`` that ``Llama()`` builds, for one load.

    llama-cpp-python's ``Llama`` takes no argument for some of llama.cpp's model
    parameters (``use_extra_bufts`` among them); it starts from
    ``llama_model_default_params()``, so this wraps that call for the duration of the
    load. Fields this build of llama.cpp does not have are skipped.
    """
    import llama_cpp.llama_cpp as bindings  # the module whose functions Llama() calls, looked up at each call

    lib: Any = bindings
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


@contextlib.contextmanager
def context_params(**fields: Any) -> Iterator[None]:
    """Set fields of the ``llama_context_params`` a ``Llama()`` creates its context with, for one load.

    ``Llama`` takes ``flash_attn`` as a bool only (enabled or disabled); llama.cpp's own default,
    ``LLAMA_FLASH_ATTN_TYPE_AUTO``, is reachable only by setting ``flash_attn_type`` on the params
    just before ``llama_init_from_model``, which this wraps for the duration of the load. Fields this
    build of llama.cpp does not have are skipped.
    """
    import llama_cpp.llama_cpp as bindings  # the module whose functions llama_cpp._internals calls

    lib: Any = bindings
    original = lib.llama_init_from_model

    def patched(model: Any, params: Any) -> Any:
        for name, value in fields.items():
            if any(f[0] == name for f in type(params)._fields_):
                setattr(params, name, value)
        return original(model, params)

    with _CONTEXT_LOCK:
        lib.llama_init_from_model = patched
        try:
            yield
        finally:
            lib.llama_init_from_model = original


@contextlib.contextmanager
def capture_log(verbose: bool) -> Iterator[LoadLog]:
    """Collect llama.cpp's log during a load (to read what it allocated), echoing it when verbose."""
    import llama_cpp
    import llama_cpp._logger as llama_logger

    log = LoadLog()

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]  # a ctypes CFUNCTYPE
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


# --- chat formats -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Rendered:
    """A chat formatter's output: the prompt, its stop strings, and whether it added BOS itself."""

    prompt: str
    stop: tuple[str, ...]
    added_special: bool


FormatFn = Callable[[list[dict[str, str]]], Rendered]


def _rendered(r: Any) -> Rendered:
    stop = () if r.stop is None else (r.stop,) if isinstance(r.stop, str) else tuple(r.stop)
    return Rendered(str(r.prompt), stop, bool(r.added_special))


def jinja_format(template: str, eos_token: str, bos_token: str, eos_id: int) -> FormatFn:
    """A GGUF's own Jinja chat template; raises whatever the template raises on a first render."""
    from llama_cpp import llama_chat_format as lcf

    fmt: Any = lcf.Jinja2ChatFormatter(
        template=template, eos_token=eos_token, bos_token=bos_token, stop_token_ids=[eos_id]
    )
    fn: FormatFn = lambda msgs: _rendered(fmt(messages=msgs))  # noqa: E731
    fn([{"role": "user", "content": "hi"}])  # fail here, not mid-turn
    return fn


def named_format(name: str) -> FormatFn | None:
    """llama-cpp-python's chat format ``name`` (gemma, chatml, llama-3, ...), None when it has none so named."""
    from llama_cpp import llama_chat_format as lcf

    impl: Any = getattr(lcf, "format_" + name.replace("-", "_"), None)
    if impl is None:
        return None
    return lambda msgs: _rendered(impl(messages=msgs))


# --- one loaded model ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Perf:
    """llama.cpp's own prompt-eval and eval counters since the last reset."""

    t_p_eval_ms: float
    n_p_eval: int
    t_eval_ms: float
    n_eval: int


class Sampler:
    """llama-cpp-python's sampler chain for one turn, reading the logits of its model's context.

    It times itself (``ns`` over ``calls``): the chain is llama.cpp's work, not ttft's, and its cost per
    token (a top-k over the whole vocabulary) is part of what separates TPOT from the decode time that
    llama.cpp books. The context is synchronised before the clock starts, so a GPU's compute still in
    flight is booked as decode by llama.cpp, as it always was, and not as sampling."""

    def __init__(self, chain: Any, ctx: Any, synchronize: Any) -> None:
        self._chain = chain
        self._ctx = ctx
        self._synchronize = synchronize
        self.ns = 0
        self.calls = 0

    def sample(self, idx: int) -> int:
        """The token sampled from row ``idx`` of the last decode's logits (-1: the last row)."""
        self._synchronize(self._ctx.ctx)
        t0 = time.perf_counter_ns()
        tok = int(self._chain.sample(self._ctx, idx))
        self.ns += time.perf_counter_ns() - t0
        self.calls += 1
        return tok

    def reset_clock(self) -> None:
        self.ns = self.calls = 0


class LlamaHandle:
    """One loaded llama.cpp model and context. Not thread-safe: use it from one thread."""

    def __init__(self, llm: Any) -> None:
        import llama_cpp

        self._lib: Any = llama_cpp
        self._llm: Any = llm
        self._vocab: Any = llama_cpp.llama_model_get_vocab(llm.model)
        self._n_vocab = int(llm.n_vocab())
        self._piece = ctypes.create_string_buffer(256)
        # A token's bytes and whether it ends generation never change for a loaded vocabulary: each is asked
        # of llama.cpp once (a ctypes call is 4-7 µs, a dict lookup 0.1), at most once per token of the vocabulary.
        self._pieces: dict[int, bytes] = {}
        self._eog: dict[int, bool] = {}

    @classmethod
    def open(cls, path: Path, **kwargs: Any) -> LlamaHandle:
        from llama_cpp import Llama

        return cls(Llama(str(path), **kwargs))

    @property
    def raw(self) -> Any:
        """The ``llama_cpp.Llama`` itself, for its public API (tests compare against a bare ``generate``)."""
        return self._llm

    # --- what was loaded ---------------------------------------------------------------------
    @property
    def metadata(self) -> dict[str, str]:
        return dict(self._llm.metadata)

    @property
    def n_batch(self) -> int:
        return int(self._llm.n_batch)

    def n_ctx(self) -> int:
        return int(self._llm.n_ctx())

    def n_vocab(self) -> int:
        return self._n_vocab

    def n_layer(self) -> int:
        return int(self._lib.llama_model_n_layer(self._llm.model))

    def n_params(self) -> int:
        return int(self._lib.llama_model_n_params(self._llm.model))

    def n_ctx_train(self) -> int:
        return int(self._lib.llama_model_n_ctx_train(self._llm.model))

    def threads(self) -> tuple[int, int]:
        """(threads of a one-token decode, threads of a larger batch) as the context was created."""
        p = self._llm.context_params
        return int(p.n_threads), int(p.n_threads_batch)

    def flash_attn_type(self) -> str:
        """The flash attention asked of llama.cpp ("auto", "on", "off"), as the context was created with it."""
        asked = int(self._llm.context_params.flash_attn_type)
        return next((k for k, v in FLASH_ATTN_TYPES.items() if v == asked), str(asked))

    @property
    def swa_full(self) -> bool:
        return bool(self._llm.context_params.swa_full)

    @property
    def use_extra_bufts(self) -> bool:
        return bool(self._llm.model_params.use_extra_bufts)

    # --- tokens --------------------------------------------------------------------------------
    def tokenize(self, data: bytes, *, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(self._llm.tokenize(data, add_bos=add_bos, special=special))

    def token_bos(self) -> int:
        return int(self._llm.token_bos())

    def token_eos(self) -> int:
        return int(self._llm.token_eos())

    def token_text(self, tok: int) -> str:
        return str(self._llm._model.token_get_text(tok))

    def is_eog(self, tok: int) -> bool:
        eog = self._eog.get(tok)
        if eog is None:
            eog = self._eog[tok] = bool(self._lib.llama_vocab_is_eog(self._vocab, tok))
        return eog

    def piece(self, tok: int) -> bytes:
        """The bytes of one token (a UTF-8 character may span several tokens)."""
        piece = self._pieces.get(tok)
        if piece is None:
            piece = self._pieces[tok] = self._token_to_piece(tok)
        return piece

    def _token_to_piece(self, tok: int) -> bytes:
        lib = self._lib
        n = int(lib.llama_token_to_piece(self._vocab, tok, self._piece, len(self._piece), 0, False))
        if n < 0:
            self._piece = ctypes.create_string_buffer(-n)
            n = int(lib.llama_token_to_piece(self._vocab, tok, self._piece, len(self._piece), 0, False))
        return self._piece.raw[:n]

    # --- decoding and the KV cache ---------------------------------------------------------------
    def decode(self, tokens: list[int], n_past: int, all_logits: bool) -> None:
        """Evaluate ``tokens`` at positions from ``n_past``; logits for every one, or only the last."""
        b = self._llm._batch
        if len(tokens) == 1:  # a decode step: the one token's fields, without set_batch's loop over the batch
            raw = b.batch
            raw.n_tokens = 1
            raw.token[0], raw.pos[0], raw.n_seq_id[0], raw.logits[0] = tokens[0], n_past, 1, True
            raw.seq_id[0][0] = 0
        else:
            b.set_batch(batch=tokens, n_past=n_past, logits_all=all_logits)
        self._llm._ctx.decode(b)

    def logits(self, i: int) -> npt.NDArray[np.float32]:
        """A copy of the last decode's logits row ``i``."""
        import numpy as np

        row = self._llm._ctx.get_logits_ith(i)
        return np.ctypeslib.as_array(row, shape=(self._n_vocab,)).copy()

    def synchronize(self) -> None:
        """Wait for the last decode to finish (reading a logits row does)."""
        self._llm._ctx.get_logits_ith(-1)

    def kv_clear(self) -> None:
        self._llm._ctx.kv_cache_clear()

    def kv_keep(self, n: int) -> bool:
        """Drop the cache from position ``n`` on; False when llama.cpp cannot (the caller clears it)."""
        return bool(self._llm._ctx.kv_cache_seq_rm(-1, n, -1))

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        self._lib.llama_set_n_threads(self._llm.ctx, n_threads, n_threads_batch)

    @contextlib.contextmanager
    def abort_when(self, cancelled: Callable[[], bool]) -> Iterator[None]:
        """Let ``cancelled`` interrupt a decode inside llama.cpp (the CPU backend checks between graph nodes);
        an interrupted decode raises RuntimeError."""
        lib = self._lib
        cb = lib.ggml_abort_callback(lambda _data: cancelled())
        lib.llama_set_abort_callback(self._llm.ctx, cb, None)
        try:
            yield
        finally:
            lib.llama_set_abort_callback(self._llm.ctx, lib.ggml_abort_callback(), None)

    # --- counters and sampling -----------------------------------------------------------------
    def perf(self) -> Perf:
        p = self._lib.llama_perf_context(self._llm.ctx)
        # llama.cpp reports max(1, n): a count whose time is 0 never ran.
        return Perf(
            t_p_eval_ms=float(p.t_p_eval_ms),
            n_p_eval=int(p.n_p_eval) if p.t_p_eval_ms > 0 else 0,
            t_eval_ms=float(p.t_eval_ms),
            n_eval=int(p.n_eval) if p.t_eval_ms > 0 else 0,
        )

    def perf_reset(self) -> None:
        self._lib.llama_perf_context_reset(self._llm.ctx)

    @property
    def seed(self) -> int:
        return int(self._llm._seed)

    def set_seed(self, seed: int) -> None:
        self._llm.set_seed(seed)

    def sampler(self, *, temp: float, top_k: int, top_p: float, min_p: float, repeat_penalty: float) -> Sampler:
        chain = self._llm._init_sampler(temp=temp, top_k=top_k, top_p=top_p, min_p=min_p, repeat_penalty=repeat_penalty)
        return Sampler(chain, self._llm._ctx, self._lib.llama_synchronize)

    def close(self) -> None:
        self._llm.close()
