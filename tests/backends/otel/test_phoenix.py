"""The README's Arize Phoenix recipe against a real Phoenix: runs only where ``phoenix`` is importable
(``pip install arize-phoenix``; not part of the project's dev extra, it is a large install).

The REST shape read here (``/v1/projects/default/spans``: ``name``, ``span_kind``, ``context``,
``parent_id``, flat ``attributes``, ``events``) is Phoenix 20's."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# `phoenix serve` from this interpreter when phoenix is importable, else the `phoenix` command on PATH
# (installed on its own, e.g. with pipx: it pins many packages of its own).
if importlib.util.find_spec("phoenix") is not None:
    SERVE = [sys.executable, "-m", "phoenix.server.main", "serve"]
elif shutil.which("phoenix"):
    SERVE = [str(shutil.which("phoenix")), "serve"]
else:
    pytest.skip("Arize Phoenix is not installed (pip install arize-phoenix)", allow_module_level=True)

from tests.fakes import FakeServer, Schedule
from tests.support.paths import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read() or b"null")


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[str]:
    port, grpc = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
    }
    proc = subprocess.Popen(  # `phoenix serve`, as the README says
        SERVE,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                _get(f"{url}/v1/projects")
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("phoenix did not start within 120 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(20)


def test_a_turn_shows_in_phoenix_with_one_variable(phoenix: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "TTFT_DATA_DIR": str(tmp_path / "data"),
        "TTFT_CONFIG_DIR": str(tmp_path / "conf"),
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{phoenix}/v1/traces",  # the recipe's one variable
    }
    with FakeServer(Schedule(first_token_ms=40, token_ms=5, visible_tokens=8)) as srv:
        p = subprocess.run(
            [sys.executable, "-m", "ttft.tui.cli", "ask", "--json", "-m", "compat:fake-model", "--base-url",
             srv.openai_base_url, "hi"],
            env=env, capture_output=True, text=True, cwd=ROOT, timeout=120,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "OpenTelemetry" not in p.stderr, p.stderr  # delivered: traces only, no metrics endpoint asked for
    rec = json.loads(p.stdout)
    deadline = time.monotonic() + 30
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not spans:
        data = _get(f"{phoenix}/v1/projects/default/spans?limit=100").get("data") or []
        spans = [s for s in data if s.get("name") == "chat fake-model"]
        time.sleep(0.5)
    assert spans, "the turn's span did not reach Phoenix"
    (root,) = spans
    assert root["span_kind"] == "LLM"  # from openinference.span.kind: Phoenix shows it as a model call
    attrs = root["attributes"]
    assert attrs["gen_ai.usage.output_tokens"] == rec["tokens"]["output"] == attrs["llm.token_count.completion"]
    assert attrs["gen_ai.response.time_to_first_chunk"] == pytest.approx(rec["metrics"]["ttft_ms"] / 1000)
    assert {e["name"] for e in root["events"]} == {"gen_ai.first_token", "gen_ai.first_visible_token"}
    children = [s for s in data if s.get("parent_id") == root["context"]["span_id"]]
    assert "streaming" in {c["name"] for c in children}
