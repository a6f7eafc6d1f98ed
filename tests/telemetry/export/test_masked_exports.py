"""Exports and spans mask an error's words where they leave (issue 39, item 6): a record whose error,
hint, notices and diagnosis hold a secret (a line logged before ttft masked them, or a record built by
hand) is written by every export format and carried by every span with each secret as ``***``, the
rest of its words kept, and its conversation as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.export import genai_spans
from ttft.telemetry.export.formats import WRITERS, export
from ttft.telemetry.record import TurnRecord

from tests.support.turns import at, play

ENV_TOKEN = "tok-export-ENV-5150"
URL_PASS, QUERY = "urlpass-EXP-6160", "qval-EXP-7170"
BEARER = "bearer-EXP-8180"
SECRETS = (ENV_TOKEN, URL_PASS, QUERY, BEARER)
SAID = (
    f"gateway refused token {ENV_TOKEN} at http://bob:{URL_PASS}@gw.test/v1?api-key={QUERY} "
    f"(Authorization: Bearer {BEARER}) KEEP-THESE-WORDS"
)


@pytest.fixture
def record(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("TTFT_EXPORT_SERVICE_TOKEN", ENV_TOKEN)
    rec = play([ev.AttemptSent(at(0), 1), ev.Failed(at(5), "RuntimeError", SAID, None, f"hint: {SAID}")])
    rec["notices"] = {"gateway": SAID}
    rec["diagnosis"] = SAID
    assert rec["error"]["message"] == SAID  # the recorder keeps what it is fed: masking is the exits'
    return rec


@pytest.mark.parametrize("fmt", [f for f in WRITERS if f != "parquet"])
def test_every_export_format_masks_the_errors_words(record: dict[str, Any], tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"turns.{fmt}"
    assert export([record], fmt, out) == 1
    text = out.read_text(encoding="utf-8")
    for secret in SECRETS:
        assert secret not in text, (fmt, secret)
    if fmt != "otel-metrics":  # numbers only
        assert "KEEP-THESE-WORDS" in text


def test_a_span_carries_the_errors_words_masked(record: dict[str, Any]) -> None:
    span = genai_spans.turn_span(TurnRecord.from_dict(record))
    assert span is not None and span.error is not None
    assert "KEEP-THESE-WORDS" in span.error and "gateway refused token ***" in span.error
    shown = repr(span)
    for secret in SECRETS:
        assert secret not in shown
