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
