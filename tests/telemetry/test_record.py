"""TurnRecord.from_dict: every logged form reads back as the typed record; hostile dicts fail clearly."""

from __future__ import annotations

import copy
import gc
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from ttft.telemetry import events as ev
from ttft.telemetry.record import OLD_SCHEMAS, SCHEMA, TurnRecord, typed_records, upgrade
from ttft.telemetry.recorder import TurnRecorder
from ttft.telemetry.settings import PROMPT_LOOKUP, TurnSettings
from ttft.telemetry.typed_read import RecordError, bulk_read

from tests.support.paths import FIXTURES
from tests.support.turns import at, play, recorder, stream
from tests.telemetry.test_recorder_properties import turns

FIXTURE = FIXTURES / "turn_v1.jsonl"


def _rich_turn() -> dict[str, Any]:
    """A turn that fills every part of the record: a retry, reasoning, a tool call, usage, server
    timings, notices, extra, and settings off their defaults."""
    rec = TurnRecorder(
        session_id="s",
        turn_index=3,
        provider="openai",
        api="chat.completions",
        model="m",
        base_url="http://127.0.0.1:1/v1",
        settings=TurnSettings(max_output_tokens=64, temperature=0.5, speculative=dict(PROMPT_LOOKUP), deadline_s=9.5),
        prompt="hi",
        input_chars=2,
        extra={"compare": {"comparison_id": "c1", "pane": 1, "pane_label": "B", "trial": 0, "prompt_index": 2}},
    )
    events: list[ev.Event] = [
        ev.AttemptSent(at(0), 1),
        ev.HeadersReceived(at(40), 1, 429, retry_after_s=0.25),
        ev.AttemptSent(at(300), 2),
        ev.HeadersReceived(at(350), 2, 200),
        ev.ReasoningDelta(at(400), "hmm", 2),
        ev.TextDelta(at(420), "Hello", 1),
        ev.ToolCallDelta(at(430), "lookup", '{"q": 1}', 3),
        ev.TextDelta(at(450.125), " world", 1),
        ev.Usage(at(450), input=30, cached_input=10, output=9, reasoning=2),
        ev.ServerTimings(at(451), "llama-server", {"prompt_n": 30, "prompt_ms": 12.5, "predicted_n": 9}),
        ev.Finished(at(452), "stop"),
    ]
    return play(events, rec)


_RICH = _rich_turn()


def _roundtrip(d: dict[str, Any]) -> None:
    via_json = json.loads(json.dumps(d))  # the log's path: what was written, read back
    assert TurnRecord.from_dict(via_json).to_dict() == d


def test_a_full_record_reads_back_field_for_field() -> None:
    d = _rich_turn()
    assert d["attempts"] == 2 and d["tool_calls"] and d["server"] and d["extra"]["compare"]
    _roundtrip(d)
    rec = TurnRecord.from_dict(d)
    assert rec.attempts[0].status == 429 and rec.attempts[0].retry_after_s == 0.25
    assert rec.settings.speculative == PROMPT_LOOKUP and rec.settings.deadline_s == 9.5
    assert rec.tokens.cached_input == 10 and rec.tokens.source == "usage"
    assert rec.metrics.ttft_ms == d["metrics"]["ttft_ms"] and rec.metrics.retry_ms == pytest.approx(300.0)
    assert [c.kind for c in rec.chunks] == ["reasoning", "text", "tool", "text"]
    # The clock starts at the first send, so the final attempt's send is where the log put it.
    assert rec.timestamps.sent == 0 and rec.timestamps.final_sent == 300_000_000
    assert d["sent_at"] and rec.sent_at() == d["sent_at"]  # the wall clock of the first send survives


@pytest.mark.parametrize("end", ["ok", "error", "cancelled"])
def test_each_ending_reads_back(end: str) -> None:
    events = stream(visible=3)[:-1]
    last = events[-1].t_ns + 1
    events.append(
        ev.Finished(last)
        if end == "ok"
        else ev.Failed(last, "RateLimit", "slow down", 503, "wait")
        if end == "error"
        else ev.Cancelled(last)
    )
    d = play(events)
    _roundtrip(d)
    rec = TurnRecord.from_dict(d)
    assert rec.status == end
    if end == "error":
        assert rec.error is not None and rec.error.status_code == 503 and rec.error.hint == "wait"


def test_a_turn_cancelled_before_any_send_reads_back() -> None:
    r = recorder()
    r.feed(ev.Submitted(at(0)))
    r.feed(ev.Cancelled(at(5)))
    d = r.finish().to_dict()
    _roundtrip(d)
    assert TurnRecord.from_dict(d).timestamps.sent is None


@settings(max_examples=150, deadline=None)
@given(turns())
def test_any_turn_survives_the_log(events: list[ev.Event]) -> None:
    _roundtrip(play(events))


def _keeps(new: Any, old: Any) -> None:
    if isinstance(old, dict):
        for k, v in old.items():
            _keeps(new[k], v)
    else:
        assert new == old


