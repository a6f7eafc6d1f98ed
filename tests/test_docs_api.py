"""docs/api.md runs: its ```python blocks, in order and in one namespace as a reader would paste them,
against a loopback server that stands in for the page's ``http://127.0.0.1:8080/v1``."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.fakes.prefill_server import PrefillServer

PAGE = Path(__file__).resolve().parent.parent / "docs" / "api.md"
PAGE_URL = "http://127.0.0.1:8080/v1"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def blocks() -> list[str]:
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def test_the_page_has_examples_and_each_names_the_stand_in_address_only() -> None:
    found = blocks()
    assert len(found) >= 5
    urls = {u for b in found for u in re.findall(r"https?://[^\"' ]+", b)}
    assert urls == {PAGE_URL}  # an address the test does not replace would reach out


def test_every_example_on_the_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_api"}
    out = io.StringIO()
    with PrefillServer(base_ms=5, prefill_ms_per_token=0.01, token_ms=0.5) as srv:
        for i, code in enumerate(blocks()):
            source = code.replace(PAGE_URL, srv.base_url)
            with contextlib.redirect_stdout(out):
                exec(compile(source, f"docs/api.md block {i + 1}", "exec"), namespace)
    printed = out.getvalue()
    assert printed.startswith("ok\nTTFT ")  # the first example's record, as the page shows it
    assert "Unknown provider" in printed  # the error example caught ttft's own error
    # the conversation: its second turn on the first one's connection, with four messages kept
    assert re.search(r"\nok (new|reused) 2\nok reused 4\n", printed)  # the page's first turn may have opened it
    # tools offered (the stand-in model answers without calling one) and a file sent with the prompt
    assert "\nok ['model']\n" in printed and "\nok [('notes.txt', 'text/plain')]\n" in printed
    # the log read back: the first turn's session, its one turn typed, then as polars and DuckDB
    assert re.search(r"\n0 qwen3 TTFT [\d.]+ ms\n\d{8}-\d{6}-[0-9a-f]{6}\.jsonl 0 lines skipped\n", printed)
    assert "shape: (1, 4)" in printed and re.search(r"\n\[\(1, [\d.]+\)\]\n", printed)
    assert (tmp_path / "probe-out" / "probe.json").is_file()  # the probe example saved what --out writes
    assert "\n8 turns\n" in printed and printed.count(" TTFT p50 ") == 2  # the bench: 2 levels of 4 requests
    for name in ("summary.json", "turns.jsonl", "levels.csv"):  # the bench ran there and was copied
        assert (tmp_path / "bench-out" / name).is_file() and (tmp_path / "bench-copy" / name).is_file()
    assert "\nA compat:a 2 " in printed and "\nB compat:b 2 " in printed  # the comparison: 2 ok turns a pane
    assert len(list((tmp_path / "compare-out").glob("cmp-*"))) == 3  # its turns, summary and verdicts
    # the first turn's session and the comparison's; the log=False turns wrote none
    assert len(list((data / "sessions").glob("*.jsonl"))) == 2
