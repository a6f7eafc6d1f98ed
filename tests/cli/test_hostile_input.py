"""Hostile input: bad config files, bad option values and streams that
are not the API's end in one clear message, never a traceback, never a silent default; and a fuzz
test of every API's stream reader through the real SDKs over loopback."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from ttft.tui.cli import main

from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import one_turn
from tests.support.hostile_streams import (
    ALL_APIS,
    FIRST,
    HI_CHUNK,
    PAIRS,
    RawServer,
    hostile_body,
    outcome,
)
from tests.support.hostile_streams import backend as _backend
from tests.support.paths import ROOT


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No keys, no default model from outside; the config file's folder is returned."""
    conf = tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "TTFT_IN_PROCESS", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return conf


# --- item 10: the config file ------------------------------------------------------------------
GOOD_PROVIDER = '[providers.groq]\nkind = "compat"\nbase_url = "http://127.0.0.1:9/v1"\n'
BAD_CONFIGS: dict[str, tuple[bytes, str]] = {
    # name: (the file, what the one line must say besides the file's path)
    "malformed TOML": (b'default = "openai:x\n', "is not valid TOML"),
    "not UTF-8": (b'default = "openai:\xff"\n', "is not valid UTF-8 (byte 0xff"),
    "timeout not a number": (
        GOOD_PROVIDER.encode() + b'timeout = "abc"\n',
        "providers.groq.timeout: expected a number",
    ),
    "timeout not positive": (GOOD_PROVIDER.encode() + b"timeout = -3\n", "providers.groq.timeout: expected a number"),
    "headers not a table": (GOOD_PROVIDER.encode() + b'headers = "x"\n', "providers.groq.headers: expected a table"),
    "header value not a string": (GOOD_PROVIDER.encode() + b"headers = { X = 1 }\n", "providers.groq.headers.X"),
    "providers not a table": (b"providers = 5\n", "providers: expected a table of providers"),
    "base_url not a string": (b"[providers.groq]\nbase_url = 42\n", "providers.groq.base_url: expected a URL"),
    "default not a string": (b"default = 5\n", "default: expected a model spec"),
    "default unknown provider": (b'default = "nosuch:model"\n', "default: unknown provider 'nosuch'"),
    "default without model": (b'default = "openai:"\n', "default: The model spec 'openai:' has no model"),
    "typo in a provider": (
        GOOD_PROVIDER.encode() + b"timout = 5\n",
        "providers.groq.timout: unknown key; did you mean 'timeout'?",
    ),
    "typo at the top": (b'defualt = "openai:x"\n', "defualt: unknown key; did you mean 'default'?"),
    "kind unknown": (b'[providers.groq]\nkind = "grpc"\n', "providers.groq.kind: expected one of"),
    # [prices."PROVIDER:MODEL"]: a self-hosted model's prices (telemetry.cost)
    "prices not a table": (b"prices = 5\n", "prices: expected a table of prices"),
    "price not a number": (
        b'[prices."compat:x"]\ninput_per_mtok = "cheap"\noutput_per_mtok = 1\n',
        'prices."compat:x".input_per_mtok: expected a price in USD per million tokens',
    ),
    "price negative": (
        b'[prices."compat:x"]\ninput_per_mtok = 1\noutput_per_mtok = -2\n',
        'prices."compat:x".output_per_mtok: expected a price',
    ),
    "price infinite": (
        b"[prices.local]\ninput_per_mtok = inf\noutput_per_mtok = 0\n",
        "prices.local.input_per_mtok: expected a price",
    ),
    "price missing": (b'[prices."compat:x"]\ninput_per_mtok = 1\n', 'prices."compat:x".output_per_mtok: missing'),
    "price key typo": (
        b"[prices.local]\ninput_per_mtk = 1\noutput_per_mtok = 1\n",
        "prices.local.input_per_mtk: unknown key; did you mean 'input_per_mtok'?",
    ),
    "price of an unknown provider": (
        b'[prices."nosuch:m"]\ninput_per_mtok = 1\noutput_per_mtok = 1\n',
        "prices.\"nosuch:m\": unknown provider 'nosuch'",
    ),
    "price entry not a table": (b"[prices]\nlocal = 3\n", "prices.local: expected a table of prices"),
    # [local]: the local engine's knobs, checked as their flags are
    "local not a table": (b"local = 3\n", "local: expected a table ([local])"),
    "local key typo": (b"[local]\ngpu_layer = 0\n", "local.gpu_layer: unknown key; did you mean 'gpu_layers'?"),
    "local gpu_layers below -1": (b"[local]\ngpu_layers = -2\n", "local.gpu_layers: expected a number of layers"),
    "local gpu_layers a bool": (b"[local]\ngpu_layers = true\n", "local.gpu_layers: expected a number of layers"),
    "local threads zero": (b"[local]\nthreads = 0\n", "local.threads: expected a number of CPU threads"),
    "local threads text": (b'[local]\nthreads = "4"\n', "local.threads: expected a number of CPU threads"),
    "local flash_attn unknown": (b'[local]\nflash_attn = "yes"\n', 'local.flash_attn: expected "auto", "on" or "off"'),
    "local server_bin empty": (b'[local]\nserver_bin = ""\n', "local.server_bin: expected the path of a llama-server"),
}
COMMANDS = {
    "bare ttft": [],
    "chat": ["chat"],
    "ask": ["ask", "hi"],
    "ask -m": ["ask", "-m", "groq:m", "hi"],
    "models": ["models", "-m", "groq"],
    "compare": [
        "compare",
        "--headless",
        "-m",
        "compat:a",
        "-m",
        "compat:b",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "hi",
    ],
    "bench": ["bench", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--requests", "1"],
    "probe": ["probe", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--quick"],
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_a_bad_config_file_is_one_line_naming_file_key_and_expectation(
    case: str, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    content, expected = BAD_CONFIGS[case]
    (env / "config.toml").write_bytes(content)
    assert main(["ask", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "hi"]) == 2
    err = capsys.readouterr().err
    assert f"{env / 'config.toml'}: " in err and expected in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", ["malformed TOML", "not UTF-8", "timeout not a number", "default not a string"])
def test_every_command_that_reads_the_config_stops_with_exit_2(
    command: str, case: str, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (env / "config.toml").write_bytes(BAD_CONFIGS[case][0])
    assert main(COMMANDS[command]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ttft: ") and "config.toml" in err and "Traceback" not in err, err
    assert not (env.parent / "data").exists() or not list((env.parent / "data").rglob("*.jsonl"))  # no turn ran


def test_a_wrong_typed_default_never_falls_back_to_the_openai_api(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``default = 5`` is an error, not a fall-back to openai:gpt-4o-mini, which a set key sends for real."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing leaves the machine, whatever runs
    (env / "config.toml").write_text("default = 5\n")
    from ttft.backends.providers.registry import ProviderError, default_spec

    with pytest.raises(ProviderError, match="default: expected a model spec"):
        default_spec()
    assert main(["ask", "hi"]) == 2
    assert "openai" not in capsys.readouterr().out


def test_sessions_does_not_read_the_config(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Listing logged sessions needs no provider: a broken config file does not stop it."""
    from ttft.telemetry.log.turns import SessionLog

    from tests.support.turns import play, stream

    (env / "config.toml").write_bytes(b"[[[")
    SessionLog("20260102-030405-abcd").append(play(stream(visible=2)) | {"session_id": "20260102-030405-abcd"})
    assert main(["sessions"]) == 0
    out, err = capsys.readouterr()
    assert "20260102-030405-abcd" in out and "1 sessions in " in out, out
    assert err == ""  # not a word about the config: it was never read


def test_a_valid_config_still_resolves(env: Path) -> None:
    (env / "config.toml").write_text(
        'default = "groq"\n' + GOOD_PROVIDER + 'default_model = "m"\ntimeout = 7\nheaders = { "X-Title" = "ttft" }\n'
    )
    from ttft.backends.providers.registry import default_spec, resolve

    assert default_spec() == "groq"
    r = resolve("groq")
    assert (r.kind, r.model, r.timeout, r.headers) == ("compat", "m", 7.0, {"X-Title": "ttft"})


def test_config_prices_resolve_most_specific_first(env: Path) -> None:
    (env / "config.toml").write_text(
        GOOD_PROVIDER
        + "[prices.groq]\ninput_per_mtok = 1\noutput_per_mtok = 2\n"
        + '[prices."groq:big"]\ninput_per_mtok = 3\noutput_per_mtok = 4\ncached_input_per_mtok = 0.5\n'
        + "[prices.local]\ninput_per_mtok = 0\noutput_per_mtok = 0\n"
    )
    from ttft.backends.providers.registry import price_ref, resolve
    from ttft.telemetry.cost import Price

    big, other = price_ref(resolve("groq:big")), price_ref(resolve("groq:small"))
    assert big is not None and big.config == Price("groq:big", 3.0, 4.0, 0.5)
    assert other is not None and other.config == Price("groq", 1.0, 2.0)
    hosted = price_ref(resolve("openai:gpt-4o-mini"))
    assert hosted is not None and (hosted.config, hosted.provider_id) == (None, "openai")  # the table prices it
    # a loopback server is no hosted provider: not priced, and the table is not even imported for it
    assert price_ref(resolve("compat:x", base_url="http://127.0.0.1:9/v1")) is None
    groq = price_ref(resolve("groq:m", base_url="https://api.groq.com/openai/v1"))
    assert groq is not None and groq.config is not None  # its own config price wins over the table
    routed = price_ref(resolve("compat:m", base_url="https://openrouter.ai/api/v1"))
    assert routed is not None and (routed.provider_id, routed.api_url) == (None, "https://openrouter.ai/api/v1")


# --- item 12: option values --------------------------------------------------------------------
BAD_OPTIONS = [
    (["-m", ""], "model spec"),
    (["-m", "openai:"], "has no model after the colon"),
    (["-m", ":gpt"], "has no provider"),
    (["--max-output-tokens", "-5"], "must be at least 1"),
    (["--max-output-tokens", "0"], "must be at least 1"),
    (["--timeout", "0"], "above 0"),
    (["--timeout", "-1"], "above 0"),
    (["--timeout", "nan"], "finite"),
    (["--temperature", "nan"], "finite"),
    (["--temperature", "-1"], "0 or more"),
    (["--max-retries", "-1"], "0 or more"),
    (["--max-retries", "x"], "whole number"),
]


@pytest.mark.parametrize(("opts", "expected"), BAD_OPTIONS, ids=[" ".join(o) for o, _ in BAD_OPTIONS])
def test_ask_refuses_bad_values_at_the_edge(
    opts: list[str], expected: str, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = [] if opts[0] == "-m" else ["-m", "compat:x"]
    with pytest.raises(SystemExit) as exit_:
        main(["ask", *spec, "--base-url", "http://127.0.0.1:9/v1", *opts, "hi"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert expected in err and opts[0] in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "-m", "openai:"],
        ["chat", "--max-output-tokens", "-5"],
        ["chat", "--temperature", "nan"],
        ["compare", "--headless", "-m", "compat:a", "--max-output-tokens", "-5", "hi"],
        ["compare", "--headless", "-m", "compat:a", "--temperature", "inf", "hi"],
        ["bench", "-m", "openai:", "--requests", "1"],
        ["bench", "-m", "compat:x", "--max-output-tokens", "0"],
    ],
    ids=lambda a: " ".join(a),
)
def test_chat_compare_and_bench_refuse_them_too(argv: list[str], env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_good_values_still_pass(env: Path) -> None:
    from ttft.tui.cli import build_parser

    args = build_parser("ask").parse_args(
        [
            "ask",
            "-m",
            "compat:llama3:8b",
            "--timeout",
            "0.5",
            "--temperature",
            "0",
            "--max-retries",
            "0",
            "--max-output-tokens",
            "1",
            "hi",
        ]
    )
    assert (args.model, args.timeout, args.temperature, args.max_retries, args.max_output_tokens) == (
        "compat:llama3:8b",
        0.5,
        0.0,
        0,
        1,
    )


# --- item 12: streams that are not the API's -----------------------------------------------------
@pytest.fixture(scope="module")
def raw() -> Iterator[RawServer]:
    s = RawServer()
    yield s
    s.close()


@pytest.mark.parametrize("api", ["sdk", "lean"])
@pytest.mark.parametrize(
    "tail", ["[1,2,3]", "null", "5", '"x"', '{"choices":"x"}', '{"choices":[{"delta":{"content":7}}]}']
)
async def test_a_chunk_of_the_wrong_shape_is_a_malformed_stream(api: str, tail: str) -> None:
    with FakeServer(Schedule(raw_sse=HI_CHUNK.decode() + f"data: {tail}\n\n")) as srv:
        backend = _backend(api, srv.url)
        try:
            rec = await one_turn(backend, max_retries=0)
        finally:
            await backend.aclose()
    assert rec["status"] == "error" and rec["error"]["type"] == "malformed_stream", rec["error"]
    assert "not a Chat Completions event" in rec["error"]["message"] or "is not a string" in rec["error"]["message"]
    assert rec["answer"] == "Hi"  # what came before is kept


def test_ask_sdk_reports_a_wrong_shaped_chunk_as_malformed(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeServer(Schedule(raw_sse=HI_CHUNK.decode() + "data: [1,2,3]\n\n")) as srv:
        rc = main(
            ["ask", "--sdk", "--json", "-m", "compat:x", "--base-url", srv.openai_base_url, "--max-retries", "0", "hi"]
        )
    out = capsys.readouterr().out
    record = json.loads(out[out.index("{") :])
    assert rc == 1 and record["error"]["type"] == "malformed_stream" and record["answer"] == "Hi"
    assert "bug in ttft" not in (record["error"]["hint"] or "")


@pytest.mark.parametrize("api", ALL_APIS)
async def test_invalid_utf8_in_a_stream_is_a_malformed_stream(api: str, raw: RawServer) -> None:
    raw.content_type = "text/event-stream"
    raw.pieces = [HI_CHUNK, b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe"}}]}\n\n']
    backend = _backend(api, raw.url)
    try:
        rec = await one_turn(backend, max_retries=0)
    finally:
        await backend.aclose()
    assert rec["error"]["type"] == "malformed_stream" and "not valid UTF-8" in rec["error"]["message"], rec["error"]
    if api in ("sdk", "lean"):
        assert rec["answer"] == "Hi"


@pytest.mark.parametrize("api", ALL_APIS)
async def test_an_html_page_with_200_says_so(api: str, raw: RawServer) -> None:
    raw.content_type = "text/html; charset=utf-8"
    raw.pieces = [b"<!doctype html><html><body>Welcome to nginx!</body></html>\n"]
    backend = _backend(api, raw.url)
    try:
        rec = await one_turn(backend, max_retries=0)
    finally:
        await backend.aclose()
    assert rec["error"]["type"] == "malformed_stream", rec["error"]
    assert "HTML page, not an API response" in rec["error"]["message"] and "--base-url" in rec["error"]["hint"]


BAD_USAGE: dict[str, bytes] = {  # token counts that are not ints: the readers drop them, before the metrics
    "sdk": b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":"a","completion_tokens":[1]}}\n\ndata: [DONE]\n\n',
    "responses": b'data: {"type":"response.completed","response":{"id":"r","status":"completed","output":[],'
    b'"usage":{"input_tokens":"a","output_tokens":{"x":1}}}}\n\n',
    "messages": b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":"x","output_tokens_details":{"thinking_tokens":[]}}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
}
BAD_USAGE["lean"] = BAD_USAGE["sdk"]
BAD_USAGE["lean-responses"], BAD_USAGE["lean-messages"] = BAD_USAGE["responses"], BAD_USAGE["messages"]


@pytest.mark.parametrize("api", list(BAD_USAGE))
async def test_token_counts_of_the_wrong_type_are_dropped(api: str, raw: RawServer) -> None:
    raw.content_type = "text/event-stream"
    raw.pieces = [FIRST[api] + BAD_USAGE[api]]
    backend = _backend(api, raw.url)
    try:
        rec = await one_turn(backend, max_retries=0)
    finally:
        await backend.aclose()
    assert rec["status"] == "ok" and rec["answer"] == "Hi", rec["error"]
    assert all(v is None or type(v) is int for k, v in rec["tokens"].items() if k != "source"), rec["tokens"]


# --- fuzz: every API's stream reader ---------------------------------------------------------------
# Every body a fuzz has ever found a bug with, by API (its SDK path's name; each runs through the lean
# reader too), replayed as an explicit example before anything is drawn, on every run.
DEEP = b"[" * 129 + b"]" * 129  # one level past the JSON guard, which the lean readers applied and the SDKs did not
FOUND: dict[str, list[list[bytes]]] = {
    "sdk": [
        # a finish_reason that is not a string crashed the record (RecordError) on the SDK path (f358274)
        [FIRST["sdk"] + b'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":1}]}\n\n'],
        # a delta of 0 and a usage of the wrong shape: the lean path read them otherwise than the SDK (5bc2392)
        [FIRST["sdk"] + b'data: {"choices":[{"index":0,"delta":0}]}\n\n'],
        [FIRST["sdk"] + b'data: {"choices":[],"usage":{"prompt_tokens_details":5}}\n\n'],
        # bad UTF-8 in a comment, and in a last line with no blank line after it (5bc2392)
        [FIRST["sdk"] + b": \xff\n\n"],
        [FIRST["sdk"], b"data: \xff"],
        # an event nested past the guard: malformed on the lean path, read whole by the SDK's (after the
        # merge of the JSON guard; now every path leaves the deep part out, or refuses an event all nesting)
        [FIRST["sdk"] + b'data: {"x":' + DEEP + b"}\n\n"],
        [FIRST["sdk"] + b"data: " + DEEP + b"\n\n"],
    ],
    "responses": [
        # an error message that is an integer past 64 bits: the lean reader's orjson read it as a float
        # (-9.223372036854776e+18, where the SDK path said -9223372036854775809; issue 28, seed 7)
        [FIRST["responses"] + b'data: {"type":"error","message":-9223372036854775809}\n\n'],
        # the same for a token count, which the lean path then dropped as not an int
        [
            FIRST["responses"] + b'data: {"type":"response.completed","response":{"status":"completed",'
            b'"output":[],"usage":{"input_tokens":18446744073709551616,"output_tokens":2}}}\n\n'
        ],
        # a null or a list event: the SDK path took it for nothing, or for a finished answer (5bc2392)
        [FIRST["responses"] + b"data: null\n\n"],
        [FIRST["responses"] + b"data: []\n\n"],
        # a token count that is not an int crashed the metrics (c1c62b3)
        [
            FIRST["responses"] + b'data: {"type":"response.completed","response":{"status":"completed",'
            b'"output":[],"usage":{"input_tokens":"a","output_tokens":2}}}\n\n'
        ],
        [FIRST["responses"] + b'data: {"type":"response.output_text.delta","x":' + DEEP + b"}\n\n"],  # as for "sdk"
    ],
    "messages": [
        # an error event whose data is null: "(error: None)" on one path, "(error: null (path: /v1/messages))"
        # on the other, by the Anthropic SDK's version (issue 28)
        [FIRST["messages"] + b"event: error\ndata: null\n\n"],
        # an error event with no message: each SDK version words its own text; ttft words the body
        [FIRST["messages"] + b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}\n\n'],
        # bad UTF-8 in an event's name, and a null event (5bc2392)
        [FIRST["messages"] + b"event: \xff\ndata: {}\n\n"],
        [FIRST["messages"] + b"event: content_block_delta\ndata: null\n\n"],
        # a token count that is not an int crashed the metrics (c1c62b3)
        [FIRST["messages"] + b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":"x"}}\n\n'],
        [FIRST["messages"] + b'event: content_block_delta\ndata: {"type":"content_block_delta","x":' + DEEP + b"}\n\n"],
        # an error body nested past the guard: the lean path kept it as text, the SDK parsed it (its type lost)
        [
            FIRST["messages"] + b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":'
            b'"m","x":' + DEEP + b"}}\n\n"
        ],
    ],
}
FOUND["lean"], FOUND["lean-responses"], FOUND["lean-messages"] = FOUND["sdk"], FOUND["responses"], FOUND["messages"]


def pinned(api: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator: every body found for ``api``, as an explicit example of a hypothesis test of ``pieces``."""

    def pin(test: Callable[..., None]) -> Callable[..., None]:
        for pieces in FOUND[api]:
            test = example(pieces=pieces)(test)
        return test

    return pin


@pytest.fixture(scope="module")
def fuzz_loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.mark.parametrize("api", ALL_APIS)
def test_fuzz_every_stream_reader_ends_in_a_clean_record(
    api: str, raw: RawServer, fuzz_loop: asyncio.AbstractEventLoop
) -> None:
    backend = _backend(api, raw.url)

    @pinned(api)
    @settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(pieces=hostile_body(api))
    def check(pieces: list[bytes]) -> None:
        raw.content_type = "text/event-stream"
        raw.pieces = pieces
        rec = fuzz_loop.run_until_complete(one_turn(backend, max_retries=0))  # raises if anything escapes
        assert rec["status"] in ("ok", "error"), rec
        if rec["status"] == "error":
            assert rec["error"]["type"] and rec["error"]["message"]
            assert "bug in ttft" not in (rec["error"]["hint"] or ""), rec["error"]
        assert rec["answer"].startswith("Hi"), (rec["answer"], rec["error"])  # the partial answer is kept
        json.dumps(rec)  # the record can be logged as is

    try:
        check()
    finally:
        fuzz_loop.run_until_complete(backend.aclose())


NUMERIC_FINISH_REASON = (
    'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":1}]}\n\n'
    "data: [DONE]\n\n"
)


@pytest.mark.parametrize("reader", [[], ["--sdk"]])
def test_a_numeric_finish_reason_is_a_logged_malformed_stream(reader: list[str], tmp_path: Path) -> None:
    # Found by the fuzz test: on both readers the turn ends as a logged malformed_stream error with
    # what came kept, never a RecordError ("stop_reason is a number, which does not fit str").
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(tmp_path), "TTFT_CONFIG_DIR": str(tmp_path)}
    with FakeServer(Schedule(raw_sse=NUMERIC_FINISH_REASON)) as srv:
        p = subprocess.run(
            [sys.executable, "-m", "ttft.tui.cli", "ask", *reader, "-m", "compat:x", "--base-url", srv.openai_base_url,
             "--max-retries", "0", "--json", "hi"],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
        )  # fmt: skip
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 1, p.stderr
    rec = json.loads(p.stdout)
    assert rec["status"] == "error" and rec["error"]["type"] == "malformed_stream", rec["error"]
    assert "stop reason is not a string" in rec["error"]["message"] and rec["answer"] == "Hix"  # what came is kept
    logged = [json.loads(line) for f in (tmp_path / "sessions").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert [r["status"] for r in logged] == ["error"]


@pytest.mark.parametrize(("sdk", "lean"), PAIRS)
def test_fuzz_each_lean_reader_records_what_its_sdk_path_records(
    sdk: str, lean: str, raw: RawServer, fuzz_loop: asyncio.AbstractEventLoop
) -> None:
    """The same hostile bytes, through the SDK and through the lean reader: the same record, error words
    and all. The wide random run of this is ``tests/benchmarks/fuzz_readers.py``."""
    backends = _backend(sdk, raw.url), _backend(lean, raw.url)

    @pinned(sdk)
    @settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(pieces=hostile_body(sdk))
    def check(pieces: list[bytes]) -> None:
        raw.content_type = "text/event-stream"
        raw.pieces = pieces
        a, b = (fuzz_loop.run_until_complete(one_turn(backend, max_retries=0)) for backend in backends)
        assert outcome(b) == outcome(a)

    try:
        check()
    finally:
        for backend in backends:
            fuzz_loop.run_until_complete(backend.aclose())