def test_old_lines_read_as_their_upgraded_form() -> None:
    lines = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]
    assert lines and all(d["schema"] in OLD_SCHEMAS for d in lines)
    for d in lines:
        old, new = TurnRecord.from_dict(d), TurnRecord.from_dict(upgrade(d))
        assert old == new
        # Written again, it keeps everything the old line said; fields added since come as their defaults.
        _keeps(old.to_dict(), {**upgrade(d), "schema": SCHEMA})
    assert [len(TurnRecord.from_dict(d).chunks) for d in lines] == [len(d["chunks"]) for d in lines]


def test_missing_and_unknown_fields_take_defaults() -> None:
    d = _rich_turn()
    # An older writer: no notices, no settings, no cached input, null text fields.
    old = {k: v for k, v in d.items() if k not in ("notices", "settings", "server", "tool_calls", "extra")}
    old["tokens"] = {k: v for k, v in d["tokens"].items() if k != "cached_input"}
    old["answer"] = None
    old["metrics"] = {k: v for k, v in d["metrics"].items() if k != "speculative"}
    # A newer writer: fields this version does not know.
    old["metrics"]["a_new_metric_ms"] = 1.0
    old["http"] = {"connection": "new", "a_later_header": "x"}
    old["some_future_object"] = {"x": [1, 2]}
    rec = TurnRecord.from_dict(old)
    assert rec.notices == {} and rec.settings == TurnSettings() and rec.server is None and rec.extra == {}
    assert rec.tokens.cached_input is None and rec.tokens.output == 9
    assert rec.answer == "" and rec.metrics.speculative is None
    assert rec.http is not None and rec.http.connection == "new"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["metrics"].update(ttft_ms="fast"), "metrics.ttft_ms"),
        (lambda d: d["metrics"].update(phases_ms=[1, 2]), "metrics.phases_ms"),
        (lambda d: d["metrics"]["itl_ms"].update(p50=True), "metrics.itl_ms.p50"),
        (lambda d: d.update(tool_calls=[{"name": "a"}, {"name": 1}]), "tool_calls[1].name"),
        (lambda d: d["tokens"].update(output="9"), "tokens.output"),
        (lambda d: d["settings"].update(stream="yes"), "settings.stream"),
        (lambda d: d["chunks"].__setitem__(1, {"t_ms": 1.0, "kind": "text"}), "chunks[1].tokens"),
        (lambda d: d["chunks"].__setitem__(0, "x"), "chunks[0]"),
        (lambda d: d.update(chunks={"a": 1}), "chunks"),
        (lambda d: d["attempt_log"][0].update(status="200"), "attempt_log[0].status"),
        (lambda d: d.update(error=[1]), "error"),
        (lambda d: d.update(turn_index="0"), "turn_index"),
        (lambda d: d.pop("status"), "status"),
        (lambda d: d.update(schema="ttft.turn/99"), "ttft.turn/99"),
        (lambda d: d.update(events_ms={"first_token": "soon"}), "events_ms.first_token"),
        (lambda d: d.update(server="llama"), "server"),
        (lambda d: d.update(sent_at="yesterday"), "sent_at"),
        # the vocabularies (Literals) take their own words only
        (lambda d: d.update(status="done"), "status is 'done', not one of 'ok', 'error', 'cancelled'"),
        (lambda d: d["chunks"][0].update(kind="audio"), "chunks[0].kind is 'audio', not one of"),
        (lambda d: d["chunks"][0].update(kind=["text"]), "chunks[0].kind is a list"),
        (lambda d: d["tokens"].update(source="guessed"), "tokens.source is 'guessed'"),
    ],
)
def test_a_wrong_field_is_named(change: Any, named: str) -> None:
    d = copy.deepcopy(_rich_turn())
    change(d)
    with pytest.raises(RecordError) as caught:
        TurnRecord.from_dict(d)
    assert named in str(caught.value)
    assert len(str(caught.value)) < 200  # the kind of a bad value is named, not its (maybe huge) contents


@pytest.mark.parametrize("value", [None, 3, "record", [], ["schema"], b"{}"])
def test_a_value_that_is_no_object_is_refused(value: object) -> None:
    with pytest.raises(RecordError, match="object"):
        TurnRecord.from_dict(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


# Every field of a record, at the top or one level down: the places a hostile value may go.
PLACES = [(k,) for k in sorted(_RICH)] + [(k, i) for k in sorted(_RICH) if isinstance(_RICH[k], dict) for i in _RICH[k]]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PLACES), json_values)
# found by this property (d53ae0c): an object field that is no object was a TypeError, not a RecordError
@example(("tokens",), 5)
@example(("metrics",), [1, 2])
@example(("settings",), "x")
@example(("events_ms",), 3)
def test_hostile_values_anywhere_give_a_record_or_a_record_error(place: tuple[str, ...], value: object) -> None:
    d = copy.deepcopy(_RICH)
    if len(place) == 1:
        d[place[0]] = value
    else:
        d[place[0]][place[1]] = value
    try:
        rec = TurnRecord.from_dict(d)
    except RecordError:
        return
    rec.to_dict()  # whatever was accepted can be written again


