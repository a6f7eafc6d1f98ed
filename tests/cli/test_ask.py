"""``ttft ask`` / ``ttft models`` end to end: an example command per API against a loopback server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ttft.backends.providers.registry import ProviderError, create_backend, default_spec, list_models, parse_spec
from ttft.telemetry.record import ErrorInfo
from ttft.tui.cli import main
from ttft.tui.commands.ask import error_line

from tests.fakes import FakeServer, Schedule
from tests.support.paths import ROOT


@pytest.fixture
def env(tmp_path, monkeypatch):
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return {**os.environ, "TTFT_DATA_DIR": str(data), "TTFT_CONFIG_DIR": str(conf), "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def srv():
    with FakeServer(Schedule(first_token_ms=30, token_ms=5, reasoning_tokens=3, visible_tokens=6)) as s:
        yield s


def _ttft(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", *args], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def _log_lines(env: dict) -> list[dict]:
    files = sorted(Path(env["TTFT_DATA_DIR"], "sessions").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_issue_example_commands(srv: FakeServer, env: dict) -> None:
    cases = [
        ({"OPENAI_API_KEY": "sk-test"}, ["-m", "openai:gpt-x", "--base-url", srv.openai_base_url], "chat.completions"),
        (
            {"ANTHROPIC_API_KEY": "k"},
            [
                "-m",
                "anthropic:claude-x",
                "--base-url",
                srv.url,
                "--thinking-budget",
                "2048",
                "--thinking-display",
                "omitted",
            ],
            "messages",
        ),
        (
            {"OPENAI_API_KEY": "sk-test"},
            ["-m", "openai-responses:gpt-x", "--base-url", srv.openai_base_url, "--reasoning-effort", "low"],
            "responses",
        ),
        ({}, ["-m", "compat:some-model", "--base-url", srv.openai_base_url], "chat.completions"),
    ]
    for extra_env, args, api in cases:
        p = _ttft({**env, **extra_env}, "ask", *args, "--json", "hi")
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        assert d["schema"] == "ttft.turn/2" and d["status"] == "ok" and d["api"] == api
        assert d["answer"] == Schedule(visible_tokens=6).visible_text() and d["tokens"]["source"] == "usage"
        assert "TTFT" in p.stderr and "Traceback" not in p.stderr
    body = [r.body for r in srv.requests if r.path.endswith("/messages")][-1]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048, "display": "omitted"}
    assert [r.body for r in srv.requests if r.path.endswith("/responses")][-1]["reasoning"] == {"effort": "low"}
    logged = _log_lines(env)
    assert len(logged) == 4 and {r["api"] for r in logged} == {"chat.completions", "messages", "responses"}


def test_plain_output_and_options(srv: FakeServer, env: dict, capsys) -> None:
    os.environ["OPENAI_API_KEY"] = "sk-test"
    rc = main(
        [
            "ask",
            "-m",
            "openai:gpt-x",
            "--base-url",
            srv.openai_base_url,
            "--system",
            "be brief",
            "--temperature",
            "0.2",
            "--max-output-tokens",
            "50",
            "--max-retries",
            "0",
            "--no-stream",
            "hello",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0 and out == Schedule(visible_tokens=6).visible_text() + "\n"
    assert err.count("\n") == 1 and "TTFT" in err and "not streamed" in err
    body = srv.requests[-1].body
    assert body["messages"][0] == {"role": "system", "content": "be brief"} and body["temperature"] == 0.2
    assert body["max_completion_tokens"] == 50 and body["stream"] is False


def test_error_exit_code_record_and_no_key_leak(srv: FakeServer, env: dict) -> None:
    key = "sk-live-TOPSECRET987654321"
    srv.schedule = Schedule(fail_status=401, fail_message=f"Incorrect API key provided: {key}")
    try:
        p = _ttft(
            {**env, "OPENAI_API_KEY": key},
            "ask",
            "-m",
            "openai:gpt-x",
            "--base-url",
            srv.openai_base_url,
            "--json",
            "hi",
        )
    finally:
        srv.schedule = Schedule(first_token_ms=30, token_ms=5, reasoning_tokens=3, visible_tokens=6)
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert d["status"] == "error" and d["error"]["type"] == "auth" and d["error"]["status_code"] == 401
    assert p.stderr.startswith("error: ") and "Traceback" not in p.stderr
    log_text = "".join(f.read_text() for f in Path(env["TTFT_DATA_DIR"]).rglob("*.jsonl"))
    for text in (p.stdout, p.stderr, log_text):
        assert key not in text and "TOPSECRET" not in text


def test_missing_key_is_a_recorded_error(env: dict) -> None:
    p = _ttft(env, "ask", "-m", "anthropic:claude-x", "hi")
    assert p.returncode == 1 and "ANTHROPIC_API_KEY" in p.stderr and "Traceback" not in p.stderr
    (rec,) = _log_lines(env)
    assert rec["status"] == "error" and rec["error"]["type"] == "missing_key"


def test_interrupt_exits_130_and_logs_cancelled(env: dict) -> None:
    with FakeServer(Schedule(first_token_ms=10, token_ms=50, visible_tokens=400)) as s:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ttft.tui.cli", "ask", "-m", "compat:m", "--base-url", s.openai_base_url, "hi"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert s.wait_for(lambda r: r.chunks_sent >= 3, timeout=30) is not None
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert s.wait_for(lambda r: r.disconnected, timeout=5) is not None
    assert out.startswith("w00 w01") and "cancelled" in err and "Traceback" not in err
    (rec,) = _log_lines(env)
    assert rec["status"] == "cancelled" and rec["answer"].startswith("w00 w01")


def test_models_command(srv: FakeServer, env: dict) -> None:
    p = _ttft(env, "models", "-m", "compat", "--base-url", srv.openai_base_url)
    assert p.returncode == 0 and p.stdout.split() == ["fake-model", "fake-reasoner"]
    assert list_models("anthropic", srv.url, api_key="k") == ["fake-model", "fake-reasoner"]
    p = _ttft(env, "models", "-m", "compat")
    assert p.returncode == 2 and "--base-url" in p.stderr  # an incomplete command line: a usage error


def test_providers_config_and_defaults(env: dict, srv: FakeServer, monkeypatch) -> None:
    assert parse_spec("compat:llama3:8b") == ("compat", "llama3:8b")
    assert default_spec() == "local"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert default_spec().startswith("anthropic:")
    Path(env["TTFT_CONFIG_DIR"], "config.toml").write_text(
        'default = "mine:m1"\n[providers.mine]\nkind = "compat"\n'
        f'base_url = "{srv.openai_base_url}"\napi_key_env = "MINE_KEY"\ndefault_model = "m1"\n'
        'headers = { "X-Title" = "ttft" }\n'
    )
    assert default_spec() == "mine:m1"
    monkeypatch.setenv("MINE_KEY", "sk-mine-1234567")
    b = create_backend("mine")
    assert (b.provider, b.model, b.base_url) == ("mine", "m1", srv.openai_base_url)
    p = _ttft({**env, "MINE_KEY": "sk-mine-1234567"}, "ask", "-m", "mine", "--json", "hi")
    assert p.returncode == 0, p.stderr
    assert srv.requests[-1].headers["x-title"] == "ttft"
    assert srv.requests[-1].headers["authorization"] == "Bearer sk-mine-1234567"
    assert "sk-mine" not in p.stdout
    with pytest.raises(ProviderError, match="Unknown provider"):
        create_backend("nope:x")
    with pytest.raises(ProviderError, match="base-url"):
        create_backend("compat:x")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as exc:
        create_backend("openai:gpt-x")
    assert exc.value.kind == "missing_key"


def test_the_error_line_keeps_message_and_hint_apart() -> None:
    # the local engine's messages and hints are clauses without full stops; a provider's are
    # sentences, written as they came
    e = ErrorInfo("model_load", "llama.cpp could not load m.gguf: bad magic", hint="the file may be truncated")
    assert error_line(e) == "error: llama.cpp could not load m.gguf: bad magic. The file may be truncated"
    said = ErrorInfo("auth", "No API key for openai.", hint="export OPENAI_API_KEY=...")
    assert error_line(said) == "error: No API key for openai. export OPENAI_API_KEY=..."  # as written
    assert error_line(ErrorInfo("x", "boom", hint=None)) == "error: boom"


# --- tool calls (issue 23, item 7) -----------------------------------------------------------------
TOOL_CALLS = (("get_weather", '{"city": "Paris"}'), ("get_time", '{"tz": "UTC"}'))
TOOL_APIS = {  # -m, base URL of the fake server, the answer's finish reason
    "compat": ("compat:fake-model", "/v1", "tool_calls"),
    "openai-responses": ("openai-responses:fake-model", "/v1", "completed"),
    "anthropic": ("anthropic:fake-model", "", "tool_use"),
}


@pytest.mark.parametrize("api", list(TOOL_APIS))
@pytest.mark.parametrize("sdk", [False, True], ids=["lean", "sdk"])
def test_ask_prints_each_tool_call_on_its_own_line(env: dict, api: str, sdk: bool) -> None:
    spec, suffix, stop = TOOL_APIS[api]
    keyed = {**env, "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-test"}
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=2, tool_calls=TOOL_CALLS)) as s:
        p = _ttft(keyed, "ask", "-m", spec, "--base-url", s.url + suffix, *(["--sdk"] if sdk else []), "weather?")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ('w00 w01 \ntool call: get_weather({"city": "Paris"})\ntool call: get_time({"tz": "UTC"})\n')
    assert f"2 tool calls (finish_reason {stop})" in p.stderr.splitlines()[-1]
    (rec,) = _log_lines(env)
    assert rec["tool_calls"] == [{"name": n, "arguments": a} for n, a in TOOL_CALLS] and rec["stop_reason"] == stop


def test_ask_on_a_tool_only_answer_prints_the_call_and_json_keeps_it(env: dict) -> None:
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=0, tool_calls=TOOL_CALLS[:1])) as s:
        p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", s.openai_base_url, "weather?")
        assert p.returncode == 0, p.stderr
        assert p.stdout == 'tool call: get_weather({"city": "Paris"})\n'  # not an empty answer
        p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", s.openai_base_url, "--json", "weather?")
    d = json.loads(p.stdout)
    assert d["answer"] == "" and d["stop_reason"] == "tool_calls" and d["status"] == "ok"
    assert d["tool_calls"] == [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]


LOCAL_FLAG_CASES = {
    "ask": ["ask", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--threads", "2", "hi"],
    "chat": ["chat", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--gpu-layers", "0"],
    "compare": [
        "compare", "--headless", "-m", "compat:a", "-m", "compat:b", "--base-url", "http://127.0.0.1:9/v1",
        "--flash-attn", "off", "hi",
    ],
    "probe": ["probe", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--quick", "--threads", "2"],
    "bench": ["bench", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--requests", "1", "--gpu-layers", "0"],
    "bench --server-bin": [
        "bench", "-m", "local", "--requests", "1", "--server-bin", "/usr/bin/true",
    ],
}  # fmt: skip


@pytest.mark.parametrize("case", list(LOCAL_FLAG_CASES))
def test_the_local_engines_flags_are_refused_where_nothing_would_use_them(
    case: str, env: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """Taken and ignored, --threads on a hosted model would let a user believe it applied: exit 2, one line,
    nothing sent and nothing logged (even with -q: an error is never quiet)."""
    assert main([*LOCAL_FLAG_CASES[case], *(["-q"] if case in ("ask", "bench") else [])]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    flag = "--server-bin" if case.endswith("--server-bin") else next(a for a in LOCAL_FLAG_CASES[case] if a in (
        "--threads", "--gpu-layers", "--flash-attn"))  # fmt: skip
    assert flag in err and ("-m local-server" if "server-bin" in flag else "-m local") in err, err
    assert not list(Path(env["TTFT_DATA_DIR"]).glob("sessions/*.jsonl"))


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--threads", "0"], "--threads: must be at least 1"),
        (["--gpu-layers", "-2"], "--gpu-layers: must be 0 or more, or -1 for every layer"),
        (["--gpu-layers", "all"], "--gpu-layers: expected a whole number"),
        (["--flash-attn", "yes"], "--flash-attn: invalid choice"),
    ],
)
def test_a_bad_local_flag_is_refused_before_anything_runs(
    args: list[str], said: str, env: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["ask", "-m", "local", *args, "hi"])
    assert exc.value.code == 2 and said in capsys.readouterr().err


def test_a_local_turns_summary_says_its_load_apart_from_ttfts_own_delay_and_where_it_ran() -> None:
    from ttft.telemetry.record import TurnRecord
    from ttft.tui.commands.ask import summary_line

    engine = {"backend": "CPU", "layers_offloaded": 0, "n_layers": 30, "n_threads": 2, "flash_attn": True}
    rec = TurnRecord.from_dict(
        {
            "status": "ok", "provider": "local", "model": "smollm2", "turn_index": 0,
            "metrics": {"ttft_ms": 80.0, "e2e_ms": 300.0, "load_ms": 1900.0, "own_delay_ms": 210.0},
            "tokens": {"output": 8, "source": "usage"},
            "server": {
                "model": {**engine, "llama_import_ms": 1600.0},
                "llama.cpp": {**engine, "flash_attn_requested": "auto", "prompt_eval_ms": 20.0, "decode_ms": 200.0},
            },
        }
    )  # fmt: skip
    line = summary_line(rec)
    assert "model load 1.9 s, llama.cpp import 1.6 s · on CPU, 2 threads, flash attn on (auto)" in line, line
    assert "ttft's own 210 ms before the send" in line
