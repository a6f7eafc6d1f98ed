"""QA regression: a prompt longer than the local model's context is said plainly (real model, CPU)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytest.importorskip("llama_cpp")


def test_an_overlong_prompt_names_its_size_not_a_negative_limit(tmp_path: Path) -> None:
    # `ttft ask -m local "<5000 words>"` said "max output tokens (-934)", and ran its message into
    # its hint ("4096 tokens shorten the conversation (/clear)": the chat has no /clear).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TTFT_DATA_DIR": str(tmp_path), "TTFT_CONFIG_DIR": str(tmp_path)}
    p = subprocess.run(
        [sys.executable, "-m", "tui.cli", "ask", "-m", "local", "word " * 5000],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("error:"))
    assert re.search(r"the prompt \(\d{4} tokens\) exceeds the context of \d+ tokens", line), line
    assert not re.search(r"\(-\d+\)", line) and "/clear" not in line, line
    assert "tokens, leaving no room to answer. Start a new chat (ctrl+n)" in line, line


def test_error_line_keeps_message_and_hint_apart() -> None:
    from telemetry.record import ErrorInfo
    from tui.commands.ask import error_line

    # the local engine's messages and hints are clauses without full stops
    e = ErrorInfo("model_load", "llama.cpp could not load m.gguf: bad magic", hint="the file may be truncated")
    assert error_line(e) == "error: llama.cpp could not load m.gguf: bad magic. The file may be truncated"
    said = ErrorInfo("auth", "No API key for openai.", hint="export OPENAI_API_KEY=...")
    assert error_line(said) == "error: No API key for openai. export OPENAI_API_KEY=..."  # as written
    assert error_line(ErrorInfo("x", "boom", hint=None)) == "error: boom"
