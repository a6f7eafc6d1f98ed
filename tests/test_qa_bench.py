"""QA regression: the bench's progress line during --find-capacity."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fakes.batching_server import BatchingServer
from tui.cli import main


def test_find_capacity_progress_counts_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The search's batches were numbered against the one starting level: "[c=1 level 2/1]".
    with BatchingServer(slots=1000, token_ms=4, alpha=0.5, prefill_ms=10) as srv:
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--find-capacity",
                "--slo", "tpot_p90=9ms", "--max-output-tokens", "6", "--warmup", "1", "--out", str(tmp_path / "cap"),
            ]
        )  # fmt: skip
    assert rc == 0
    err = capsys.readouterr().err
    for done, total in re.findall(r"level (\d+)/(\d+)\]", err):
        assert int(done) <= int(total), err
    batches = [int(n) for n in re.findall(r"probe batch (\d+)\]", err)]
    assert batches and batches == sorted(batches) and len(batches) >= 2, err


def test_a_finished_batch_is_reported_once(capsys: pytest.CaptureFixture[str]) -> None:
    # `--workers 2` printed "[warm-up] 2/2 done" twice, the second at a lower tok/s and without the TTFT
    from backends.load.driver import Progress
    from tui.commands.bench.output import ProgressLine

    line = ProgressLine(quiet=False)
    line.tty = False
    for elapsed, ttft in ((0.5, 37.0), (0.6, None), (0.7, None)):
        line(Progress("concurrency", 2, -1, 1, 2, 2, 0, -1, elapsed, warmup=True, last_ttft_ms=ttft, output_tokens=16))
    line(Progress("concurrency", 4, 0, 1, 8, 8, 0, -1, 0.5, output_tokens=64))
    line(Progress("concurrency", 4, 0, 1, 8, 8, 0, -1, 0.9, output_tokens=64))
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "[warm-up] 2/2 done, 0 errors, 32 tok/s, last TTFT 37 ms, 0.5 s",
        "[c=4 level 1/1] 8/8 done, 0 errors, 128 tok/s, 0.5 s",
    ]


def test_workers_summary_says_which_model_answered(tmp_path: Path) -> None:
    # With --workers the parent builds no backend, so summary.json had provider/api/model null
    # (and the chart's title fell back to the -m text) while a one-process run named them.
    import json

    with BatchingServer(slots=4, token_ms=2, alpha=0.1, prefill_ms=5) as srv:
        out = tmp_path / "w"
        rc = main(
            [
                "bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--concurrency", "2",
                "--requests", "4", "--warmup", "0", "--workers", "2", "--max-output-tokens", "4", "--out", str(out),
                "-q",
            ]
        )  # fmt: skip
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["provider"], summary["api"], summary["model"]) == ("compat", "chat.completions", "batching-fake")
    assert "Batching trade-off: batching-fake" in (out / "tradeoff.svg").read_text()
