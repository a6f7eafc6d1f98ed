"""tui.screens.help: F1 explains every row the telemetry pane draws, a hosted turn's wait included."""

from __future__ import annotations

from ttft.telemetry.record import TurnRecord
from ttft.tui.screens.help import METRICS
from ttft.tui.widgets.telemetry_pane import LABEL_W, record_text


def _hosted_turn() -> dict:
    # a real loopback turn's figures, with a saved probe's split and a new connection
    return {
        "status": "ok",
        "provider": "compat",
        "model": "qwen3",
        "turn_index": 0,
        "metrics": {
            "ttft_ms": 115.4,
            "wait_ms": {"retries": 0.0, "pool": 0.4, "dns": 0.0, "connect": 1.6, "tls": 0.0, "send": 0.7,
                        "server": 2.3, "first_token": 110.3},
            "expected_prefill_ms": 112.6,
            "server_queue_ms": 0.0,
            "ttfvt_ms": 115.4,
            "tpot_ms": 1.9,
            "e2e_ms": 144.0,
            "own_delay_ms": 45.0,
        },
        "http": {"connection": "new", "http_version": "HTTP/1.1", "request_id": "req-1", "server_processing_ms": None,
                 "ratelimit": None},
        "tokens": {"input": 3000, "cached_input": 0, "output": 16, "reasoning": 0, "source": "usage"},
    }  # fmt: skip


def test_help_names_every_wait_row_of_the_pane() -> None:
    # F1's "one line per metric" covers the wait's rows (wait, network, connection, server part)
    # and ttft's own delay, not only the headline metrics.
    explained = {name.strip() for name, _ in METRICS}
    labels = [
        line[:LABEL_W].strip() for line in record_text(TurnRecord.from_dict(_hosted_turn())).plain.splitlines()[1:]
    ]
    for label in ("wait", "network", "connection", "server part", "ttft's own"):
        assert label in labels, labels  # the pane draws it ...
        assert label in explained, label  # ... and the help says what it is
