"""backends.local: what a load decides from its log (flash attention, the graph's devices) and its default threads.

The GPU lines are in the formats llama.cpp's ``llama_context::resolve_fused_ops`` and ``sched_reserve``
print them (vendor/llama.cpp/src/llama-context.cpp); the CPU run's own log is checked against a real
load in test_placement."""

from __future__ import annotations

from ttft.backends.local.engine import flash_attn_resolved, layers_split
from ttft.backends.local.loadlog import LoadLog

CPU_AUTO = (
    "llama_context: flash_attn            = auto\n"
    "resolve_fused_ops: Flash Attention enabled\n"
    "sched_reserve: graph: nodes = 1029, splits = 1, input objects = 4, input tensors = 5\n"
)
GPU_WITHOUT_KERNELS_AUTO = (
    "llama_context: flash_attn            = auto\n"
    "resolve_fused_ops: layer 0 is assigned to device CUDA0 but Flash Attention is assigned to device CPU"
    " (usually due to missing support)\n"
    "resolve_fused_ops: Flash Attention not supported, set to disabled\n"
    "sched_reserve: graph (pp bs=512, tg bs=1): nodes = 1000 / 998, splits = 2 / 2, input objects = 4 / 4,"
    " input tensors = 5 / 5\n"
)
GPU_WITHOUT_KERNELS_FORCED = (
    "llama_context: flash_attn            = enabled\n"
    "sched_reserve: graph (pp bs=512, tg bs=1): nodes = 1029 / 1027, splits = 64 / 63, input objects = 4 / 4,"
    " input tensors = 5 / 5\n"
)


def log(text: str) -> LoadLog:
    return LoadLog(lines=text.splitlines(keepends=True))


def test_auto_on_the_cpu_enables_flash_attention() -> None:
    lg = log(CPU_AUTO)
    assert (lg.flash_attn_auto(), lg.flash_attn_mismatch(), lg.graph_splits()) == (True, None, (1, 1))
    assert flash_attn_resolved("auto", lg.flash_attn_auto()) is True


def test_auto_without_kernels_for_the_device_turns_it_off_and_says_why() -> None:
    lg = log(GPU_WITHOUT_KERNELS_AUTO)
    assert lg.flash_attn_auto() is False
    assert lg.flash_attn_mismatch() == (
        "layer 0 is assigned to device CUDA0 but Flash Attention is assigned to device CPU"
    )
    assert lg.graph_splits() == (2, 2)
    assert layers_split(31, lg.graph_splits()) is False  # attention stayed with the layers, without flash


def test_forced_flash_attention_without_kernels_shows_as_a_graph_cut_at_every_layer() -> None:
    lg = log(GPU_WITHOUT_KERNELS_FORCED)
    assert lg.flash_attn_auto() is None  # llama.cpp did not check: it was told
    assert flash_attn_resolved("on", lg.flash_attn_auto()) is True
    assert lg.graph_splits() == (64, 63)
    assert layers_split(31, lg.graph_splits()) is True


def test_what_cannot_be_told_is_none() -> None:
    assert layers_split(0, (1, 1)) is None  # nothing offloaded
    assert layers_split(2, (9, 9)) is None  # too few layers to tell a cut per layer from a partial offload
    assert layers_split(31, None) is None  # no graph line
    assert log("").graph_splits() is None and log("").flash_attn_auto() is None
    assert flash_attn_resolved("off", None) is False and flash_attn_resolved("auto", None) is None


def test_the_default_threads_leave_a_cpu_for_the_ui_and_never_pass_the_physical_cores(monkeypatch) -> None:
    import os

    import psutil
    from ttft.backends.local.engine import default_threads

    for logical, physical, expected in ((1, 1, 1), (2, 2, 1), (4, 2, 2), (8, 8, 7), (16, 8, 8), (2, 32, 1)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=logical: set(range(n)), raising=False)
        monkeypatch.setattr(psutil, "cpu_count", lambda logical=True, p=physical: p)
        assert default_threads() == expected, (logical, physical)
