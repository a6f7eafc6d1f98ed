"""Branches of a conversation: which logged turns make the conversation that ends at a given turn.

A session's log is append-only, so editing an earlier prompt (or regenerating an answer) adds a turn
rather than rewriting one: the new turn's ``branch_of`` names the turn whose prompt it replaces, and
it follows what that turn followed. The old branch stays in the log. Every other turn follows the
turn logged just before it. :func:`lineage` walks those links back from a turn, so a resumed chat
sends the model the branch it was on, not every turn ever logged.

The links come from a log, which is untrusted: a ``branch_of`` that does not point back (at itself
or a later turn) is ignored, a turn it names that is not in the log is treated as if it were, and
the walk never loops.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from typing import Any

Links = Mapping[int, int | None]  # turn_index -> branch_of


def links(records: Iterable[Mapping[str, Any]]) -> dict[int, int | None]:
    """``turn_index -> branch_of`` of record dicts (a later line with the same index wins)."""
    out: dict[int, int | None] = {}
    for r in records:
        i, b = r.get("turn_index"), r.get("branch_of")
        if isinstance(i, int) and not isinstance(i, bool):
            out[i] = b if isinstance(b, int) and not isinstance(b, bool) else None
    return out


def parent(index: int, nodes: Links, order: list[int] | None = None) -> int | None:
    """The turn that ``index`` follows: the one logged before the first turn of its chain of edits.
    ``order``: ``sorted(nodes)``, when the caller walks many turns."""
    order = sorted(nodes) if order is None else order
    anchor = index
    for _ in range(len(order) + 1):  # each hop goes strictly back: bounded, and never a loop
        b = nodes.get(anchor)
        if b is None or b >= anchor:
            break
        anchor = b
        if anchor not in nodes:  # edited a turn this log does not hold: it stood where it says
            break
    k = bisect.bisect_left(order, anchor) - 1
    return order[k] if k >= 0 else None


def lineage(nodes: Links, last: int) -> list[int]:
    """The turn indices of the branch that ends at ``last``, oldest first (``last`` included when it is
    in ``nodes``)."""
    order = sorted(nodes)
    out: list[int] = []
    cur: int | None = last
    seen: set[int] = set()
    while cur is not None and cur in nodes and cur not in seen:
        seen.add(cur)
        out.append(cur)
        cur = parent(cur, nodes, order)
    out.reverse()
    return out


def on_branch(records: list[Any], nodes: Links | None = None) -> list[Any]:
    """The records (objects with ``turn_index``, or dicts) on the branch of the last one, oldest first
    (the last line of an index logged twice)."""
    if not records:
        return []

    def index(r: Any) -> Any:
        return r.get("turn_index") if isinstance(r, Mapping) else r.turn_index

    def branch(r: Any) -> Any:
        return r.get("branch_of") if isinstance(r, Mapping) else r.branch_of

    if nodes is None:
        nodes = links({"turn_index": index(r), "branch_of": branch(r)} for r in records)
    latest = {index(r): r for r in records}  # a repeated index: its last line
    return [latest[i] for i in lineage(nodes, index(records[-1])) if i in latest]


def branch_pair(nodes: Links, first: int) -> tuple[list[int], list[int]] | None:
    """The two branches at an edit, side by side: the old one from the turn ``first`` replaced, and
    the new one from ``first`` on, each as far as it goes (to its newest turn); None when ``first``
    is not an edit."""
    replaced = nodes.get(first)
    if replaced is None or replaced >= first:
        return None
    order = sorted(nodes)
    up: dict[int, list[int]] = {}  # each turn's branch, oldest first (memoised walk)

    def branch_of_turn(i: int) -> list[int]:
        if i not in up:
            up[i] = lineage(nodes, i)
        return up[i]

    def newest_through(anchor: int, exclude: set[int]) -> list[int]:
        for i in reversed(order):
            if i in exclude:
                continue
            chain = branch_of_turn(i)
            if anchor in chain:
                return chain[chain.index(anchor) :]
        return [anchor] if anchor in nodes else []

    new = newest_through(first, set())
    old = newest_through(replaced, set(new))
    return old, new
