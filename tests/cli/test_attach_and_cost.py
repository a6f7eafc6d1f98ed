"""``ttft ask -a`` and each turn's cost, end to end (issue 23 items 5 and 6).

Done when: ``ttft ask -a pic.png -a notes.txt`` sends the image and the text in the OpenAI and
Anthropic shapes (asserted on the bytes the loopback server received), the record lists both without
their contents, ``cost.total_usd`` equals genai-prices' own figure for the same usage, and a model the
table does not know gets ``cost: null``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price

from tests.fakes import FakeServer, Schedule
from tests.support import files
from tests.support.paths import ROOT

SCHEDULE = Schedule(first_token_ms=10, token_ms=2, visible_tokens=5, input_tokens=1800, cached_tokens=1024)


@pytest.fixture(scope="module")
def srv():
    with FakeServer(SCHEDULE) as s:
        yield s


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL")}
    return {
        **base,
        "TTFT_DATA_DIR": str(data),
        "TTFT_CONFIG_DIR": str(conf),
        "PYTHONPATH": str(ROOT),
        "OPENAI_API_KEY": "sk-test",
        "ANTHROPIC_API_KEY": "k-test",
    }


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    pic, notes = tmp_path / "pic.png", tmp_path / "notes.txt"
    pic.write_bytes(files.png(300, 200))
    notes.write_text("quarterly figures: 17, 23, 42\n")
    return pic, notes


def _ask(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", "ask", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )


def _logged(env: dict[str, str]) -> str:
    return "".join(p.read_text() for p in Path(env["TTFT_DATA_DIR"], "sessions").glob("*.jsonl"))


@pytest.mark.parametrize(
    ("spec", "base", "api"),
    [
        ("openai:gpt-4o-mini", "openai_base_url", "chat.completions"),
        ("anthropic:claude-haiku-4-5", "url", "messages"),
    ],
)
def test_ask_sends_an_image_and_a_text_file_and_logs_neither(
    srv: FakeServer, env: dict[str, str], two_files: tuple[Path, Path], spec: str, base: str, api: str
) -> None:
    pic, notes = two_files
    p = _ask(env, "-m", spec, "--base-url", getattr(srv, base), "-a", str(pic), "-a", str(notes), "--json", "sum?")
    assert p.returncode == 0, p.stderr
    body = srv.requests[-1].body
    content = body["messages"][-1]["content"]
    data = base64.b64encode(pic.read_bytes()).decode()
    if api == "messages":
        assert content[0] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    else:
        assert content[0] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    assert content[1] == {"type": "text", "text": "notes.txt\n```\nquarterly figures: 17, 23, 42\n```"}
    assert content[2] == {"type": "text", "text": "sum?"}

    record = json.loads(p.stdout)
    assert [(a["name"], a["bytes"], a["media_type"]) for a in record["attachments"]] == [
        ("pic.png", pic.stat().st_size, "image/png"),
        ("notes.txt", notes.stat().st_size, "text/plain"),
    ]
    assert all(isinstance(a["est_tokens"], int) and a["est_tokens"] > 0 for a in record["attachments"])
    assert record["prompt"] == "sum?"
    for text in (p.stdout, _logged(env)):  # neither the record printed nor the log holds a file's contents
        assert "quarterly figures" not in text and data[:64] not in text
    assert "2 files attached" in p.stderr


def test_cost_is_genai_prices_figure_for_the_same_usage(srv: FakeServer, env: dict[str, str]) -> None:
    # (Anthropic's input_tokens leaves out its cache reads: the record's input adds them back)
    for spec, base, provider, input_tokens in (
        ("openai:gpt-4o-mini", srv.openai_base_url, "openai", 1800),
        ("openai-responses:gpt-4o-mini", srv.openai_base_url, "openai", 1800),
        ("anthropic:claude-haiku-4-5", srv.url, "anthropic", 1800 + 1024),
    ):
        p = _ask(env, "-m", spec, "--base-url", base, "--json", "hi")
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        tok = d["tokens"]
        assert (tok["input"], tok["cached_input"], tok["output"]) == (input_tokens, 1024, 5), (spec, tok)
        expected = calc_price(
            Usage(input_tokens=tok["input"], cache_read_tokens=tok["cached_input"], output_tokens=tok["output"]),
            model_ref=spec.split(":", 1)[1],
            provider_id=provider,
        )
        cost = d["cost"]
        assert cost["total_usd"] == float(expected.total_price), (spec, cost)
        assert (cost["input_usd"], cost["output_usd"]) == (float(expected.input_price), float(expected.output_price))
        assert cost["priced_as"] == f"{provider}:{expected.model.id}" and cost["source"].startswith("genai-prices 0.")
        # cached input priced as cached: below what the same input at the full input price costs
        full = calc_price(
            Usage(input_tokens=tok["input"], output_tokens=5), model_ref=spec.split(":", 1)[1], provider_id=provider
        )
        assert cost["input_usd"] < float(full.input_price)
        assert "cost $" in p.stderr


@pytest.mark.parametrize(
    ("spec", "why"),
    [("openai:gpt-x-unknown", "a model the table does not know"), ("compat:gpt-4o-mini", "a loopback compat server")],
)
def test_a_model_the_table_does_not_know_gets_null(srv: FakeServer, env: dict[str, str], spec: str, why: str) -> None:
    p = _ask(env, "-m", spec, "--base-url", srv.openai_base_url, "--json", "hi")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["tokens"]["source"] == "usage" and d["cost"] is None, why
    assert "cost" not in p.stderr


def test_a_config_price_prices_a_self_hosted_model(srv: FakeServer, env: dict[str, str]) -> None:
    Path(env["TTFT_CONFIG_DIR"], "config.toml").write_text(
        '[prices."compat:my-llama"]\ninput_per_mtok = 0.5\noutput_per_mtok = 2\ncached_input_per_mtok = 0.1\n'
    )
    p = _ask(env, "-m", "compat:my-llama", "--base-url", srv.openai_base_url, "--json", "hi")
    assert p.returncode == 0, p.stderr
    cost = json.loads(p.stdout)["cost"]
    assert cost["priced_as"] == "compat:my-llama" and cost["source"] == "config"
    assert cost["input_usd"] == pytest.approx(((1800 - 1024) * 0.5 + 1024 * 0.1) / 1e6)
    assert cost["output_usd"] == pytest.approx(5 * 2 / 1e6)
    assert cost["total_usd"] == pytest.approx(cost["input_usd"] + cost["output_usd"])


def test_files_that_cannot_go_are_refused_before_the_send_with_exit_2(
    srv: FakeServer, env: dict[str, str], two_files: tuple[Path, Path], tmp_path: Path
) -> None:
    pic, notes = two_files
    (tmp_path / "doc.pdf").write_bytes(b"%PDF-1.4\n")
    sent = len(srv.requests)
    cases = [
        (["-m", "openai:gpt-4o-mini", "-a", str(tmp_path / "missing.txt")], "missing.txt: no such file"),
        (["-m", "openai:gpt-4o-mini", "-a", str(tmp_path / "doc.pdf")], "is a PDF"),
        (
            ["-m", "local", "-a", str(notes), "-a", str(pic)],
            "pic.png: is an image, and the local engine takes text only",
        ),
        (["-m", "openai:gpt-3.5-turbo", "-a", str(pic)], "gpt-3.5-turbo takes text only"),
    ]
    for args, expected in cases:
        p = _ask(env, *args, "--base-url", srv.openai_base_url, "hi")
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith("ttft ask: -a ") and expected in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert len(srv.requests) == sent  # nothing went out
    assert not list(Path(env["TTFT_DATA_DIR"]).rglob("*"))  # and nothing was written: no turn, no session, no history


def test_a_file_alone_is_a_prompt(srv: FakeServer, env: dict[str, str], two_files: tuple[Path, Path]) -> None:
    _, notes = two_files
    p = _ask(env, "-m", "compat:m", "--base-url", srv.openai_base_url, "-a", str(notes), "--json")
    assert p.returncode == 0, p.stderr
    assert srv.requests[-1].body["messages"][-1]["content"] == "notes.txt\n```\nquarterly figures: 17, 23, 42\n```"


PROBE = """
import sys
from ttft.backends.providers.lean.chat import LeanChatBackend
seen = []
send = LeanChatBackend._send
async def spy(self, *a, **k):
    seen.append("genai_prices" in sys.modules)
    return await send(self, *a, **k)
