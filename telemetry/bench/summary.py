"""A load run's files: the summary JSON (vLLM-keyed levels, details, conclusion) and one CSV row per level."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..server.gauges import read_level
from ..server.histograms import read_latency
from . import agent, probe
from .conclusion import conclusion


def _wait_keys(lv: dict[str, Any]) -> dict[str, float | None]:
    """The wait's network and server parts (p50, p99) per level: server growth under load is queueing."""
    w = lv.get("wait_ms")
    if not isinstance(w, dict):
        return {}
    return {
        f"{name}_{p}_ms": w[key][p] for name, key in (("wait_network", "network"), ("wait_server", "server_part"))
        for p in ("p50", "p99")
    }  # fmt: skip


def _cost(lv: dict[str, Any]) -> float | None:
    """The level's summed cost (USD), None when none of its requests was priced (telemetry.cost)."""
    c = lv.get("cost_usd")
    return c["total_usd"] if isinstance(c, dict) and c.get("priced") else None


def _gauges(lv: dict[str, Any]) -> dict[str, Any]:
    """The server's own gauges over the level (``--server-metrics``), beside the vLLM keys too."""
    m = lv.get("server_metrics")
    return {"server_metrics": m} if read_level(lv) is not None else {}


def summary(levels: Sequence[dict[str, Any]], *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's summary JSON: metadata, one vLLM-keyed entry per level, and the conclusion.

    With a single level its vLLM keys are also at the top, as ``vllm bench serve`` writes them.
    """
    out: dict[str, Any] = {"schema": "ttft.bench/1", **(meta or {})}
    out["levels"] = [
        {
            **lv["vllm"],
            "mode": lv["mode"],
            "level": lv["level"],
            **_wait_keys(lv),
            "total_cost_usd": _cost(lv),
            **_gauges(lv),
            **({"probe": lv["probe"]} if "probe" in lv else {}),  # the user beside the load (--probe-rate)
            **({"agent": lv["agent"]} if "agent" in lv else {}),  # tool-using turns (--tool-latency, --mcp)
        }
        for lv in levels
    ]
    out["details"] = [{k: v for k, v in lv.items() if k != "vllm"} for lv in levels]
    out["conclusion"] = conclusion(levels)
    if len(levels) == 1:
        out.update(levels[0]["vllm"])
    return out


CSV_COLUMNS = (
    "mode",
    "level",
    "requests",
    "completed",
    "failed",
    "duration_s",
    "request_throughput",
    "output_throughput",
    "per_user_tps_p50",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "ttfvt_p50_ms",
    "tpot_p50_ms",
    "tpot_p90_ms",
    "tpot_p99_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "good",
    "goodput",
    "client_loop_lag_p99_ms",
    "client_cpu_percent",
    "client_bottleneck",
    "total_cost_usd",
    "server_running_mean",
    "server_waiting_mean",
    "server_waiting_max",
    "server_kv_cache_usage_mean",
    "server_prefix_cache_hit_rate",
    # the server's own histograms over the level (telemetry.server.histograms): empty without them
    "server_ttft_p50_ms",
    "server_ttft_p99_ms",
    "server_queue_p50_ms",
    # the workload's (telemetry.bench.workload.figures): empty where the level has none
    "cache_hit_fraction",
    "ttft_cache_hit_p50_ms",
    "ttft_cache_miss_p50_ms",
    "send_late_p99_ms",
    # the probe user beside the load (--probe-rate, telemetry.bench.probe): empty without one
    *probe.CSV_COLUMNS,
    # tool-using turns (--tool-latency, --mcp; telemetry.bench.agent): empty without tools
    *agent.CSV_COLUMNS,
)


def _latency_cells(agg: dict[str, Any]) -> dict[str, float | None]:
    lat = read_latency(agg)
    ttft, queue = (lat.kinds.get(k) if lat else None for k in ("ttft", "queue"))
    return {
        "server_ttft_p50_ms": ttft.p50 if ttft else None,
        "server_ttft_p99_ms": ttft.p99 if ttft else None,
        "server_queue_p50_ms": queue.p50 if queue else None,
    }


def csv_row(agg: dict[str, Any]) -> dict[str, Any]:
    """One flat row per level for the CSV."""
    client = agg.get("client") or {}
    g = read_level(agg)
    return {
        "mode": agg["mode"],
        # concurrency is a whole number of users (written 4, not 4.0); a rate may be fractional
        "level": int(agg["level"]) if agg["mode"] == "concurrency" else agg["level"],
        "requests": agg["requests"],
        "completed": agg["completed"],
        "failed": agg["failed"],
        "duration_s": agg["duration_s"],
        "request_throughput": agg["request_throughput"],
        "output_throughput": agg["output_throughput"],
        "per_user_tps_p50": agg["per_user_tokens_per_s"]["p50"],
        "ttft_p50_ms": agg["ttft_ms"]["p50"],
        "ttft_p90_ms": agg["ttft_ms"]["p90"],
        "ttft_p99_ms": agg["ttft_ms"]["p99"],
        "ttfvt_p50_ms": agg["ttfvt_ms"]["p50"],
        "tpot_p50_ms": agg["tpot_ms"]["p50"],
        "tpot_p90_ms": agg["tpot_ms"]["p90"],
        "tpot_p99_ms": agg["tpot_ms"]["p99"],
        "itl_p99_ms": agg["itl_ms"]["p99"],
        "e2e_p50_ms": agg["e2e_ms"]["p50"],
        "e2e_p99_ms": agg["e2e_ms"]["p99"],
        "good": agg["good"],
        "goodput": agg["goodput"],
        "client_loop_lag_p99_ms": (client.get("loop_lag_ms") or {}).get("p99"),
        "client_cpu_percent": client.get("cpu_percent"),
        "client_bottleneck": agg.get("client_bottleneck") or "",
        "total_cost_usd": _cost(agg),
        "server_running_mean": g.running.mean if g and g.running else None,
        "server_waiting_mean": g.waiting.mean if g and g.waiting else None,
        "server_waiting_max": g.waiting.max if g and g.waiting else None,
        "server_kv_cache_usage_mean": g.kv_cache_usage.mean if g and g.kv_cache_usage else None,
        "server_prefix_cache_hit_rate": g.prefix_cache_hit_rate if g else None,
        **_latency_cells(agg),
        "cache_hit_fraction": (agg.get("prefix_cache") or {}).get("hit_fraction"),
        "ttft_cache_hit_p50_ms": ((agg.get("prefix_cache") or {}).get("ttft_hit_ms") or {}).get("p50"),
        "ttft_cache_miss_p50_ms": ((agg.get("prefix_cache") or {}).get("ttft_miss_ms") or {}).get("p50"),
        "send_late_p99_ms": (((agg.get("arrivals") or {}).get("late_ms")) or {}).get("p99"),
        **probe.csv_cells(agg),
        **agent.csv_cells(agg),
    }
