"""Where the local engine runs, against the REAL default model: GPU layers, threads and flash attention
as a user sets them (flags, settings, config), what llama.cpp chose, and the import of llama-cpp-python
(the GPU runtime's start on a GPU build) inside the load phase, never in ttft's own delay.

Runs on CPU-only machines as on GPU ones: what depends on the build is read from the build."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'ttft[local]')")

from ttft.backends.base import ChatRequest, Message
from ttft.backends.local import llama_adapter
from ttft.backends.local.engine import create, flash_attn_choice
from ttft.backends.local.models import DEFAULT_MODEL, LocalModelError
from ttft.telemetry import events as ev
from ttft.telemetry.errors import ErrorKind
from ttft.telemetry.settings import TurnSettings

from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.local,
    pytest.mark.skipif(not DEFAULT_MODEL.installed(), reason=f"the default model ({DEFAULT_MODEL.package}) is missing"),
]

SLOW_IMPORT_S = 4.0


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "config"))


def req(extra: dict[str, object] | None = None) -> ChatRequest:
    return ChatRequest((Message("user", "Hi"),), TurnSettings(max_output_tokens=2, temperature=0, extra=extra or {}))


async def collect(b, request: ChatRequest) -> list[ev.Event]:
    return [e async for e in b.stream(request)]


def loads(events: list[ev.Event]) -> list[dict]:
    return [e.info for e in events if isinstance(e, ev.ModelLoadFinished)]


async def test_flash_attention_is_llama_cpps_auto_and_the_record_says_what_it_chose() -> None:
    b = create(None, n_threads=1)
    try:
        events = await collect(b, req())
    finally:
        await b.aclose()
    (info,) = loads(events)
    assert info["flash_attn_requested"] == "auto"
    # On the CPU (and on a GPU whose build has the kernels) llama.cpp's auto turns it on; what it chose
    # comes from its own verdict in the load log, never from what was asked.
    assert isinstance(info["flash_attn"], bool)
    assert info["flash_attn"] is (info["flash_attn_reason"] is None)
    if info["backend"] == "CPU":
        assert info["flash_attn"] is True and info["layers_split"] is None
    assert isinstance(info["graph_splits"], int) and info["graph_splits"] >= 1
    timings = next(e for e in events if isinstance(e, ev.ServerTimings)).data
    assert timings["flash_attn"] is info["flash_attn"] and timings["flash_attn_requested"] == "auto"


async def test_a_turns_settings_choose_threads_layers_and_flash_attention_and_a_change_reloads() -> None:
    b = create(None, n_threads=1)
    try:
        first = await collect(b, req({"n_threads": 2, "n_gpu_layers": 0, "flash_attn": "off"}))
        same = await collect(b, req({"n_threads": 2, "n_gpu_layers": 0, "flash_attn": "off"}))
        other = await collect(b, req({"n_threads": 1, "n_gpu_layers": 0, "flash_attn": "on"}))
    finally:
        await b.aclose()
    (a,) = loads(first)
    assert (a["n_threads"], a["n_threads_batch"], a["n_gpu_layers"], a["layers_offloaded"]) == (2, 2, 0, 0)
    assert a["backend"] == "CPU" and (a["flash_attn_requested"], a["flash_attn"]) == ("off", False)
    assert loads(same) == []  # the same request: the loaded model serves it
    (c,) = loads(other)
    assert (c["n_threads"], c["flash_attn_requested"], c["flash_attn"]) == (1, "on", True)
    timings = next(e for e in other if isinstance(e, ev.ServerTimings)).data
    assert (timings["n_threads"], timings["n_gpu_layers"]) == (1, 0)


async def test_a_bad_engine_setting_fails_the_turn_with_a_clear_error() -> None:
    b = create(None, n_threads=1)
    try:
        events = await collect(b, req({"n_threads": 0}))
    finally:
        await b.aclose()
    failed = events[-1]
    assert isinstance(failed, ev.Failed) and failed.error_type == ErrorKind.BAD_SETTING
    assert "n_threads takes a whole number, at least 1, not '0'" in failed.message
    with pytest.raises(LocalModelError, match="flash_attn takes auto, on or off"):
        flash_attn_choice("yes")


def test_config_local_gives_the_engines_defaults_and_a_flag_wins(tmp_path: Path) -> None:
    from ttft.backends.providers.registry import create_backend

    conf = tmp_path / "config"
    conf.mkdir()
    (conf / "config.toml").write_text('[local]\ngpu_layers = 0\nthreads = 3\nflash_attn = "off"\n')
    b = create_backend("local")
    assert (b.n_gpu_layers, b.n_threads, b.flash_attn) == (0, 3, "off")
    b = create_backend("local", n_threads=2)
    assert (b.n_gpu_layers, b.n_threads, b.flash_attn) == (0, 2, "off")


def test_finding_llama_cpp_does_not_import_it() -> None:
    code = (
        "import sys; from ttft.backends.local import llama_adapter as a; "
        "print(a.available(), 'llama_cpp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.split() == ["True", "False"], out.stderr
    assert llama_adapter.available()


# A stand-in for a CUDA build: importing llama_cpp takes SLOW_IMPORT_S (the GPU runtime's start), finding it
# takes nothing. Every Python started with this on its path loads it (the engine's own process too).
SLOW_IMPORT = textwrap.dedent(
    f"""
    import importlib.abc, importlib.machinery, sys, time

    class _Slow(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "llama_cpp":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                real = spec.loader.exec_module
                def slow(module, _real=real):
                    time.sleep({SLOW_IMPORT_S})
                    _real(module)
                spec.loader.exec_module = slow
            return spec

    sys.meta_path.insert(0, _Slow())
    """
)


def test_ask_counts_the_llama_cpp_import_in_the_load_not_in_ttfts_own_delay(tmp_path: Path) -> None:
    """The issue's check too: ``ttft ask -m local --threads 2 --gpu-layers 0 --json`` records 2 and 0."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_IMPORT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "TTFT_DATA_DIR": str(tmp_path / "data"),
        "TTFT_CONFIG_DIR": str(tmp_path / "config"),
    }
    p = subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", "ask", "-m", "local", "--threads", "2", "--gpu-layers", "0",
         "--max-output-tokens", "4", "--json", "Hi"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    model, m = rec["server"]["model"], rec["metrics"]
    assert (model["n_threads"], model["n_gpu_layers"], model["layers_offloaded"]) == (2, 0, 0)
    assert (rec["server"]["llama.cpp"]["n_threads"], rec["server"]["llama.cpp"]["n_gpu_layers"]) == (2, 0)
    assert rec["settings"]["extra"] == {"n_gpu_layers": 0, "n_threads": 2}  # what was asked, beside what ran
    # the slow import is the load's, whole; ttft's own delay (process start -> send, less the load) is not
    assert model["llama_import_ms"] >= SLOW_IMPORT_S * 1000
    assert m["load_ms"] >= SLOW_IMPORT_S * 1000
    assert m["own_delay_ms"] < SLOW_IMPORT_S * 1000, m


def test_bench_on_the_local_engine_runs_the_threads_asked(tmp_path: Path) -> None:
    """``bench --threads`` was llama-server's only; on ``-m local`` every request's record says it ran them."""
    from ttft.tui.cli import main

    out = tmp_path / "run"
    rc = main(
        [
            "bench", "-m", "local", "--threads", "1", "--gpu-layers", "0", "--flash-attn", "off",
            "--concurrency", "1", "--requests", "2", "--warmup", "1", "--input-tokens", "16",
            "--max-output-tokens", "4", "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert rc == 0
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    ran = [t["server"]["llama.cpp"] for t in turns if t["status"] == "ok"]
    assert len(ran) >= 2
    assert {(r["n_threads"], r["n_gpu_layers"], r["flash_attn"]) for r in ran} == {(1, 0, False)}
    assert all(t["settings"]["extra"] == {"n_gpu_layers": 0, "n_threads": 1, "flash_attn": "off"} for t in turns)
