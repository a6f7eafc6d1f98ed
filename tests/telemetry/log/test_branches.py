"""Branches: an edited prompt's turn says ``branch_of``, old lines read without it, and the branch a
log ends on is what a resumed chat sends, whatever the links in an untrusted log say."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from ttft.telemetry.export import table
from ttft.telemetry.export.formats import export
from ttft.telemetry.log.branches import branch_pair, lineage, links, on_branch, parent
from ttft.telemetry.log.turns import Skipped, parse_line, read_records
from ttft.telemetry.record import TurnRecord

from tests.support.turns import play, stream


def _rec(i: int, branch_of: int | None = None) -> dict:
    return {"turn_index": i, "branch_of": branch_of}


def test_an_edit_follows_what_the_turn_it_replaces_followed() -> None:
    # 0 1 2, then prompt 1 edited (3), one more turn (4), then turn 4 regenerated (5)
    nodes = links([_rec(0), _rec(1), _rec(2), _rec(3, 1), _rec(4), _rec(5, 4)])
    assert parent(3, nodes) == 0 and parent(4, nodes) == 3 and parent(5, nodes) == 3
    assert lineage(nodes, 5) == [0, 3, 5]
    assert lineage(nodes, 2) == [0, 1, 2]  # the old branch is still whole
    assert lineage(nodes, 4) == [0, 3, 4]
    assert branch_pair(nodes, 3) == ([1, 2], [3, 5])  # the old branch from the edited turn, the new as far as it goes
    assert branch_pair(nodes, 5) == ([4], [5])
    assert branch_pair(nodes, 2) is None  # no edit


def test_links_from_an_untrusted_log_never_loop_nor_point_forward() -> None:
    nodes = links([_rec(0), _rec(1, 1), _rec(2, 7), {"turn_index": 3, "branch_of": "x"}, {"turn_index": True}])
    assert nodes == {0: None, 1: 1, 2: 7, 3: None}
    assert lineage(nodes, 3) == [0, 1, 2, 3]  # a self link and a forward link are ignored
    looped = {0: None, 5: 3, 3: 5}  # 3 <-> 5: the walk goes strictly back, so it ends
    assert lineage(looped, 5) == [0, 5]
    missing = {0: None, 1: None, 4: 2}  # an edit of a turn this log does not hold: it stood after 1
    assert parent(4, missing) == 1


def test_on_branch_keeps_the_last_line_of_a_repeated_index() -> None:
    recs = [_rec(0) | {"v": "a"}, _rec(1), _rec(0) | {"v": "b"}, _rec(2)]
    kept = on_branch(recs)
    assert [r["turn_index"] for r in kept] == [0, 1, 2] and kept[0]["v"] == "b"


def test_branch_of_is_in_the_record_and_old_lines_read_without_it(tmp_path: Path) -> None:
    rec = play(stream(first_ms=10, gap_ms=5, visible=2))
    assert rec["branch_of"] is None
    typed = TurnRecord.from_dict(rec | {"branch_of": 3})
    assert typed.branch_of == 3 and typed.to_dict()["branch_of"] == 3
    old = {k: v for k, v in rec.items() if k != "branch_of"}
    assert TurnRecord.from_dict(old).branch_of is None
    assert parse_line(json.dumps(rec | {"branch_of": "3"}).encode()) == {}  # the wrong type: a bad line
    log = tmp_path / "s.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in (old, rec | {"turn_index": 1, "branch_of": 0})))
    skipped = Skipped()
    assert [r.get("branch_of") for r in read_records(log, skipped)] == [None, 0] and not skipped


def test_the_export_table_has_a_branch_of_column(tmp_path: Path) -> None:
    rec = play(stream(first_ms=10, gap_ms=5, visible=2)) | {"branch_of": 4}
    assert table.unlisted(rec) == []
    out = tmp_path / "t.csv"
    export([rec, rec | {"branch_of": None}], "csv", out)
    rows = list(csv.DictReader(out.open()))
    assert rows[0]["branch_of"] == "4" and rows[1]["branch_of"] == ""
