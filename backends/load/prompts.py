"""The bench's synthetic text: unique prompts, shared prefixes and a trace's blocks, the same for the same seed.

Every bench request builds one, so drawing its ~120 words is per-request CPU inside the figures
being measured. The words are drawn exactly as ``random.Random.choice`` draws them (the same
text for the same seed, whichever way it is drawn, so runs on several machines with a shared seed agree), from
one ``getrandbits`` call rather than one call per word: a fifth of the CPU.
"""

from __future__ import annotations

import functools
import random
from operator import itemgetter

from ...telemetry.bench.workload.trace import BLOCK_TOKENS

# Short, common English words: about one token each in the usual BPE vocabularies.
_WORD_TEXT = """
time year people way day man thing woman life child world school state family student group country problem
hand part place case week company system program question work government number night point home water room
mother area money story fact month lot right study book eye job word business issue side kind head house
service friend father power hour game line end member law car city community name team minute idea kid body
back parent face others level office door health person art war history party result change morning reason
research girl guy moment air teacher force education foot boy age policy music market sense nation plan
college interest death experience effect use class control care field development role effort rate heart drug
show leader light voice wife police mind price report decision son view relationship town road arm difference
value building action model season society tax director position player record paper space ground form event
official matter center couple site project activity star table need court oil situation cost industry figure
street image phone data picture practice piece land product doctor wall patient worker news test movie north
love support technology step baby computer type attention film tree source organization hair window evidence
population truth song
"""
_WORDS = tuple(_WORD_TEXT.split())
_SIZE = len(_WORDS)
assert 1 < _SIZE <= 256, "draw_words reads each try from one byte"
# A try is an output's top k bits (k: the size's bit length), so its output's top byte shifted:
# the word for each top byte, and the top bytes whose try is rejected (>= the size).
_BY_TOP_BYTE = tuple(
    _WORDS[b >> (8 - _SIZE.bit_length())] if b >> (8 - _SIZE.bit_length()) < _SIZE else "" for b in range(256)
)
_REJECTED = bytes(b for b in range(256) if not _BY_TOP_BYTE[b])


def draw_words(rng: random.Random, n: int) -> list[str]:
    """``[rng.choice(_WORDS) for _ in range(n)]``, the same words, at a fraction of the calls.

    ``choice`` takes ``getrandbits(k)`` (k: the bit length of the list's size) until a value is
    below the size, and ``getrandbits(k)`` for k <= 32 is the top k bits of the generator's next
    32-bit output. ``getrandbits(32 * m)`` is its next m outputs, the first in the lowest bits:
    written little-endian, byte 4i+3 is output i's top byte, and the tries are in the same order.
    """
    out: list[str] = []
    while len(out) < n:
        m = (n - len(out)) * 9 // 8 + 8  # about one try in twelve is rejected (118 words of 128 values)
        tops = rng.getrandbits(32 * m).to_bytes(4 * m, "little")[3::4].translate(None, _REJECTED)
        if tops:
            out.extend(itemgetter(*tops, 0)(_BY_TOP_BYTE)[:-1])  # the 0: a tuple even for one try
    del out[n:]  # the tries past the n-th are drawn, unused: the generator is not used after
    return out


def synthetic_prompt(index: int, input_tokens: int, seed: int) -> str:
    """A unique prompt of about ``input_tokens`` tokens; the same (index, seed) gives the same text.

    It is random from its first word, so a server's prefix cache cannot skip the prefill.
    """
    rng = random.Random(f"ttft-bench-{seed}-{index}")
    tail = "Continue this list of words with more words."
    n = max(1, input_tokens - 10)
    return " ".join(draw_words(rng, n)) + ". " + tail


TEMPLATE_TOKENS = 10  # about what a chat template adds around a message: left out of the words drawn


@functools.lru_cache(maxsize=256)  # K prefixes a level, each drawn once rather than per request
def prefix_text(k: int, tokens: int, seed: int, salt: int = 0) -> str:
    """Shared prefix ``k``: ``tokens`` words, the same text for every request that starts with it.

    ``salt`` (the level) gives each level prefixes of its own, so a level's first requests find a
    cold cache whatever the level before it sent."""
    return " ".join(draw_words(random.Random(f"ttft-prefix-{seed}-{salt}-{k}"), max(1, tokens))) + "\n\n"


@functools.lru_cache(maxsize=8192)  # a trace's blocks recur (that is its prefix sharing): drawn once each
def block_text(hash_id: int, seed: int, salt: int = 0) -> str:
    """A trace's block ``hash_id``: BLOCK_TOKENS words, equal for equal ids (and the same salt)."""
    return " ".join(draw_words(random.Random(f"ttft-block-{seed}-{salt}-{hash_id}"), BLOCK_TOKENS)) + " "


def trace_prompt(hash_ids: tuple[int, ...], input_tokens: int, seed: int, salt: int = 0, index: int = 0) -> str:
    """A trace request's prompt: its blocks' text in order, cut to about ``input_tokens`` tokens.

    A request whose ids do not cover its length (fewer ids than blocks) gets blocks of its own for
    the rest, named by its ``index``: unique text, as a trace without ids means.
    """
    words = max(1, input_tokens - TEMPLATE_TOKENS)
    parts = []
    for b in range(-(-words // BLOCK_TOKENS)):
        if b < len(hash_ids):
            parts.append(block_text(hash_ids[b], seed, salt))
        else:  # no id for this block: one no other request shares
            parts.append(" ".join(draw_words(random.Random(f"ttft-own-{seed}-{salt}-{index}-{b}"), BLOCK_TOKENS)) + " ")
    whole = words // BLOCK_TOKENS
    rest = words - whole * BLOCK_TOKENS
    if rest:  # the last block is cut after `rest` words: the same words as the whole block starts with
        parts[whole] = " ".join(parts[whole].split(" ", rest)[:rest])
    return "".join(parts).rstrip()
