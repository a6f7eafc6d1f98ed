"""telemetry.plain's hand-made dicts equal dataclasses.asdict's, on records as the recorder fills them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ttft.telemetry.metrics import Percentiles, TokenCounts, TurnMetrics
from ttft.telemetry.plain import as_dict, field_names, json_copy
from ttft.telemetry.settings import TurnSettings
from ttft.telemetry.wire import WaitSplit


@dataclass
class _Inner:
    a: int
    b: list[int]


def test_json_copy_copies_containers_like_asdict() -> None:
    value = {"x": [1, {"y": (2, 3)}], "z": None, "d": _Inner(1, [2])}
    got = json_copy(value)
    assert got == {"x": [1, {"y": (2, 3)}], "z": None, "d": {"a": 1, "b": [2]}}
    assert got["x"] is not value["x"] and got["x"][1] is not value["x"][1]
    assert type(got["x"][1]["y"]) is tuple


def test_records_match_asdict() -> None:
    settings = TurnSettings(max_output_tokens=9, speculative={"kind": "prompt-lookup", "n": [1, 2]}, extra={"gpu": 3})
    assert settings.to_dict() == asdict(settings)
    assert list(settings.to_dict()) == list(asdict(settings))
    assert settings.to_dict()["extra"] is not settings.extra
    tokens = TokenCounts(5, 1, 7, None, "usage")
    assert tokens.to_dict() == asdict(tokens)
    wait = WaitSplit(retries=1.23456, pool=0.5, server=2.0004)
    assert wait.to_dict() == {k: round(v, 3) for k, v in asdict(wait).items()}
    metrics = TurnMetrics(
        ttft_ms=1.5,
        itl_ms=Percentiles(p50=1.0, p90=2.0, p95=3.0, p99=4.0, max=5.0, mean=2.0, min=0.5),
        phases_ms={"waiting": 1.0, "reasoning": 0.0, "streaming": 2.0},
        speculative={"drafted": 3, "rates": [0.5]},
        wait_ms=wait,
    )
    expected = asdict(metrics)
    expected["itl_ms"] = {"p50": 1.0, "p90": 2.0, "p95": 3.0, "p99": 4.0, "max": 5.0}
    expected["wait_ms"] = wait.to_dict()
    assert metrics.to_dict() == expected
    assert list(metrics.to_dict()) == list(expected)
    assert as_dict(tokens, field_names(TokenCounts)) == asdict(tokens)
