"""A cluster run's levels read as one load, by ``ttft report --merge``'s rules, and the summary's cluster block.

``ttft bench --cluster`` runs the load driver on several nodes at once (``backends.load.cluster``). Each
node's share of a level (:class:`Share`) is one part of :func:`telemetry.bench.merge.union_level`: the
level's load is the sum of the shares, every percentile is taken over the union of the requests, and
the client column is the worst machine's, with the busiest node named so the table can say whose it is.
A node lost mid-level keeps the records that reached the head; the level is then marked partial,
naming the node and counting what it never sent back. Pure: the records come in as dicts, as drivers
hand them on and as ``turns.jsonl`` holds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .aggregate import aggregate_level
from .merge import Part, union_level
from .requests import read_bench
from .slo import SLO


@dataclass(frozen=True, slots=True)
class Node:
    """A machine of the cluster that ran drivers, as the engine names it."""

    node_id: str
    host: str
    cpus: int | None = None

    def label(self) -> str:
        """How messages and the table name it: its host and the head of its id (hosts repeat on one machine)."""
        return f"{self.host} ({self.node_id[:8]})"


@dataclass(frozen=True, slots=True)
class Share:
    """One node's part of one level: its drivers' load and requests, as far as they reached the head."""

    node: Node
    workers: int  # the node's drivers in this level
    level: float  # its part of the load (users, or requests/s)
    asked: int  # the requests it was given
    records: Sequence[dict[str, Any]]  # those that reached the head
    client: Mapping[str, Any] | None = None  # its drivers' health; None when lost before saying
    lost: str | None = None  # why the node was lost mid-level; None when it finished its share


def _cpu(client: Mapping[str, Any]) -> float:
    v = client.get("cpu_percent_max_process", client.get("cpu_percent"))
    return float(v) if isinstance(v, int | float) else 0.0


def _lag(client: Mapping[str, Any]) -> float | None:
    lag = client.get("loop_lag_ms")
    v = lag.get("p99") if isinstance(lag, Mapping) else None
    return float(v) if isinstance(v, int | float) else None


def busiest(shares: Sequence[Share]) -> dict[str, Any] | None:
    """The node whose client worked hardest (most CPU in one process, then most loop lag): the one whose
    delay, if any, is in the figures. None when no node reported its health."""
    known = [s for s in shares if s.client is not None]
    if not known:
        return None
    top = max(known, key=lambda s: (_cpu(s.client or {}), _lag(s.client or {}) or 0.0))
    client = top.client or {}
    return {
        "node_id": top.node.node_id,
        "host": top.node.host,
        "label": top.node.label(),
        "cpu_percent": client.get("cpu_percent"),
        "loop_lag_ms": {"p99": _lag(client)},
    }


def level_figures(mode: str, shares: Sequence[Share], *, slo: SLO | None = None) -> tuple[dict[str, Any], list[str]]:
    """The level's figures over the union of the nodes' requests, with each node's part and, when a node
    was lost, ``partial``; and the sentences for records that did not read (left out, counted)."""
    reads = [read_bench(s.records) for s in shares]
    problems = [f"{s.node.label()}: {m}" for s, r in zip(shares, reads, strict=True) if (m := r.message())]
    parts = [Part(s.node.node_id, s.level, r.turns, s.client) for s, r in zip(shares, reads, strict=True)]
    union = union_level(mode, parts)
    client = dict(union.client) if union.client is not None else None
    if client is not None:
        client["busiest"] = busiest(shares)
    out = aggregate_level(union.turns, level=union.level, mode=mode, slo=slo, client=client)
    spans = {p.run_id: p.span_ms for p in union.parts}
    out["nodes"] = [
        {
            "node_id": s.node.node_id,
            "host": s.node.host,
            "workers": s.workers,
            "level": s.level,
            "requests": s.asked,
            "received": len(s.records),
            "duration_s": (span[1] - span[0]) / 1000 if (span := spans[s.node.node_id]) else None,
            "client": dict(s.client) if s.client is not None else None,
            "lost": s.lost,
        }
        for s in shares
    ]
    out["overlap"] = union.overlap
    lost = [s for s in shares if s.lost is not None]
    out["partial"] = (
        {
            "lost_nodes": [s.node.label() for s in lost],
            "reasons": [s.lost for s in lost],
            "missing_requests": sum(max(0, s.asked - len(s.records)) for s in lost),
        }
        if lost
        else None
    )
    return out, problems


def partial_line(figures: Mapping[str, Any]) -> str | None:
    """The sentence for a level that lost a node, or None: which node, and what it never sent back."""
    partial = figures.get("partial")
    if not isinstance(partial, Mapping):
        return None
    nodes = ", ".join(map(str, partial.get("lost_nodes") or ())) or "a node"
    return (
        f"PARTIAL: lost {nodes} mid-level; its records that arrived are kept, "
        f"{partial.get('missing_requests', 0)} request(s) of its share never came back"
    )


def cluster_block(
    *,
    engine: str,
    version: str,
    address: str,
    nodes: Sequence[Node],
    placed: Mapping[str, int],
    levels: Sequence[Sequence[Share]],
    lost: Sequence[tuple[Node, str, str]] = (),
) -> dict[str, Any]:
    """``summary.json``'s ``cluster``: the engine, every node that ran drivers with its drivers, CPUs and
    client health over the run (the worst level's), the drivers in all, and the nodes lost (when, why)."""
    per_node: dict[str, list[Mapping[str, Any]]] = {}
    for level in levels:
        for s in level:
            if s.client is not None:
                per_node.setdefault(s.node.node_id, []).append(s.client)

    def health(clients: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        cpu = [float(c["cpu_percent"]) for c in clients if isinstance(c.get("cpu_percent"), int | float)]
        lag = [v for c in clients if (v := _lag(c)) is not None]
        peak = [
            float(m)
            for c in clients
            if isinstance(c.get("loop_lag_ms"), Mapping) and isinstance(m := c["loop_lag_ms"].get("max"), int | float)
        ]
        return {
            "cpu_percent": max(cpu, default=None),
            "loop_lag_ms": {"p99": max(lag, default=None), "max": max(peak, default=None)},
        }

    return {
        "engine": engine,
        "version": version,
        "address": address,
        "nodes": [
            {
                "node_id": n.node_id,
                "host": n.host,
                "workers": placed.get(n.node_id, 0),
                "cpus": n.cpus,
                "client": health(per_node.get(n.node_id, [])),
            }
            for n in nodes
        ],
        "workers": sum(placed.values()),
        "lost": [{"node_id": n.node_id, "host": n.host, "when": when, "reason": why} for n, when, why in lost],
    }