def _draft_figures(engine: object, timings: object) -> dict[str, Any] | None:
    """What telemetry/metrics.py's section on speculative decoding promises for this server data, worked out here: the
    engine's own counts when it reported a ``speculative`` object, else llama-server's ``draft_n`` (no
    ``predicted_n``, so no steps); nothing when nothing was drafted or a count is no number."""
    try:
        if isinstance(engine, dict):
            drafted, accepted = int(engine.get("drafted") or 0), int(engine.get("accepted") or 0)
            steps, source = int(timings or 0), "llama.cpp"
        elif timings:
            drafted, accepted, steps, source = int(timings), 0, 0, "llama-server"
        else:
            return None
        if drafted <= 0:
            return None
        per_step = round((steps + accepted) / steps, 3) if steps > 0 else None
        rate = round(accepted / drafted, 4)
    except (TypeError, ValueError, OverflowError):
        return None
    return {"source": source, "drafted": drafted, "accepted": accepted, "acceptance_rate": rate, "steps": steps,
            "tokens_per_step": per_step}  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
@example({"drafted": 50, "accepted": 31}, 40)  # the engine's figures, 40 decode steps
@example({"drafted": "7", "accepted": None}, None)  # a count written as text still counts; none is 0
@example({"drafted": "x"}, 3)  # a count that is no number: nothing to show
@example({"drafted": 1e400}, 3)  # infinity: no count either (OverflowError)
@example(None, 12)  # no engine figures: llama-server's draft_n
@example([1], 0)  # neither: nothing was drafted
def test_an_old_record_with_any_server_data_reads(engine: object, timings: object) -> None:
    old = copy.deepcopy(_RICH)
    del old["metrics"]["speculative"]  # logged before the field: it is recovered from the server's data
    old["server"] = {
        "llama.cpp": {"speculative": engine, "decode_steps": timings},
        "llama-server": {"draft_n": timings},
    }
    rec = TurnRecord.from_dict(old)
    assert rec.metrics.speculative == _draft_figures(engine, timings)


def test_an_old_record_gets_its_draft_figures_from_the_server_data() -> None:
    old = copy.deepcopy(_RICH)
    del old["metrics"]["speculative"]
    old["server"] = {"llama.cpp": {"speculative": {"drafted": 50, "accepted": 31}, "decode_steps": 40}}
    spec = TurnRecord.from_dict(old).metrics.speculative
    assert spec is not None and (spec["drafted"], spec["accepted"]) == (50, 31)


def test_the_pane_draws_a_logged_turn_read_back_as_it_drew_the_turn() -> None:
    from ttft.tui.widgets.telemetry_pane import record_text

    d = _rich_turn()
    shown = record_text(TurnRecord.from_dict(d)).plain
    assert "llama-server prefill" in shown and "30 tok in 12 ms" in shown and "retries" in shown
    assert record_text(TurnRecord.from_dict(TurnRecord.from_dict(d).to_dict())).plain == shown


def test_a_bulk_read_pauses_the_cycle_collector_and_restores_it() -> None:
    assert gc.isenabled()
    with pytest.raises(RecordError), bulk_read():
        assert not gc.isenabled()
        TurnRecord.from_dict(None)
    assert gc.isenabled()  # also after a record that did not read
    gc.disable()
    try:
        with bulk_read():
            pass
        assert not gc.isenabled()  # a caller's own choice is left as it was
    finally:
        gc.enable()
    assert len(typed_records([_rich_turn(), "odd", _rich_turn()])) == 2 and gc.isenabled()


def test_the_error_kind_reads_back_as_its_member_and_writes_as_its_string() -> None:
    from ttft.telemetry.errors import ErrorKind

    d = copy.deepcopy(_rich_turn())
    d["status"] = "error"
    d["error"] = {"type": "rate_limited", "message": "slow down", "status_code": 429, "hint": None}
    rec = TurnRecord.from_dict(d)
    assert rec.error is not None and rec.error.type is ErrorKind.RATE_LIMITED
    assert json.dumps(rec.to_dict()["error"]) == json.dumps(d["error"])
    d["error"]["type"] = "SomeBugError"  # a bug's class name, or a newer writer's kind: kept as it is
    assert TurnRecord.from_dict(d).to_dict()["error"]["type"] == "SomeBugError"


def test_itl_percentiles_read_and_write_as_the_same_object() -> None:
    d = copy.deepcopy(_rich_turn())
    rec = TurnRecord.from_dict(d)
    assert rec.metrics.itl_ms.p50 == d["metrics"]["itl_ms"]["p50"]
    assert list(rec.to_dict()["metrics"]["itl_ms"]) == ["p50", "p90", "p95", "p99", "max"]
    assert rec.to_dict()["metrics"]["itl_ms"] == d["metrics"]["itl_ms"]
