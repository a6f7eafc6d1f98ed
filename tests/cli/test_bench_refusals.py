"""``ttft bench`` refuses what it cannot honour before anything is sent, naming the limit or the flag:
absurd lengths, workloads past the context of the llama-server it starts, flags that would do nothing
for the target; and ``--ignore-eos`` reaches a compat server's request body, by the lean reader and
the SDK alike. Every case runs the real command line against the loopback batching fake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.batching_server import BatchingServer
from tests.fakes.schedule import Schedule
from tests.fakes.server import FakeServer


@pytest.fixture(autouse=True)
def _dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


@pytest.fixture(scope="module")
def server() -> BatchingServer:
    with BatchingServer(slots=8, token_ms=1, alpha=0.0, prefill_ms=1) as srv:
        yield srv


def bench(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """The exit code (argparse's usage errors included) and stderr of ``ttft bench ARGV``."""
    try:
        rc = main(["bench", *argv])
    except SystemExit as exc:
        rc = int(exc.code or 0)
    return rc, capsys.readouterr().err


def run_against(srv: BatchingServer, tmp_path: Path, *flags: str, model: str = "compat:fake") -> list[str]:
    return ["-m", model, "--base-url", srv.base_url, "--out", str(tmp_path / "run"), "--warmup", "0", *flags]


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--input-tokens", "100:1e12", "3,000,000,000,100 tokens (MEAN + 3 STDDEV)"),  # the spread
        ("--input-tokens", "1-20000000", "20,000,000 tokens"),
        ("--output-tokens", "20000000", "20,000,000 tokens"),
        ("--output-tokens", "1000:4000000", "12,001,000 tokens (MEAN + 3 STDDEV)"),
    ],
)
def test_a_length_past_the_cap_is_refused_naming_it_and_nothing_is_sent(
    server: BatchingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, named: str
) -> None:
    before = len(server.log)
    rc, err = bench(capsys, *run_against(server, tmp_path, flag, value, "--requests", "2"))
    assert rc == Exit.USAGE
    assert named in err and "ttft's cap of 10,000,000 tokens" in err, err
    assert len(server.log) == before and not (tmp_path / "run").exists()


