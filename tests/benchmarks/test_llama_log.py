"""tests/benchmarks/llama_log.py: llama-server's per-task timing lines read back as the server's own figures."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.benchmarks import llama_log


def _task(t: int, launch: str, end: str, prompt_ms: float, prompt_n: int, eval_ms: float, eval_n: int) -> str:
    """The lines llama-server 0.0.x prints for one task (stamps are minutes.seconds.ms.us)."""
    return (
        f"{launch} I slot launch_slot_: id  0 | task {t} | processing task, is_child = 0\n"
        f"{end} I slot print_timing: id  0 | task {t} | prompt eval time =  {prompt_ms:9.2f} ms / {prompt_n:5d} "
        f"tokens (   1.00 ms per token,   1.00 tokens per second)\n"
        f"{end} I slot print_timing: id  0 | task {t} |        eval time =  {eval_ms:9.2f} ms / {eval_n:5d} "
        f"tokens (   1.00 ms per token,   1.00 tokens per second)\n"
        f"{end} I slot print_timing: id  0 | task {t} |       total time =  {prompt_ms + eval_ms:9.2f} ms\n"
        f"{end} I slot      release: id  0 | task {t} | stop processing: n_tokens = 99, truncated = 0\n"
    )


def test_tasks_pair_their_lines_by_id_even_when_interleaved() -> None:
    a = _task(7, "0.00.100.000", "0.01.100.000", 50.0, 70, 310.0, 32)
    b = _task(9, "0.00.200.000", "1.02.300.500", 40.0, 2, 620.0, 63)
    a_lines, b_lines = a.splitlines(keepends=True), b.splitlines(keepends=True)
    # both launched, then b's prompt line lands between a's two timing lines
    text = a_lines[0] + b_lines[0] + a_lines[1] + b_lines[1] + a_lines[2] + b_lines[2] + "".join(a_lines[3:])
    tasks = llama_log.parse(text)
    assert [t.task for t in tasks] == [7, 9]
    assert tasks[0].tpot_ms == pytest.approx(10.0)  # 310 ms over 31 gaps between 32 tokens
    assert tasks[1].tpot_ms == pytest.approx(10.0)
    assert tasks[1].prompt_n == 2
    assert tasks[1].launched_s == pytest.approx(0.2)
    assert tasks[1].ended_s == pytest.approx(62.3005)  # minutes count too


def test_a_task_cut_off_by_the_slice_is_left_out() -> None:
    whole = _task(1, "0.00.000.000", "0.01.000.000", 10.0, 70, 31.0, 32)
    cut = _task(2, "0.01.000.000", "0.02.000.000", 10.0, 70, 31.0, 32).splitlines(keepends=True)[:2]
    assert [t.task for t in llama_log.parse(whole + "".join(cut))] == [1]


def test_summary_drops_warm_up_tasks_and_counts_cache_hits() -> None:
    text = (
        _task(0, "0.00.000.000", "0.01.000.000", 900.0, 70, 3100.0, 32)  # warm-up, far slower: must not count
        + _task(1, "0.02.000.000", "0.03.000.000", 100.0, 70, 310.0, 32)
        + _task(2, "0.03.000.000", "0.04.000.000", 120.0, 72, 620.0, 32)
        + _task(3, "0.04.000.000", "0.06.000.000", 5.0, 1, 930.0, 32)  # the prompt came from the cache
    )
    run = llama_log.summarise(llama_log.parse(text), skip=1)
    assert run.tasks == 3
    assert run.tpot_p50_ms == pytest.approx(20.0)
    assert run.prompt_p50_ms == pytest.approx(100.0)
    assert run.cache_hits == 1
    assert run.tokens_per_s == pytest.approx(96 / 4.0)  # 3 x 32 tokens from 2 s to 6 s on the server's clock
    # every prompt repeated from an earlier run: all hits against the prompt length asked for
    assert llama_log.summarise(llama_log.parse(text), skip=1, fresh_prompt_n=100).cache_hits == 3


def test_settle_waits_for_the_timing_the_server_writes_after_the_client_left(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("0.00.000.000 I main: server is listening\n")
    start = llama_log.size(log)

    def write_late() -> None:
        time.sleep(0.3)
        with log.open("a") as f:
            f.write(_task(4, "0.00.100.000", "0.00.900.000", 10.0, 70, 31.0, 32))

    writer = threading.Thread(target=write_late)
    writer.start()
    end = llama_log.settle(log, start, expected=1, timeout_s=30.0, quiet_s=20.0)
    writer.join()
    assert [t.task for t in llama_log.parse(llama_log.read_slice(log, start, end))] == [4]


def test_settle_gives_up_once_the_log_stops_growing(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(_task(1, "0.00.000.000", "0.01.000.000", 10.0, 70, 31.0, 32))
    end = llama_log.settle(log, 0, expected=5, timeout_s=30.0, quiet_s=0.2)
    assert end == llama_log.size(log)