LeanChatBackend._send = spy
from ttft.tui.cli import main
code = main(["ask", "-m", "openai:gpt-4o-mini", "--base-url", sys.argv[1], "-q", "hi"])
print("AT-SEND", seen, "AFTER", "genai_prices" in sys.modules, "EXIT", code)
"""


def test_the_price_table_is_imported_after_the_first_send(srv: FakeServer, env: dict[str, str]) -> None:
    """genai-prices costs 0.2-0.3 s to import: ``ask`` pays it after its answer, never before the send."""
    p = subprocess.run(
        [sys.executable, "-c", PROBE, srv.openai_base_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert "AT-SEND [False] AFTER True EXIT 0" in p.stdout, p.stdout + p.stderr


def test_a_bench_sums_what_its_requests_cost(srv: FakeServer, tmp_path: Path, monkeypatch, capsys) -> None:
    from ttft.tui.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
    out = tmp_path / "run"
    rc = main(
        ["bench", "-m", "openai:gpt-4o-mini", "--base-url", srv.openai_base_url, "--concurrency", "2",
         "--requests", "4", "--warmup", "1", "--out", str(out), "--quiet"]
    )  # fmt: skip
    assert rc == 0
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    measured = [t for t in turns if not t["extra"]["bench"]["warmup"]]
    assert len(measured) == 4 and all(t["cost"]["priced_as"] == "openai:gpt-4o-mini" for t in turns)
    total = sum(t["cost"]["total_usd"] for t in measured)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["levels"][0]["total_cost_usd"] == pytest.approx(total)
    assert summary["details"][0]["cost_usd"]["priced"] == 4
    printed = capsys.readouterr().out
    assert "cost: $" in printed and "for 4 requests" in printed
