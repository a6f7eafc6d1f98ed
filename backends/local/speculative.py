"""Speculative decoding by prompt lookup: its settings, the drafter, and the check that a verify batch
computes the same logits as one-token steps (without which drafting would change the answer)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...telemetry.errors import ErrorKind
from .models import LocalModelError
from .state import Cancelled, LoadedModel

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# Replaying code-edit answers with measured batch costs (local_decode.py, section 4): drafts of 2-4 tokens
# are within a few % of each other, 6-8 lose (a CPU verify batch costs ~0.7 of a step per token); matches of
# 2 tokens draft more and keep fewer, 4 miss some.
SPEC_NUM_PRED = 4  # longest draft
SPEC_MIN_MATCH = 3  # shortest match of the context's tail worth a draft


@dataclass(frozen=True, slots=True)
class SpecSettings:
    """One turn's speculative settings, read from ``TurnSettings.speculative``; logged as they are here."""

    kind: str
    num_pred_tokens: int
    min_match: int
    verify_threads: int  # threads of a verify batch (one-token steps keep theirs)
    verify_batch: int | None  # None: as large as the batch check allows, up to num_pred_tokens + 1

    @classmethod
    def parse(cls, setting: dict[str, Any] | None) -> SpecSettings | None:
        if not setting:
            return None
        kind = setting.get("kind", "prompt-lookup")
        if kind != "prompt-lookup":
            raise LocalModelError(
                ErrorKind.BAD_SETTING, f"speculative kind {kind!r} is not supported", "use {'kind': 'prompt-lookup'}"
            )
        vb = setting.get("verify_batch")  # set it to skip the bit-identity check (output may then differ)
        vt = setting.get("verify_threads")
        return cls(
            kind=kind,
            num_pred_tokens=max(1, int(setting.get("num_pred_tokens", SPEC_NUM_PRED))),
            min_match=max(1, int(setting.get("min_match", SPEC_MIN_MATCH))),
            # a verify batch is compute-bound: by default every logical CPU (one-token steps keep theirs)
            verify_threads=max(1, int(vt) if vt is not None else os.cpu_count() or 1),
            verify_batch=int(vb) if vb is not None else None,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "num_pred_tokens": self.num_pred_tokens,
            "min_match": self.min_match,
            "verify_threads": self.verify_threads,
            "verify_batch": self.verify_batch,
        }


class PromptLookup:
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
        for p in reversed(self.at.get(tuple(seq[-n:]), [])[-self.MAX_CANDIDATES - 1 :]):
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


# --- the batch-invariance check -------------------------------------------------------------------
CHECK_TEXT = "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(add(i, i * 2))\n"
# The check runs over a short and a long cached prefix: llama.cpp's CPU kernels switch with the KV length
# too (on 2+ threads, flash attention splits a one-token step's KV across threads once the KV view, padded
# to 256 cells, reaches 512), and a batch computed one way while single steps go the other gives different
# logits. Measured on SmolLM2 135M with 2 threads: identical over a 20-token prefix, argmax changed over 500
# (1 thread: identical at any length). 280 cached tokens cross that line at the least prefill cost.
CHECK_PREFIXES = (4, 280)


def check_verify_batch(lm: LoadedModel, up_to: int, cancel: threading.Event, threads: int) -> None:
    """Largest verify batch whose logits are bit-identical to one-token decoding, checked on this build/model.

    Speculative decoding keeps a drafted token only if the model picks it at that
    position; that is lossless only if a batch computes the same logits as single
    steps. llama.cpp switches kernels with the batch size (weight repacking, flash
    attention tiles), the KV length and the thread count, so this is measured rather
    than assumed, once per model, over a short and a long context, with one-token steps
    and batches on the threads a speculative turn gives them (``verify_threads``).
    """
    import numpy as np

    llm = lm.llm
    if up_to <= lm.verify_checked:
        return
    lm.verify_threads = threads
    span = max(4, up_to)  # tokens decoded after each prefix: one at a time, then in batches of each size
    prefixes = [p for p in CHECK_PREFIXES if p + span < llm.n_ctx()]
    base = llm.tokenize(CHECK_TEXT.encode(), add_bos=False, special=False)
    toks = llm.tokenize(b"", add_bos=True, special=False)
    while len(toks) < prefixes[-1] + span:
        toks += base

    def steps(prefix: int, b: int) -> list[npt.NDArray[np.float32]]:
        """Logits of the span after ``prefix``, decoded in batches of ``b`` over the same cached prefix."""
        llm.kv_keep(prefix)
        rows = []
        for i in range(prefix, prefix + span, b):
            if cancel.is_set():
                raise Cancelled
            chunk = toks[i : min(i + b, prefix + span)]
            llm.decode(chunk, i, True)
            rows += [llm.logits(j) for j in range(len(chunk))]
        return rows

    sizes = list(range(max(2, lm.verify_checked + 1), up_to + 1))
    same = dict.fromkeys(sizes, True)
    lm.kv_tokens = []  # the check overwrites the cache
    try:
        llm.kv_clear()
        done = 0
        for prefix in prefixes:
            verify_threads(lm, None)  # the prefix is prefilled as a prompt is, once, then reused
            for i in range(done, prefix, llm.n_batch):
                llm.decode(toks[i : min(i + llm.n_batch, prefix)], i, False)
            done = prefix
            verify_threads(lm, threads)
            single = steps(prefix, 1)
            for b in sizes:
                if same[b]:
                    same[b] = all(np.array_equal(x, y) for x, y in zip(steps(prefix, b), single, strict=True))
            llm.kv_keep(prefix)
        for b in sizes:
            if lm.verify_batch_max < b - 1:
                break
            lm.verify_checked = b
            if not same[b]:
                lm.verify_checked = 1 << 30  # larger batches are not tried once one differs
                break
            lm.verify_batch_max = b
    finally:
        verify_threads(lm, None)
        llm.kv_clear()
        lm.kv_tokens = []


def verify_threads(lm: LoadedModel, threads: int | None) -> None:
    """Verify batches on ``threads`` (None: back to the load's threads); one-token steps keep theirs.

    llama.cpp runs a one-token decode on ``n_threads`` and any larger batch on
    ``n_threads_batch``. A verify batch gains from a second core (measured on 2 shared
    cores: a batch of 3 in 1.4 one-token steps instead of 2.3, when that core is free),
    a one-token step hardly (22 ms instead of 25). Single steps must stay as a turn
    without speculation runs them; on more than one thread they take a split-KV flash
    attention path over a 512+ cell KV view that no batch takes, which the check finds
    (it then allows no verify batch at all).
    """
    info = lm.info
    batch = info["n_threads_batch"] if threads is None else threads
    lm.llm.set_threads(info["n_threads"], batch)
