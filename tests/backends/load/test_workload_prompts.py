"""backends.load.prompts for workloads: shared prefixes and a trace's blocks, their text and its sharing."""

from __future__ import annotations

from ttft.backends.load.prompts import TEMPLATE_TOKENS, prefix_text, trace_prompt
from ttft.telemetry.bench.workload.trace import BLOCK_TOKENS


def test_a_prefix_is_the_same_text_for_its_requests_and_another_for_another_prefix_or_level() -> None:
    a = prefix_text(0, 256, seed=3)
    assert len(a.split()) == 256 and a.endswith("\n\n")
    assert a == prefix_text(0, 256, seed=3)
    assert a != prefix_text(1, 256, seed=3)
    assert a != prefix_text(0, 256, seed=3, salt=1)  # each level its own: it starts on a cold cache


def test_equal_hash_ids_give_equal_blocks_and_the_prompt_its_length() -> None:
    a = trace_prompt((5, 6, 7), 1300, seed=0).split()
    b = trace_prompt((5, 6, 8), 1300, seed=0).split()
    assert len(a) == 1300 - TEMPLATE_TOKENS
    assert a[: 2 * BLOCK_TOKENS] == b[: 2 * BLOCK_TOKENS]  # blocks 5 and 6 shared
    assert a[2 * BLOCK_TOKENS :] != b[2 * BLOCK_TOKENS :]
    short = trace_prompt((5,), 300, seed=0).split()
    assert short == a[: len(short)]  # a prompt ending inside a block has that block's first words


def test_blocks_without_ids_are_the_request_s_own() -> None:
    a = trace_prompt((), 700, seed=0, index=1).split()
    b = trace_prompt((), 700, seed=0, index=2).split()
    assert len(a) == 700 - TEMPLATE_TOKENS and a[:50] != b[:50]
    c = trace_prompt((9,), 1100, seed=0, index=1).split()
    assert c[:BLOCK_TOKENS] == trace_prompt((9,), 600, seed=0, index=2).split()[:BLOCK_TOKENS]
    assert trace_prompt((9,), 600, seed=0, salt=1).split()[:20] != c[:20]
