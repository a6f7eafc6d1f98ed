"""A native crash never takes ttft down silently: the engine process is killed mid-answer, for real.

The local engine (the real default model) runs in its own process, for the chat and for
``ttft ask``; these tests send it SIGSEGV / SIGKILL while it streams and check that the turn
ends as a logged ``engine_crashed`` error that names the signal, keeps the partial answer
and its telemetry, and says what to try.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'ttft[local]')")

from ttft.backends.ask.isolated import ProcessBackend, crash_event
from ttft.backends.base import ChatRequest, Message
from ttft.backends.local.models import DEFAULT_MODEL
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry import events as ev
from ttft.telemetry.log.turns import SessionLog
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.settings import TurnSettings
from ttft.tui.widgets.error_card import ErrorCard

from tests.support.paths import ROOT

STORY = "Write a long story about a dragon who learns to sail."

pytestmark = [
    pytest.mark.local,
    pytest.mark.skipif(not DEFAULT_MODEL.installed(), reason=f"the default model ({DEFAULT_MODEL.package}) is missing"),
]


@pytest.fixture(autouse=True)
def _dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
    monkeypatch.delenv("TTFT_IN_PROCESS", raising=False)


def test_crash_event_names_the_signal_and_what_to_try() -> None:
    segv = crash_event(-signal.SIGSEGV, "engine")
    assert segv.error_type == "engine_crashed"
    assert "SIGSEGV" in segv.message and "segmentation fault" in segv.message and "engine" in segv.message
    assert segv.hint and "kept" in segv.hint
    oom = crash_event(-signal.SIGKILL, "engine")
    assert "SIGKILL" in oom.message and "out-of-memory" in oom.message and "memory" in (oom.hint or "")
    assert "SIGABRT" in crash_event(-signal.SIGABRT, "engine").message
    assert "status 3" in crash_event(3, "backend").message


async def _turn_killed_mid_answer(sig: int) -> tuple[dict, ProcessBackend]:
    backend = ProcessBackend("local")
    request = ChatRequest((Message("user", STORY),), TurnSettings(max_output_tokens=400, temperature=0.8))
    log = SessionLog()
    rec = new_recorder(backend, request, session_id=log.session_id, turn_index=0)
    seen = 0

    def on_event(e: ev.Event) -> None:
        nonlocal seen
        if isinstance(e, ev.TextDelta):
            seen += 1
            if seen == 3:  # mid-answer: the text has started and more is coming
                assert backend.pid is not None
                os.kill(backend.pid, sig)

    record = await run_turn(backend, request, rec, log=log, on_event=on_event)
    logged = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert logged[-1]["status"] == "error"
    return record.to_dict(), backend


async def test_sigsegv_mid_answer_is_a_logged_error_that_keeps_the_partial_answer() -> None:
    d, backend = await _turn_killed_mid_answer(signal.SIGSEGV)
    try:
        assert d["status"] == "error"
        err = d["error"]
        assert err["type"] == "engine_crashed"
        assert "SIGSEGV" in err["message"] and err["hint"]
        assert d["answer"]  # what streamed before the crash is kept ...
        assert d["metrics"]["ttft_ms"] is not None and d["chunks"]  # ... with its telemetry
        assert d["events_ms"]["first_token"] is not None
        # the chat's card says the same, in words
        card = ErrorCard._content(TurnRecord.from_dict(d)).plain
        assert "The engine process crashed" in card and "SIGSEGV" in card and "partial answer" in card
        # the next turn gets a fresh engine process and answers
        request = ChatRequest((Message("user", "Say hi."),), TurnSettings(max_output_tokens=8, temperature=0))
        after = [e async for e in backend.stream(request)]
        assert isinstance(after[-1], ev.Finished), after[-1]
    finally:
        await backend.aclose()


async def test_sigkill_is_reported_as_probably_the_oom_killer() -> None:
    d, backend = await _turn_killed_mid_answer(signal.SIGKILL)
    await backend.aclose()
    assert d["error"]["type"] == "engine_crashed"
    assert "SIGKILL" in d["error"]["message"] and "out-of-memory" in d["error"]["message"]
    assert d["answer"]


def _engine_child(parent: int, timeout_s: float = 60) -> int:
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in psutil.Process(parent).children(recursive=True):
            cmd = " ".join(c.cmdline())
            if "multiprocessing" in cmd and "resource_tracker" not in cmd:
                return c.pid
        time.sleep(0.05)
    raise AssertionError("no engine process appeared")


def test_ttft_ask_local_survives_kill_segv_on_its_engine(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TTFT_DATA_DIR": str(tmp_path / "data"),
        "TTFT_CONFIG_DIR": str(tmp_path / "conf"),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("TTFT_IN_PROCESS", None)
    cmd = [
        sys.executable,
        "-m",
        "ttft.tui.cli",
        "ask",
        "-m",
        "local",
        "--max-output-tokens",
        "400",
        "--temperature",
        "0.8",
    ]
    proc = subprocess.Popen([*cmd, STORY], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        engine = _engine_child(proc.pid)
        assert proc.stdout is not None
        got = b""
        deadline = time.monotonic() + 120
        while len(got) < 20 and time.monotonic() < deadline:  # the answer is streaming
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                got += os.read(proc.stdout.fileno(), 4096)
        assert got, "no answer text arrived"
        os.kill(engine, signal.SIGSEGV)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = err.decode()
    assert proc.returncode == 1, stderr
    assert "SIGSEGV" in stderr and "Traceback" not in stderr
    records = [
        json.loads(line)
        for f in (tmp_path / "data" / "sessions").glob("*.jsonl")
        for line in f.read_text().splitlines()
    ]
    assert len(records) == 1
    r = records[0]
    assert r["status"] == "error" and r["error"]["type"] == "engine_crashed"
    assert "SIGSEGV" in r["error"]["message"] and r["error"]["hint"]
    assert r["answer"] and (got + out).decode("utf-8", "replace").strip().startswith(r["answer"][:10].strip())
    assert r["metrics"]["ttft_ms"] is not None
