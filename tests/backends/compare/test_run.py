"""backends.compare.run: a ComparePlan built from -m values, run headless on every pane, the backends closed,
the figures and verdicts computed, the JSON the CLI prints and the export it writes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from ttft.backends.compare.run import ComparePlan, make_backends, run_compare
from ttft.backends.spec import PaneSpec
from ttft.telemetry.settings import TurnSettings

from tests.support.compare_fakes import ScheduledBackend

SCHEDULES = {
    "quick": {"ttft_s": 0.005, "gap_s": 0.002, "tokens": 4},
    "slow": {"ttft_s": 0.3, "gap_s": 0.002, "tokens": 4},
    "broken": {"fail_status": 503},
}


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def factory(spec: str, base_url: str | None) -> ScheduledBackend:
    provider, _, model = spec.partition(":")
    return ScheduledBackend(model, provider=provider, base_url=base_url, **SCHEDULES[model])  # type: ignore[arg-type]


def test_a_plan_from_the_flags_is_frozen_and_each_pane_keeps_its_own_url() -> None:
    plan = ComparePlan.of(["fake:quick@http://127.0.0.1:1/v1", "fake:slow"], "http://127.0.0.1:2/v1", repeat=3)
    assert plan.panes == (
        PaneSpec("fake:quick", "http://127.0.0.1:1/v1"),
        PaneSpec("fake:slow", "http://127.0.0.1:2/v1"),
    )
    assert (plan.repeat, plan.mode, plan.settings) == (3, "parallel", TurnSettings())
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.repeat = 1  # type: ignore[misc]


async def test_run_compare_runs_every_pane_logs_the_turns_and_says_who_was_first(
    data_dir: Path, tmp_path: Path
) -> None:
    plan = ComparePlan.of(["fake:quick", "fake:slow", "fake:broken"], prompt="hi", repeat=2, mode="sequential")
    backends = make_backends(plan, factory)
    seen: list[tuple[int, int, str]] = []
    result = await run_compare(plan, backends=backends, on_turn=lambda p, t, r: seen.append((p, t, r.status)))
    assert sorted(seen) == [(0, 0, "ok"), (0, 1, "ok"), (1, 0, "ok"), (1, 1, "ok"), (2, 0, "error"), (2, 1, "error")]
    assert all(b.closed for b in backends)  # type: ignore[attr-defined]
    assert result.names == {"A": "fake:quick", "B": "fake:slow", "C": "fake:broken"}
    assert [len(r) for r in result.records] == [2, 2, 2] and result.log_errors == ()
    out = result.to_dict()
    assert (out["schema"], out["mode"], out["trials"]) == ("ttft.compare/1", "sequential", 2)
    assert [(p["pane"], p["name"], p["ok"], p["failed"]) for p in out["panes"]] == [
        ("A", "fake:quick", 2, 0),
        ("B", "fake:slow", 2, 0),
        ("C", "fake:broken", 0, 2),
    ]
    assert result.comparison.rankings["ttft"].winners == ("A",)
    logged = [json.loads(line) for f in (data_dir / "sessions").glob("*.jsonl") for line in f.read_text().splitlines()]
    assert len(logged) == 6 and {r["extra"]["comparison_id"] for r in logged} == {result.comparison_id}
    paths = result.save(tmp_path / "out")
    assert [p.name for p in paths] == [
        f"{result.comparison_id}.jsonl",
        f"{result.comparison_id}-summary.csv",
        f"{result.comparison_id}-verdicts.csv",
    ]
    assert len((tmp_path / "out" / f"{result.comparison_id}.jsonl").read_text().splitlines()) == 6
