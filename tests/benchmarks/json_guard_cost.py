"""What the JSON guard (telemetry.json_guard) costs where it runs: a log line, a stream event, a hostile document.

    python tests/benchmarks/json_guard_cost.py [--tokens 500]

Prints, per document, the parse alone and the guard's check (best of 5 rounds): a session log line of
a ``--tokens``-token turn (its chunk stamps are most of its brackets), one Chat Completions stream
event as the lean reader meets it (``backends.providers.lean.sse.loads`` counts its brackets first,
and checks only past the limit), and an array nested 100,000 deep (refused; no parser runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ttft.telemetry import events as ev  # noqa: E402
from ttft.telemetry import json_guard  # noqa: E402
from ttft.telemetry.log.json_line import encode_line  # noqa: E402

from tests.support.turns import at, play  # noqa: E402


def best_us(stmt: object, number: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number * 1e6  # type: ignore[arg-type]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=500)
    args = p.parse_args()
    events: list[ev.Event] = [ev.AttemptSent(at(0), 1), ev.HeadersReceived(at(50), 1, 200)]
    events += [ev.TextDelta(at(100 + i * 10), f"w{i} ") for i in range(args.tokens)]
    events.append(ev.Finished(at(100 + args.tokens * 10), "stop"))
    line = encode_line(play(events))
    parse = best_us(lambda: json.loads(line), 500)
    check = best_us(lambda: json_guard.check(line), 500)
    print(f"log line ({len(line):,} bytes): json.loads {parse:.1f} us, guard {check:.1f} us (+{check / parse:.0%})")

    chunk = (
        b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}'
    )
    parse = best_us(lambda: orjson.loads(chunk), 100_000)
    count = best_us(lambda: chunk.count(b"[") + chunk.count(b"{") > json_guard.MAX_DEPTH, 100_000)
    said = f"orjson {parse * 1000:.0f} ns, the lean reader's count {count * 1000:.0f} ns"
    print(f"stream event ({len(chunk)} bytes): {said}")

    deep = b"[" * 100_000 + b"]" * 100_000
    refused = best_us(lambda: json_guard.depth_bound(deep), 3)
    print(f"nested 100,000 deep ({len(deep):,} bytes): measured and refused in {refused / 1000:.1f} ms")


if __name__ == "__main__":
    main()
