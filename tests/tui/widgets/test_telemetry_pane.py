"""tui.widgets.telemetry_pane: the after-turn text keeps every label apart from its value; a tool-using turn's
steps are numbered as the record counts them, and the live view says what happens now."""

from __future__ import annotations

from rich.text import Text
from ttft.telemetry import events as ev
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.recorder import Snapshot, TurnRecorder
from ttft.telemetry.settings import TurnSettings
from ttft.telemetry.steps import ApprovalStepRecord, ModelStepRecord, StepRecord, ToolStepRecord
from ttft.tui.widgets.telemetry_pane import LABEL_W, live_text, record_text, steps_rows

from tests.support.tui_support import MS, T0


def _record() -> dict:
    # the figures of a real turn against the loopback fake (reasoning streamed, then text)
    return {
        "status": "ok",
        "provider": "compat",
        "model": "qwen3",
        "turn_index": 0,
        "metrics": {
            "ttft_ms": 331.5,
            "ttfvt_ms": 934.0,
            "reasoning_delay_ms": 602.4,
            "reasoning_delay_estimated": False,
            "tpot_ms": 29.9,
            "decode_tokens_per_s": 33.5,
            "itl_ms": {"p50": 29.7, "p90": 37.7, "p95": 40.2, "p99": 44.3, "max": 49.4},
            "e2e_ms": 2692.1,
            "total_ms": 2693.0,
            "own_delay_ms": 23.2,
        },
        "tokens": {"input": 12, "cached_input": 0, "output": 80, "reasoning": 20, "source": "usage"},
        "diagnosis": "Responsive.",
    }


def test_every_label_is_apart_from_its_value() -> None:
    # "reasoning delay" is as long as the label column: a space still parts it from its value
    text = record_text(TurnRecord.from_dict(_record())).plain
    assert "reasoning delay 602 ms" in text
    for line in text.splitlines()[1:]:
        label = line[:LABEL_W]
        if label.strip() and len(line) > LABEL_W:
            assert label.endswith(" ") or line[LABEL_W] == " ", line


def test_the_servers_own_split_shows_beside_the_clients() -> None:
    d = _record()
    d["metrics"] |= {
        "server_queue_ms": 210.0,
        "server_ttft_ms": 95.5,
        "server_rest_ms": 26.0,
        "server_timing_source": "vllm",
        "server_reasoning_ttft_ms": 95.5,
        "server_content_ttft_ms": 690.0,
    }
    text = record_text(TurnRecord.from_dict(d)).plain
    assert "  server says  queue 210 ms · prefill 96 ms · rest 26 ms (vllm)" in text
    # vLLM's own reasoning / answer start beside the client's reasoning delay, to check it
    assert "reasoning from 96 ms, answer from 690 ms after scheduling" in text
    d["metrics"] |= {"server_queue_ms": None, "server_timing_source": "llama-server", "server_reasoning_ttft_ms": None}
    d["metrics"]["server_content_ttft_ms"] = None
    text = record_text(TurnRecord.from_dict(d)).plain
    assert "prompt 96 ms · rest 26 ms (llama-server: no queue figure)" in text and "answer from" not in text


def test_a_local_turn_says_where_its_layers_ran_and_what_the_load_spent_on_the_import() -> None:
    d = {**_record(), "provider": "local", "model": "smollm2-135m"}
    d["metrics"] = {**d["metrics"], "load_ms": 2210.0, "own_delay_ms": 190.0}
    engine = {"backend": "CUDA", "layers_offloaded": 31, "n_layers": 31, "n_threads": 8, "flash_attn": False}
    d["server"] = {
        "model": {**engine, "llama_import_ms": 1612.0},
        "llama.cpp": {**engine, "flash_attn_requested": "auto", "prompt_eval_ms": 9.1, "decode_ms": 100.0},
    }
    text = record_text(TurnRecord.from_dict(d)).plain
    assert "runs on        CUDA 31/31 layers, flash attn off (auto)" in text
    assert "model load     2.2 s (llama.cpp import 1.6 s)" in text
    assert "ttft's own" in text and "190 ms" in text  # both figures: the load apart from ttft's own delay


