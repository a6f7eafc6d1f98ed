"""One turn's decode loop on the engine's worker thread: prefill with KV-cache reuse, token-by-token
(or draft-verifying) decode, text and reasoning deltas stamped as they are produced, the turn's timings."""

from __future__ import annotations

import codecs
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ...telemetry import events as ev
from ...telemetry.settings import TurnSettings
from ..think import ThinkSplitter
from .llama_adapter import Perf
from .speculative import PromptLookup, SpecSettings, verify_threads
from .state import Cancelled, LoadedModel
from .template import FormattedPrompt, StopMatcher

# When the turn sets none: llama-cpp-python's chat default. A 135M model at 0.8 wanders off the question
# ("What is the capital of France?" got a refusal and a riddle); at 0.2 it answers "Paris".
DEFAULT_TEMPERATURE = 0.2
PROGRESS_NS = 100_000_000  # DraftProgress at most every 100 ms
_INFO_IN_TIMINGS = (  # what the load found, repeated in every turn's timings (the log's provenance)
    "model_name",
    "model_sha256",
    "model_path",
    "backend",
    "n_gpu_layers",
    "layers_offloaded",
    "n_layers",
    "flash_attn_requested",
    "flash_attn",
    "layers_split",
    "n_ctx",
    "n_threads",
    "chat_format",
    "kv_bytes_per_token",
    "kv_size_full_ctx_bytes",
    "kv_llama_cpp_bytes",
    "extra_bufts",
    "extra_bufts_reason",
)


def resolve_verify_batch(spec: SpecSettings | None, lm: LoadedModel) -> SpecSettings | None:
    """The turn's settings with the verify batch the check allows, when the turn left it open."""
    if spec is None or spec.verify_batch is not None:
        return spec
    return replace(spec, verify_batch=max(1, min(lm.verify_batch_max, spec.num_pred_tokens + 1)))


