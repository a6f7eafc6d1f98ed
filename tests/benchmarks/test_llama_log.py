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


# A real llama-server (b-series, SmolLM2-135M, 2 slots, one loop) on a loaded machine: a 63-token
# prompt alone, then two of ~330 tokens sent 12 ms apart. The second (task 7) waits for the first's
# prefill: launched at 25.540 s, when task 5's 8,101.94 ms prompt eval (from 17.437 s) had just ended.
# Its JSON said ``timings.cache_n`` 25 for task 7 (a shared start with the slot's last prompt), 0 else.
RECORDED = """\
0.05.292.235 I slot get_availabl: id  1 | task -1 | selected slot by LRU, t_last = -1
0.05.292.399 I slot launch_slot_: id  1 | task 0 | processing task, is_child = 0
0.17.425.054 I slot print_timing: id  1 | task 0 | prompt eval time =    4772.23 ms /    63 tokens (   75.75 ms per token,    13.20 tokens per second)
0.17.425.090 I slot print_timing: id  1 | task 0 |        eval time =    7360.35 ms /     4 tokens ( 2453.45 ms per token,     0.41 tokens per second)
0.17.425.092 I slot print_timing: id  1 | task 0 |       total time =   12132.58 ms /    67 tokens
0.17.425.294 I slot      release: id  1 | task 0 | stop processing: n_tokens = 66, truncated = 0
0.17.436.735 I slot get_availabl: id  0 | task -1 | selected slot by LRU, t_last = -1
0.17.436.937 I slot launch_slot_: id  0 | task 5 | processing task, is_child = 0
0.25.540.150 I slot get_availabl: id  1 | task -1 | selected slot by LRU, t_last = 13874200590
0.25.540.471 I slot launch_slot_: id  1 | task 7 | processing task, is_child = 0
0.36.705.287 I slot print_timing: id  0 | task 5 | prompt eval time =    8101.94 ms /   333 tokens (   24.33 ms per token,    41.10 tokens per second)
0.36.705.296 I slot print_timing: id  0 | task 5 |        eval time =   11165.14 ms /     4 tokens ( 3721.71 ms per token,     0.27 tokens per second)
0.36.705.352 I slot      release: id  0 | task 5 | stop processing: n_tokens = 336, truncated = 0
0.37.681.442 I slot print_timing: id  1 | task 7 | prompt eval time =    9161.41 ms /   308 tokens (   29.74 ms per token,    33.62 tokens per second)
0.37.681.450 I slot print_timing: id  1 | task 7 |        eval time =    2979.51 ms /     4 tokens (  993.17 ms per token,     1.01 tokens per second)
0.37.681.794 I slot      release: id  1 | task 7 | stop processing: n_tokens = 336, truncated = 0
"""  # noqa: E501
SENT_S = (0.0001, 12.1431, 12.1551)  # the client's clock (s since its start) when it sent each
TIMINGS = ((4772.232, 63), (8101.94, 333), (9161.409, 308))  # the JSON timings' prompt_ms, prompt_n


def test_cache_n_read_from_the_slot_matches_the_servers_timings() -> None:
    tasks = llama_log.parse(RECORDED)
    assert [t.cache_n for t in tasks] == [0, 0, 25]
    run = llama_log.summarise(tasks, fresh_prompt_n=32)
    assert run.cache_hits == 0 and run.reused == 1 and run.reused_tokens == (25,)  # reuse seen, not a "hit"


def _normalised(sent: list[llama_log.Sent]) -> dict[float, llama_log.PerRequest]:
    pairs = llama_log.join(llama_log.parse(RECORDED), sent)
    assert pairs is not None
    return {s.sent_s: q for (s, _), q in zip(pairs, llama_log.normalise(pairs), strict=True)}


@pytest.mark.parametrize("with_timings", [True, False])
def test_the_wait_for_anothers_prefill_is_read_against_the_send_time(with_timings: bool) -> None:
    # each TTFT: what the server accounts for plus 3 ms of HTTP and reader (waits from the log, by hand)
    waits = {0.0001: 0.0, 12.1431: 1.538, 12.1551: 8093.072}
    sent = [
        llama_log.Sent(s, waits[s] + p_ms + 3.0, *((p_ms, p_n) if with_timings else (None, None)))
        for s, (p_ms, p_n) in zip(SENT_S, TIMINGS, strict=True)
    ]
    got = _normalised(list(reversed(sent)))  # in any order
    for s in SENT_S:
        assert got[s].wait_ms == pytest.approx(waits[s], abs=0.01)
        assert got[s].rest_ms == pytest.approx(3.0, abs=0.02)
        assert got[s].ratio == pytest.approx(1.0, abs=0.001)
    # the wait is the rest of the other's prefill (launched 17.436937 s, 8,101.94 ms of prompt eval) from
    # the send (12.1551 s on the client's clock, + 5.292299 s on the server's: the idle first request's gap)
    assert got[12.1551].wait_ms == pytest.approx((17.436937 + 8.10194 - 12.1551 - 5.292299) * 1000, abs=5.0)
    run = llama_log.summarise_requests(list(got.values()))
    assert run.waited == 1 and run.rest_p50_ms == pytest.approx(3.0, abs=0.02)
    # TTFT over prompt eval alone reads the waited request as a tool almost twice as slow
    assert got[12.1551].ttft_ms / got[12.1551].prompt_ms > 1.8  # prompt eval alone: 1.88


def test_counts_that_disagree_are_not_joined_by_order() -> None:
    sent = [llama_log.Sent(s, 100.0) for s in SENT_S[:2]]
    assert llama_log.join(llama_log.parse(RECORDED), sent) is None