def _finished_step() -> Snapshot:
    """A model step that asked for a call in 2 ms: its speed, were it shown, would read in the thousands."""
    rec = TurnRecorder("s", 0, "compat", "chat.completions", "m", None, TurnSettings(), "hi")
    rec.feed(ev.Submitted(T0))
    rec.feed(ev.AttemptSent(T0 + MS, 1))
    rec.feed(ev.TextDelta(T0 + 10 * MS, "Let me look"))
    rec.feed(ev.TextDelta(T0 + 11 * MS, " that up."))
    rec.feed(ev.Finished(T0 + 12 * MS, "tool_calls"))
    return rec.snapshot(T0 + 900 * MS)


STEPS: list[StepRecord] = [ModelStepRecord(duration_ms=11.0, ttft_ms=9.0, status="ok", tool_calls=1)]


def test_while_the_person_is_asked_the_pane_says_so_and_shows_no_speed() -> None:
    asking = ApprovalStepRecord(name="search", duration_ms=880.0, answer=None)
    text = live_text(_finished_step(), steps=[*STEPS, asking]).plain
    assert "APPROVAL" in text and "waiting for your approval of search" in text
    assert "speed" not in text and " OK " not in text and "STEP" not in text


def test_while_a_tool_runs_the_pane_counts_the_step_and_shows_no_speed() -> None:
    running = ToolStepRecord(name="search", duration_ms=300.0, status="running")
    approved = ApprovalStepRecord(name="search", duration_ms=500.0, answer="once")
    text = live_text(_finished_step(), steps=[*STEPS, approved, running]).plain
    assert "STEP 2" in text and "running tool search" in text
    assert "speed" not in text and " OK " not in text


def test_the_rows_are_numbered_as_the_step_count_counts() -> None:
    steps = [
        *STEPS,
        ApprovalStepRecord(name="search", duration_ms=500.0, answer="once"),
        ToolStepRecord(name="search", duration_ms=30.0, status="ok", result_bytes=10),
        ModelStepRecord(duration_ms=40.0, ttft_ms=9.0, status="ok"),
    ]
    t = Text()
    steps_rows(t, steps)
    labels = [line[:LABEL_W].strip() for line in t.plain.splitlines()]
    assert labels == ["1 model", "asked", "2 tool", "3 model"]
    many = Text()
    steps_rows(many, [*steps, *([steps[1], steps[2]] * 8)])  # 20 rows, 11 of them approvals
    assert many.plain.splitlines()[-1].strip() == "… 4 more steps"  # 12 rows shown; the 4 tool steps after


def test_a_proxied_apps_session_says_the_time_between_calls_was_the_apps() -> None:
    steps = [
        {"kind": "model", "start_ms": 0.0, "end_ms": 900.0, "duration_ms": 900.0, "ttft_ms": 400.0, "status": "ok"},
        {"kind": "tool", "name": "Bash", "start_ms": 900.0, "end_ms": 2100.0, "duration_ms": 1200.0, "status": "ok"},
        {"kind": "model", "start_ms": 2400.0, "end_ms": 3000.0, "duration_ms": 600.0, "ttft_ms": 300.0, "status": "ok"},
    ]
    agent = {"step_count": 3, "time_in_model_ms": 1500.0, "time_in_tools_ms": 1200.0, "time_in_ttft_ms": 0.0}
    proxied = TurnRecord.from_dict({**_record(), "steps": steps, "agent": {**agent, "time_in_app_ms": 300.0}})
    text = record_text(proxied).plain
    assert "· app 300.0 ms" in text and "· ttft" not in text
    chat = record_text(TurnRecord.from_dict({**_record(), "steps": steps, "agent": agent})).plain
    assert "· ttft 0.0 ms" in chat and "· app" not in chat