class Generation:
    """One turn's decode loop. Runs on the worker thread; every event is stamped as it is produced."""

    def __init__(
        self,
        lm: LoadedModel,
        tokens: list[int],
        prompt: FormattedPrompt,
        spec: SpecSettings | None,
        settings: TurnSettings,
        emit: Callable[[ev.Event], None],
        cancel: threading.Event,
        flush: Callable[[], None] = lambda: None,
    ) -> None:
        """``flush``: deliver the events emitted so far; called as each decode step enters llama.cpp, which
        then runs without the GIL (:mod:`backends.local.handoff`)."""
        self.lm = lm
        self.llm = lm.llm
        self.prompt_tokens = tokens
        self.spec = spec
        self.emit = emit
        self.flush = flush
        self.cancel = cancel
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
        self.llm.set_seed(int(extra.get("seed", self.llm.seed)))
        self.sampler = self.llm.sampler(
            temp=temp,
            top_k=int(extra.get("top_k", 40)),
            top_p=float(extra.get("top_p", 0.95)),
            min_p=float(extra.get("min_p", 0.05)),
            repeat_penalty=float(extra.get("repeat_penalty", 1.0)),
        )
        drafting = spec is not None and spec.verify_batch is not None and spec.verify_batch > 1
        self.lookup = PromptLookup(tokens, spec.min_match) if spec is not None and drafting else None
        self.verify_batch = (spec.verify_batch or 1) if spec is not None else 1

    def _text_stops(self, stops: tuple[str, ...]) -> tuple[str, ...]:
        """Stop strings that start with an end-of-generation token are already caught token by token."""
        keep = []
        for s in stops:
            toks = self.llm.tokenize(s.encode("utf-8"), add_bos=False, special=True)
            if not (toks and self.llm.is_eog(toks[0])):
                keep.append(s)
        return tuple(keep)

    # --- helpers ------------------------------------------------------------------------------
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
        if self.llm.is_eog(tok):
            return "stop"
        self.generated.append(tok)
        if self.lookup is not None:
            self.lookup.append(tok)
        self.pending += 1
        text, stopped = self.stops.feed(self.utf8.decode(self.llm.piece(tok)))
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
        if reuse > 0 and llm.kv_keep(reuse):
            lm.kv_tokens = lm.kv_tokens[:reuse]
        else:
            reuse = 0
            llm.kv_clear()
            lm.kv_tokens = []
        n_past = reuse
        rest = toks[reuse:]
        with self._abortable():
            for i in range(0, len(rest), llm.n_batch):
                chunk = rest[i : i + llm.n_batch]
                llm.decode(chunk, n_past, False)
                n_past += len(chunk)
                lm.kv_tokens.extend(chunk)
        return n_past, reuse

    @contextlib.contextmanager
    def _abortable(self) -> Iterator[None]:
        """Let cancel interrupt a long prefill inside llama.cpp (CPU backend checks it between graph nodes)."""
        with self.llm.abort_when(self.cancel.is_set):
            try:
                yield
            except RuntimeError:
                if self.cancel.is_set():
                    self.llm.kv_clear()
                    self.lm.kv_tokens = []
                    raise Cancelled from None
                raise

    # --- the loop -------------------------------------------------------------------------------
    def run(self, max_new: int) -> None:
        llm, lm = self.llm, self.lm
        llm.perf_reset()
        n_past, reused = self._prefill()
        tok = self.sampler.sample(-1)  # synchronizes: llama.cpp books the prompt's time here
        perf_prefill = llm.perf()
        self.sampler.reset_clock()  # the decode's sampling from here on (the first token's is the prefill's)
        stop_reason = "length" if max_new <= 0 else self._accept_token(tok)
        if self.lookup is not None and self.spec is not None:
            verify_threads(lm, self.spec.verify_threads)  # after the prefill, which keeps its own threads
        try:
            stop_reason, cancelled, n_past = self._decode_loop(tok, stop_reason, n_past, max_new)
        finally:
            if self.lookup is not None:
                verify_threads(lm, None)
        if self.lookup is not None:
            self.emit(ev.DraftProgress(ev.now_ns(), self.drafted, self.accepted, self.steps))
        perf_end = llm.perf()
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
                room = min(n_ctx - n_past - 1, max_new - len(self.generated) - 1, self.verify_batch - 1)
                draft = self.lookup.draft(room)
            batch = [tok, *draft]
            if n_past + len(batch) > n_ctx:
                stop_reason = "length"
                break
            self.flush()
            llm.decode(batch, n_past, bool(draft))
            self.steps += 1
            self.drafted += len(draft)
            lm.kv_tokens.extend(batch)
            n_past += len(batch)
            for i in range(len(batch)):
                tok = self.sampler.sample(i if draft else -1)
                stop_reason = self._accept_token(tok)
                hit = i < len(draft) and tok == draft[i]
                if hit:
                    self.accepted += 1
                if stop_reason is not None or not hit or len(self.generated) >= max_new:
                    # positions after i hold rejected (or unused) drafts: drop them from the cache
                    keep = n_past - len(batch) + i + 1
                    if keep < n_past:
                        llm.kv_keep(keep)
                        del lm.kv_tokens[keep:]
                        n_past = keep
                    break
            if self.lookup is not None and (t := ev.now_ns()) - self.progress_ns >= PROGRESS_NS:
                self.progress_ns = t
                self.emit(ev.DraftProgress(t, self.drafted, self.accepted, self.steps))
        return stop_reason, cancelled, n_past

    def _finish(self, stop_reason: str | None, cancelled: bool, reused: int, p1: Perf, p2: Perf) -> None:
        t_ns = ev.now_ns()
        tail = self.utf8.decode(b"", final=True) + self.stops.flush()
        if tail and not cancelled:
            self._emit_text(tail, t_ns)
        for kind, part in self.think.flush():
            self._emit_part(kind, part, t_ns)
        n_out = len(self.generated)
        lm = self.lm
        evaluated = p1.n_p_eval + p1.n_eval
        prefill_ms = p1.t_p_eval_ms + p1.t_eval_ms
        decode_ms = (p2.t_p_eval_ms + p2.t_eval_ms) - prefill_ms
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
            # llama.cpp's sampler chain over the decode (timed around its call): with decode_ms, the engine's
            # own share of each token, so TPOT minus both is what ttft's loop costs
            "sample_ms": round(self.sampler.ns / 1e6, 3),
            "sample_calls": self.sampler.calls,
            "n_p_eval": p2.n_p_eval,
            "t_p_eval_ms": round(p2.t_p_eval_ms, 3),
            "n_eval": p2.n_eval,
            "t_eval_ms": round(p2.t_eval_ms, 3),
            "kv_used_tokens": len(lm.kv_tokens),
            "kv_used_bytes": (lm.kv.bytes_per_token() * len(lm.kv_tokens)) if lm.kv else None,
            "speculative": None,
        }
        if self.spec:
            data["speculative"] = {
                **self.spec.as_dict(),
                "drafted": self.drafted,
                "accepted": self.accepted,
                "acceptance_rate": round(self.accepted / self.drafted, 4) if self.drafted else None,
            }
        for k in _INFO_IN_TIMINGS:
            data[k] = lm.info.get(k)
        self.emit(ev.Usage(t_ns, len(self.prompt_tokens), reused, n_out, self.reasoning_tokens))
        self.emit(ev.ServerTimings(t_ns, "llama.cpp", data))
        if cancelled:
            self.emit(ev.Cancelled(ev.now_ns()))
        else:
            self.emit(ev.Finished(ev.now_ns(), stop_reason))