def test_max_output_tokens_past_the_cap_is_refused(
    server: BatchingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = len(server.log)
    rc, err = bench(capsys, *run_against(server, tmp_path, "--max-output-tokens", "999999999999"))
    assert rc == Exit.USAGE and "--max-output-tokens 999,999,999,999 is past ttft's cap" in err
    assert "10,000,000 tokens" in err and len(server.log) == before


def test_a_conversation_whose_last_turn_passes_the_cap_is_refused_with_its_arithmetic(
    server: BatchingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each length fits alone; the fourth turn, carrying the three before it and their answers, does not."""
    before = len(server.log)
    flags = ("--input-tokens", "3000000", "--output-tokens", "100", "--turns", "4", "--requests", "4")
    rc, err = bench(capsys, *run_against(server, tmp_path, *flags))
    assert rc == Exit.USAGE
    assert "turn 4 of a conversation needs 12,000,400 tokens of context (12,000,300 of prompt, 100 of answer)" in err
    assert len(server.log) == before


def test_a_workload_past_the_local_servers_slot_context_is_refused_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--ctx 4096 --slots 4`` leaves each request 1,024 tokens: a 1,000-token prompt asking 64 more does
    not fit. Refused before llama-server is looked for (the model path given does not even exist)."""
    model = f"local-server:{tmp_path / 'absent.gguf'}"
    rc, err = bench(capsys, "-m", model, "--out", str(tmp_path / "run"), "--input-tokens", "1000", "--ctx", "4096")
    assert rc == Exit.USAGE
    assert "the context of each llama-server slot (--ctx 4096 over --slots 4): 1,024 tokens" in err, err
    assert "1,064 tokens of context" in err and "absent.gguf" not in err  # refused before the model is looked for
    rc, err = bench(capsys, "-m", model, "--out", str(tmp_path / "run2"), "--input-tokens", "900", "--slots", "2")
    assert "absent.gguf" in err and "tokens of context" not in err  # 2,048 a slot: it fits, and goes on to the model


def test_a_datasets_conversations_past_the_slot_context_are_left_out_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    rows = [{"prompt": "word " * 300}, {"prompt": "short one"}, {"prompt": "x" * 40_000}]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    model = f"local-server:{tmp_path / 'absent.gguf'}"
    rc, err = bench(capsys, "-m", model, "--out", str(tmp_path / "run"), "--dataset", str(data), "--ctx", "2048")
    # 512 a slot: the 10,000-token prompt does not fit; the 375-token one and the short one do
    assert f"left out 1 conversation of {data} longer than the context of each llama-server slot" in err, err
    assert "512 tokens; 2 kept" in err
    only_long = tmp_path / "long.jsonl"
    only_long.write_text(json.dumps(rows[2]) + "\n")
    rc, err = bench(capsys, "-m", model, "--out", str(tmp_path / "r2"), "--dataset", str(only_long), "--ctx", "2048")
    assert rc == Exit.USAGE and "the dataset's longest conversation (estimated) needs 10,064 tokens" in err


@pytest.mark.parametrize(
    ("flags", "model", "said"),
    [
        (("--slots", "8"), "compat:fake", "--slots sets the llama-server ttft starts with -m local-server"),
        (("--ctx", "8192"), "compat:fake", "--ctx sets the llama-server ttft starts with -m local-server"),
        (("--ignore-eos",), "openai:gpt-4o-mini", "--ignore-eos: the openai API has no ignore_eos"),
        (("--ignore-eos",), "anthropic:claude-haiku-4-5", "--ignore-eos: the anthropic API has no ignore_eos"),
        (("--ignore-eos",), "openai-responses:gpt-5-mini", "--ignore-eos: the openai-responses API has no"),
        (("--raw-stream",), "anthropic:claude-haiku-4-5", "--raw-stream reads Chat Completions"),
        (("--thinking-budget", "1024"), "compat:fake", "--thinking-budget is for the anthropic API"),
        (("--reasoning-summary", "auto"), "anthropic:claude-x", "--reasoning-summary is for the openai-responses API"),
        (("--capacity-limit", "8"), "compat:fake", "--capacity-limit shapes --find-capacity's search"),
        (("--attainment", "90"), "compat:fake", "--attainment shapes --find-capacity's search"),
        (("--max-in-flight", "8"), "compat:fake", "--max-in-flight caps an open loop's streams"),
    ],
)
def test_a_flag_that_would_do_nothing_for_the_target_is_an_error_and_nothing_is_sent(
    server: BatchingServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: tuple[str, ...],
    model: str,
    said: str,
) -> None:
    before = len(server.log)
    rc, err = bench(capsys, *run_against(server, tmp_path, *flags, "--requests", "2", "-q", model=model))
    assert rc == Exit.USAGE, err
    assert said in err  # with -q too
    assert len(server.log) == before and not (tmp_path / "run").exists()


def test_base_url_with_local_server_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = bench(capsys, "-m", "local-server", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r"))
    assert rc == Exit.USAGE and "--base-url: -m local-server loads the llama-server it starts" in err


def test_the_flags_that_apply_still_run(
    server: BatchingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checks refuse only what does nothing: --max-in-flight with --rate runs."""
    rc, err = bench(
        capsys, *run_against(server, tmp_path, "--rate", "50", "--max-in-flight", "2", "--requests", "3", "-q")
    )
    assert rc == Exit.OK, err


@pytest.mark.parametrize("reader", [(), ("--sdk",), ("--raw-stream",)], ids=["lean", "sdk", "raw-stream"])
def test_ignore_eos_reaches_a_compat_servers_request_body(
    server: BatchingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], reader: tuple[str, ...]
) -> None:
    before = len(server.log)
    flags = ("--ignore-eos", "--concurrency", "2", "--requests", "4", "--max-output-tokens", "5", "-q", *reader)
    rc, err = bench(capsys, *run_against(server, tmp_path, *flags))
    assert rc == Exit.OK, err
    sent = server.log[before:]
    assert len(sent) == 4 and all(e["ignore_eos"] is True and e["max_tokens"] == 5 for e in sent)
    record = json.loads((tmp_path / "run" / "turns.jsonl").read_text().splitlines()[0])
    assert record["settings"]["extra"]["ignore_eos"] is True  # the record says what shaped the answer's length
    # and without the flag, nothing is sent in its place
    before = len(server.log)
    rc, _ = bench(capsys, *run_against(server, tmp_path, "--requests", "2", "--out", str(tmp_path / "r2"), "-q"))
    assert rc == Exit.OK and all(e["ignore_eos"] is None for e in server.log[before:])


@pytest.mark.parametrize(
    ("schedule", "said"),
    [
        (
            Schedule(visible_tokens=8, claimed_output_tokens=5_000_000, first_token_ms=2, token_ms=1),
            "the server's usage claims more output tokens than its text holds on 3 of 3 requests (e.g. 5,000,000 "
            "tokens for",
        ),
        (
            Schedule(visible_tokens=8, usage=False, first_token_ms=2, token_ms=1),
            "3 of 3 requests' tokens are estimated (the server sent no usage; 4 characters a token)",
        ),
    ],
    ids=["usage-beyond-the-text", "estimated"],
)
def test_a_tokens_per_s_resting_on_counts_the_text_cannot_hold_or_on_estimates_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schedule: Schedule, said: str
) -> None:
    """A server claiming 5,000,000 tokens for 8 words makes a tokens/s no stream could carry: the level's
    line and the conclusion say what the figure rests on."""
    with FakeServer(schedule) as srv:
        rc = main(
            ["bench", "-m", "compat:fake", "--base-url", srv.openai_base_url, "--concurrency", "1", "--requests",
             "3", "--warmup", "0", "--out", str(tmp_path / "run")]
        )  # fmt: skip
    out = capsys.readouterr().out
    assert rc == Exit.OK
    assert f"tokens: {said}" in out  # under the level's row
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert said in summary["details"][0]["token_note"]
    assert "Token counts at 1 concurrent: " + said in summary["conclusion"]


def test_aiohttp_set_aside_for_a_proxy_is_said_with_q(
    server: BatchingServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--aiohttp`` speaks no proxy: with one set, the run reads over httpx2 through it, and says so even
    with -q (without --aiohttp, where nothing asked for another client, -q leaves the note out)."""
    from tests.fakes.forward_proxy import ForwardProxy

    for k in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(k, raising=False)
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        one = ("--concurrency", "1", "--requests", "2", "-q")
        rc, err = bench(capsys, *run_against(server, tmp_path, "--aiohttp", *one))
        assert rc == Exit.OK and "not over aiohttp (--aiohttp speaks no proxy)" in err
        assert len(proxy.requests) == 2  # it did go through the proxy
        rc, err = bench(capsys, *run_against(server, tmp_path / "b", *one))
        assert rc == Exit.OK and "proxy" not in err
