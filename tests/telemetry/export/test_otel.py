"""The OTel file export: OTLP/JSON traces and metrics that follow the GenAI conventions, parsed with
``opentelemetry-proto`` as a collector would, and replayed to one with the README's ``curl``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import AGGREGATION_TEMPORALITY_CUMULATIVE
from ttft.telemetry import events as ev
from ttft.telemetry.export import genai, genai_spans, genai_values
from ttft.telemetry.export.formats import export
from ttft.telemetry.log.turns import SessionLog
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.recorder import TurnRecorder
from ttft.telemetry.settings import TurnSettings
from ttft.tui.cli import main

from tests.fakes.otlp_receiver import OtlpReceiver, attrs, parse_metrics_json, parse_traces_json
from tests.support.turns import at, play, recorder, stream

MS = 1_000_000


def _recorder_with(settings: TurnSettings) -> TurnRecorder:
    r = recorder()
    r.settings = settings
    return r


@pytest.fixture
def records() -> list[dict[str, Any]]:
    ok = play(stream(first_ms=200, gap_ms=10, visible=5, reasoning=2))
    err = play([ev.AttemptSent(at(0), 1), ev.Failed(at(5), "rate_limit", "Too many", 429)])
    whole = play(  # not streamed: one chunk with the whole answer
        [ev.AttemptSent(at(0), 1), ev.TextDelta(at(300), "all of it", 3), ev.Finished(at(301), "stop")],
        _recorder_with(TurnSettings(stream=False, max_output_tokens=64)),
    )
    return [ok, err, whole]


def _traces(records: list[dict[str, Any]], tmp_path: Path) -> Any:
    out = tmp_path / "t.otel.json"
    assert export(records, "otel", out) == len(records)
    return parse_traces_json(out.read_text())


def _metrics(records: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "m.json"
    assert export(records, "otel-metrics", out) == len(records)
    doc = parse_metrics_json(out.read_text())
    (rm,) = doc.resource_metrics
    (sm,) = rm.scope_metrics
    assert sm.schema_url == genai.SCHEMA_URL
    return {m.name: m for m in sm.metrics}


def test_spans_carry_the_turn_with_real_times(records: list[dict[str, Any]], tmp_path: Path) -> None:
    doc = _traces(records, tmp_path)
    (rs,) = doc.resource_spans
    assert attrs(rs.resource.attributes)["service.name"] == "ttft"
    assert rs.scope_spans[0].schema_url == genai.SCHEMA_URL
    spans = list(rs.scope_spans[0].spans)
    roots = [s for s in spans if not s.parent_span_id]
    assert [s.name for s in roots] == ["chat m"] * 3
    ok = roots[0]
    rec = records[0]
    assert ok.kind == ok.SPAN_KIND_CLIENT and len(ok.trace_id) == 16 and len(ok.span_id) == 8
    assert ok.start_time_unix_nano == genai_values.unix_ns(rec["sent_at"])
    assert (ok.end_time_unix_nano - ok.start_time_unix_nano) / MS == pytest.approx(rec["metrics"]["total_ms"], abs=1e-3)
    a = attrs(ok.attributes)
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "m"
    assert a["gen_ai.usage.input_tokens"] == 12 and a["gen_ai.usage.output_tokens"] == 7
    assert a["gen_ai.usage.cache_read.input_tokens"] == 4 and a["gen_ai.usage.reasoning.output_tokens"] == 2
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.2)
    assert a["gen_ai.response.finish_reasons"] == ["stop"]
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == 1
    assert "error.type" not in a and not any(k.startswith("gen_ai.server.") for k in a)
    assert "gen_ai.input.messages" not in a and "input.value" not in a  # no content unless asked for
    events = {e.name: e.time_unix_nano - ok.start_time_unix_nano for e in ok.events}
    assert events == {"gen_ai.first_token": 200 * MS, "gen_ai.first_visible_token": 220 * MS}
    children = {s.name: s for s in spans if s.parent_span_id == ok.span_id}
    # the wait as the record splits it (metrics.wait_ms: no wire trace here, so server then first token)
    assert set(children) == {"wait server", "wait first_token", "reasoning", "streaming"}
    assert all(c.trace_id == ok.trace_id for c in children.values())
    phases = {"wait server": (0, 100), "wait first_token": (100, 200), "reasoning": (200, 220), "streaming": (220, 260)}
    for name, (start, end) in phases.items():
        c = children[name]
        assert (c.start_time_unix_nano - ok.start_time_unix_nano, c.end_time_unix_nano - ok.start_time_unix_nano) == (
            start * MS,
            end * MS,
        )
    err = roots[1]
    assert err.status.code == err.status.STATUS_CODE_ERROR and err.status.message == "Too many"
    assert attrs(err.attributes)["error.type"] == "rate_limit"
    assert attrs(roots[2].attributes)["gen_ai.request.max_tokens"] == 64


def test_wait_phases_tile_the_wait_when_the_record_splits_it(tmp_path: Path) -> None:
    rec = play(stream(first_ms=200, visible=2))
    split = {"retries": 0.0, "pool": 1.0, "dns": 4.0, "connect": 10.0, "tls": 25.0, "send": 0.0, "server": 60.0}
    rec["metrics"]["wait_ms"] = split | {"first_token": 100.0}
    spans = list(_traces([rec], tmp_path).resource_spans[0].scope_spans[0].spans)
    root = spans[0]
    waits = [(s.name, (s.end_time_unix_nano - s.start_time_unix_nano) / MS) for s in spans if s.name.startswith("wait")]
    assert waits == [
        ("wait pool", 1.0),
        ("wait dns", 4.0),
        ("wait connect", 10.0),
        ("wait tls", 25.0),
        ("wait server", 60.0),
        ("wait first_token", 100.0),
    ]
    last = next(s for s in spans if s.name == "wait first_token")
    assert last.end_time_unix_nano - root.start_time_unix_nano == 200 * MS  # they end at the first token


def test_content_only_when_asked(
    records: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "true")
    root = _traces(records[:1], tmp_path).resource_spans[0].scope_spans[0].spans[0]
    a = attrs(root.attributes)
    assert json.loads(a["gen_ai.input.messages"]) == [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    (out,) = json.loads(a["gen_ai.output.messages"])
    assert out["parts"][-1] == {"type": "text", "content": records[0]["answer"]} and out["finish_reason"] == "stop"


def test_metrics_follow_the_conventions(records: list[dict[str, Any]], tmp_path: Path) -> None:
    metrics = _metrics(records, tmp_path)
    assert set(metrics) == {
        "gen_ai.client.inference.duration",
        "gen_ai.client.inference.time_to_first_chunk",
        "gen_ai.client.inference.time_per_output_chunk",
        "gen_ai.client.inference.operation.input_tokens",
        "gen_ai.client.inference.operation.output_tokens",
        "gen_ai.client.inference.usage.input_tokens",
        "gen_ai.client.inference.usage.output_tokens",
        "gen_ai.client.inference.usage.cache_read.input_tokens",
        "gen_ai.client.inference.usage.reasoning.output_tokens",
    }  # nothing under gen_ai.server.*: a model server's own; no cache write in these turns' usage
    for m in metrics.values():
        if m.name.startswith("gen_ai.client.inference.usage."):
            continue  # counters: below
        h = m.histogram
        assert h.aggregation_temporality == AGGREGATION_TEMPORALITY_CUMULATIVE
        for p in h.data_points:
            assert 0 < p.start_time_unix_nano <= p.time_unix_nano
            assert not any(k.startswith("gen_ai.usage.") for k in attrs(p.attributes))  # span attributes only
            assert sum(p.bucket_counts) == p.count and len(p.bucket_counts) == len(p.explicit_bounds) + 1
    ttfc = metrics["gen_ai.client.inference.time_to_first_chunk"].histogram.data_points
    # one series (the ok turn; the failed one has no first chunk, the whole answer was not streamed)
    assert [(p.count, round(p.sum, 6)) for p in ttfc] == [(1, 0.2)]
    tpoc = metrics["gen_ai.client.inference.time_per_output_chunk"].histogram.data_points
    assert [(p.count, round(p.sum, 6), p.max) for p in tpoc] == [(6, 0.06, pytest.approx(0.01))]  # per chunk
    durations = metrics["gen_ai.client.inference.duration"].histogram.data_points
    by_error = {attrs(p.attributes).get("error.type"): p for p in durations}
    assert set(by_error) == {None, "rate_limit"}
    ok_total = (records[0]["metrics"]["total_ms"] + records[2]["metrics"]["total_ms"]) / 1000
    assert by_error[None].count == 2 and by_error[None].sum == pytest.approx(ok_total)
    usage = {t: records_usage(records, t) for t in ("input", "output", "cached_input", "reasoning")}
    names = (
        ("input_tokens", "input"),
        ("output_tokens", "output"),
        ("cache_read.input_tokens", "cached_input"),
        ("reasoning.output_tokens", "reasoning"),
    )
    for name, key in names:
        s = metrics[f"gen_ai.client.inference.usage.{name}"].sum
        assert s.is_monotonic and s.aggregation_temporality == AGGREGATION_TEMPORALITY_CUMULATIVE
        assert sum(p.as_int for p in s.data_points) == usage[key], name  # every turn's server-reported count
        assert {attrs(p.attributes)["gen_ai.token.modality"] for p in s.data_points} == {"text"}
    per_op = metrics["gen_ai.client.inference.operation.input_tokens"].histogram.data_points
    assert sum(p.count for p in per_op) == sum(1 for r in records if r["tokens"]["source"] == "usage")


def records_usage(records: list[dict[str, Any]], key: str) -> int:
    return sum(r["tokens"][key] or 0 for r in records if r["tokens"]["source"] == "usage")


def test_the_1_44_names_go_out_too_when_opted_in(
    records: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(genai.OPT_IN_ENV, "http, gen_ai/dup")
    metrics = _metrics(records, tmp_path)
    for old in ("duration", "time_to_first_chunk", "time_per_output_chunk"):
        new_points = metrics[f"gen_ai.client.inference.{old}"].histogram.data_points
        old_points = metrics[f"gen_ai.client.operation.{old}"].histogram.data_points
        assert [(p.count, p.sum) for p in old_points] == [(p.count, p.sum) for p in new_points]
    usage = metrics["gen_ai.client.token.usage"].histogram.data_points
    assert {attrs(p.attributes)["gen_ai.token.type"] for p in usage} == {"input", "output"}
    monkeypatch.setenv(genai.OPT_IN_ENV, "gen_ai_latest_experimental")  # the conventions' own word: the default
    assert not any(
        n.startswith(("gen_ai.client.operation.", "gen_ai.client.token")) for n in _metrics(records, tmp_path)
    )


def test_a_session_of_many_turns_is_few_series(tmp_path: Path) -> None:
    recs = [play(stream(visible=k + 2)) for k in range(12)]
    metrics = _metrics(recs, tmp_path)
    duration = metrics["gen_ai.client.inference.duration"].histogram.data_points
    assert len(duration) == 1 and duration[0].count == 12


def test_old_records_and_either_chunk_shape(records: list[dict[str, Any]], tmp_path: Path) -> None:
    old = {k: v for k, v in records[0].items() if k != "sent_at"}  # logged before sent_at existed
    new = records[0] | {"chunks": [[c["t_ms"], c["kind"], c["tokens"]] for c in records[0]["chunks"]]}  # /1
    metrics = _metrics([old, new], tmp_path)
    (p,) = metrics["gen_ai.client.inference.time_per_output_chunk"].histogram.data_points
    assert p.count == 12
    root = _traces([old], tmp_path).resource_spans[0].scope_spans[0].spans[0]
    assert root.start_time_unix_nano == genai_values.unix_ns(old["started_at"])


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_the_readme_curl_replays_a_file_to_a_collector(
    records: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    log = SessionLog("20260102-030405-abcd")
    for r in records:
        log.append(r)
    traces, metrics = tmp_path / "turns.otel.json", tmp_path / "turns.metrics.json"
    assert main(["export", "-f", "otel", "-o", str(traces)]) == 0
    assert main(["export", "-f", "otel-metrics", "-o", str(metrics)]) == 0
    capsys.readouterr()
    rx = OtlpReceiver().start()
    try:
        for path, f in (("traces", traces), ("metrics", metrics)):
            # the README's command, word for word but the address
            cmd = f"curl -sf -X POST -H 'Content-Type: application/json' --data-binary @{f} {rx.url}/v1/{path}"
            assert subprocess.run(cmd, shell=True, check=False).returncode == 0
    finally:
        rx.stop()
    assert [r.content_type for r in rx.received] == ["application/json"] * 2
    assert len([s for s in rx.spans() if s.name == "chat m"]) == 3
    assert {m.name for m in rx.metrics()} >= {"gen_ai.client.inference.duration"}


def test_odd_records_give_a_valid_document_not_an_error(records: list[dict[str, Any]], tmp_path: Path) -> None:
    ok = records[0]
    odd = [
        ok | {"started_at": "yesterday", "sent_at": None},  # no usable wall clock: no span, still counted
        ok | {"sent_at": "2026-01-02T03:04:05"},  # a naive time is not trusted; started_at is used
        ok | {"metrics": {"ttft_ms": None, "total_ms": float("nan")}},  # no figure is better than a NaN
        ok | {"base_url": "http://[::1"},
        ok | {"model": "m\x1b[2J", "settings": None, "extra": {"bench": "x"}},
    ]
    unreadable = [  # not turn records (the CLI's reader skips such lines and says so): left out
        ok | {"metrics": {"ttft_ms": "fast"}},
        ok | {"tokens": {"output": True}},
        ok | {"chunks": [[1.0, "text"], {"t_ms": "x"}, None]},
        ok | {"stop_reason": 7},
    ]
    mixed = [odd[0], *unreadable[:2], *odd[1:3], *unreadable[2:], *odd[3:]]
    out = tmp_path / "t.otel.json"
    assert export(mixed, "otel", out) == len(odd)  # the turns written: the count says what was left out
    doc = parse_traces_json(out.read_text())
    roots = [s for s in doc.resource_spans[0].scope_spans[0].spans if not s.parent_span_id]
    assert len(roots) == 4
    assert roots[0].start_time_unix_nano == genai_values.unix_ns(ok["started_at"])
    a = attrs(roots[1].attributes)
    assert "gen_ai.response.time_to_first_chunk" not in a
    assert "server.address" not in attrs(roots[2].attributes)
    assert roots[3].name == "chat m\ufffd[2J"  # no escape sequence reaches a terminal tool
    out = tmp_path / "m.json"
    assert export(mixed, "otel-metrics", out) == len(odd)
    (sm,) = parse_metrics_json(out.read_text()).resource_metrics[0].scope_metrics
    points = next(m for m in sm.metrics if m.name == "gen_ai.client.inference.duration").histogram.data_points
    assert sum(p.count for p in points) == 4  # the turn without a usable total_ms adds no duration


def test_sent_at_reads_back_into_the_typed_record(records: list[dict[str, Any]]) -> None:
    from ttft.telemetry.record import TurnRecord
    from ttft.telemetry.typed_read import RecordError

    rec = records[0]
    assert TurnRecord.from_dict(rec).sent_at() == rec["sent_at"] and rec["sent_at"].endswith("+00:00")
    assert TurnRecord.from_dict({**rec, "sent_at": None}).sent_at() is None  # an older line
    with pytest.raises(RecordError, match="sent_at"):
        TurnRecord.from_dict({**rec, "sent_at": "soon"})
    for unusable in (5, "2026-01-02T03:04:05"):  # not text, or no zone: no instant, so no wall clock
        assert TurnRecord.from_dict({**rec, "sent_at": unusable}).sent_at() is None


def test_turns_that_share_an_identity_get_their_own_traces(records: list[dict[str, Any]], tmp_path: Path) -> None:
    # compare panes share a session and turn index and can start in the same millisecond;
    # here every field of the identity agrees, so only the per-document salt tells them apart
    same = [dict(records[0]), dict(records[0]), dict(records[1], started_at=records[0]["started_at"])]
    same[2]["session_id"], same[2]["turn_index"] = same[0]["session_id"], same[0]["turn_index"]
    doc = _traces(same, tmp_path)
    spans = list(doc.resource_spans[0].scope_spans[0].spans)
    roots = [s for s in spans if not s.parent_span_id]
    assert len({r.trace_id for r in roots}) == len({r.span_id for r in roots}) == 3
    by_parent = {r.span_id: [s.name for s in spans if s.parent_span_id == r.span_id] for r in roots}
    assert by_parent[roots[1].span_id] == by_parent[roots[0].span_id]  # the copy has exactly its own children
    assert "wait" in by_parent[roots[2].span_id] and "wait" not in by_parent[roots[0].span_id]
    # and the ids stay stable: the same file exported again names the same traces
    again = _traces(same, tmp_path)
    assert [s.span_id for s in again.resource_spans[0].scope_spans[0].spans] == [s.span_id for s in spans]


def test_trace_ids_key_on_the_logged_identity(records: list[dict[str, Any]]) -> None:
    # a collector that stored a file's traces names them by this key: a typed read must not move them
    import hashlib

    from ttft.telemetry.record import TurnRecord

    d = records[0]
    key = "/".join(str(d[k]) for k in ("session_id", "turn_index", "started_at", "sent_at", "provider", "model"))
    digest = hashlib.sha256(f"{key}/{d['base_url']}/3".encode()).hexdigest()
    assert genai_spans.trace_ids(TurnRecord.from_dict(d), 3) == (digest[:32], digest[32:48])
    assert (
        genai_spans.trace_ids(TurnRecord.from_dict(d | {"sent_at": None}))[0]
        != genai_spans.trace_ids(TurnRecord.from_dict(d))[0]
    )


def test_the_cli_says_how_many_turns_the_otel_mapping_left_out(
    records: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A line the log reader takes (settings is an object) whose fields still do not read as a turn
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    log = SessionLog("20260102-030405-abce")
    for r in [*records, {**records[0], "settings": {"stream": "yes"}}]:
        log.append(r)
    capsys.readouterr()
    assert main(["export", "-f", "otel", "-o", str(tmp_path / "t.json")]) == 0
    err = capsys.readouterr().err
    assert "left out 1 turn whose fields do not read as a ttft.turn record" in err and "wrote 3 turns" in err
    assert main(["export", "-f", "jsonl", "-o", str(tmp_path / "t.jsonl")]) == 0
    assert "left out" not in capsys.readouterr().err  # the other formats carry every line the log holds


def test_times_past_what_otlp_carries_are_dropped_not_the_batch(records: list[dict[str, Any]], tmp_path: Path) -> None:
    # OTLP's times are fixed64 ns since 1970: a finite but enormous time in an old log (or a start in
    # the year 9999) would fail the encoding of the whole batch it is in.
    ok = records[0]
    far = ok | {"events_ms": {**ok["events_ms"], "end": 1e300, "last_token": 1e300}}
    future = ok | {"started_at": "9999-12-31T00:00:00+00:00", "sent_at": None}
    out = tmp_path / "t.otel.json"
    assert export([ok, far, future], "otel", out) == 3
    doc = parse_traces_json(out.read_text())  # parses: every time fits in a fixed64
    spans = doc.resource_spans[0].scope_spans[0].spans
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == 2  # the year-9999 turn has no time OTLP can carry: no span, as an unreadable clock
    assert all(0 <= s.start_time_unix_nano <= s.end_time_unix_nano < 2**64 for s in spans)
    assert roots[1].start_time_unix_nano == genai_values.sent_unix_ns(TurnRecord.from_dict(far))
    (sm,) = parse_metrics_json(_export_metrics([ok, far, future], tmp_path)).resource_metrics[0].scope_metrics
    assert sm.metrics


def _export_metrics(records: list[dict[str, Any]], tmp_path: Path) -> str:
    out = tmp_path / "m.json"
    export(records, "otel-metrics", out)
    return out.read_text()


def test_the_servers_own_split_and_cache_writes_go_on_the_span(tmp_path: Path) -> None:
    events = stream(first_ms=1900, gap_ms=10, visible=5)
    events.insert(-1, ev.ServerTimings(at(1950), "vllm", {"queue_time_ms": 1400.0, "time_to_first_token_ms": 350.0}))
    events.insert(-1, ev.Usage(at(1950), input=5000, cached_input=1000, output=5, reasoning=0, cache_write_input=3000))
    rec = play(events)
    a = attrs(_traces([rec], tmp_path).resource_spans[0].scope_spans[0].spans[0].attributes)
    assert (a["ttft.server.queue_time"], a["ttft.server.time_to_first_token"]) == (1.4, 0.35)
    assert a["ttft.server.rest_of_time_to_first_chunk"] == pytest.approx(0.15)
    assert a["ttft.server.timing_source"] == "vllm"
    assert a["gen_ai.usage.cache_write.input_tokens"] == 3000 == a["llm.token_count.prompt_details.cache_write"]
    (written,) = _metrics([rec], tmp_path)["gen_ai.client.inference.usage.cache_write.input_tokens"].sum.data_points
    assert written.as_int == 3000
