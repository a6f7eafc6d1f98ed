"""The wide random fuzz of the stream readers: what it found, for a bounded time. A script, not a test.

    python tests/benchmarks/fuzz_readers.py [--seconds 120] [--seed N] [--examples 200] [--events 6] [--only NAME]

The suite's fuzz tests (``tests/cli/test_hostile_input.py``) draw the same examples on every run
(the ``ci`` Hypothesis profile) so that CI's verdict never depends on the draw. This runs their two
properties with fresh random seeds, in rounds of ``--examples`` bodies of up to ``--events`` hostile
events each, until ``--seconds`` have passed:

- each lean reader records what its SDK path records (Chat Completions, Responses, Messages);
- every reader ends a turn in a clean record (the partial answer kept, no "bug in ttft").

Each finding is printed as it is found: the property, the round's seed, the smallest body Hypothesis
shrank it to (paste it into ``FOUND`` in the test module as an explicit example) and what differed.
Printed at the end: the rounds, bodies and findings, and the seeds run. Exit status: 1 when anything
was found, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from tests.support.backend_util import one_turn  # noqa: E402
from tests.support.hostile_streams import ALL_APIS, PAIRS, RawServer, backend, hostile_body, outcomes  # noqa: E402


class Found(AssertionError):
    """One property's failure on one body."""


def _differing(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {k: {"sdk": a[k], "lean": b[k]} for k in a if a[k] != b[k]}


def _clean(rec: dict[str, Any]) -> str | None:
    """What is wrong with one record (the suite's fuzz test's checks), or None."""
    if rec["status"] not in ("ok", "error"):
        return f"status {rec['status']!r}"
    err = rec.get("error") or {}
    if rec["status"] == "error" and not (err.get("type") and err.get("message")):
        return f"an error without a type or message: {err}"
    if "bug in ttft" in (err.get("hint") or ""):
        return f"a bug in ttft: {err.get('type')}: {err.get('message')}"
    if not rec["answer"].startswith("Hi"):
        return f"the partial answer was lost: {rec['answer']!r}"
    json.dumps(rec)
    return None


def _round(name: str, api: str, check: Any, seed_: int, examples: int, events: int) -> tuple[list[bytes], str] | None:
    """One Hypothesis run of ``check`` from ``seed_``: the shrunk body and what failed, or None."""
    last: list[tuple[list[bytes], str]] = []

    @seed(seed_)
    @settings(
        max_examples=examples,
        derandomize=False,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(pieces=hostile_body(api, max_events=events))
    def prop(pieces: list[bytes]) -> None:
        try:
            check(pieces)
        except Found as exc:
            last.append((pieces, str(exc)))  # the last failure is the shrunk one: Hypothesis replays it at the end
            raise

    try:
        prop()
    except Found:
        return last[-1]
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="stop starting rounds after this long (default 120)")
    ap.add_argument("--seed", type=int, default=None, help="the first round's seed (default: random)")
    ap.add_argument("--examples", type=int, default=200, help="bodies per round and property (default 200)")
    ap.add_argument("--events", type=int, default=6, help="hostile events per body, at most (default 6)")
    ap.add_argument("--only", default="", help="run only the properties whose name holds this (e.g. responses)")
    args = ap.parse_args()
    os.environ.setdefault("TTFT_DATA_DIR", tempfile.mkdtemp(prefix="ttft-fuzz-"))
    os.environ.setdefault("TTFT_CONFIG_DIR", tempfile.mkdtemp(prefix="ttft-fuzz-"))

    raw = RawServer()
    loop = asyncio.new_event_loop()
    rng = random.Random(args.seed)
    pairs = {pair: (backend(pair[0], raw.url), backend(pair[1], raw.url)) for pair in PAIRS}
    singles = {api: backend(api, raw.url) for api in ALL_APIS}

    def differential(pair: tuple[str, str]) -> Any:
        def check(pieces: list[bytes]) -> None:
            a, b = loop.run_until_complete(outcomes(pairs[pair], raw, pieces))
            if a != b:
                raise Found(json.dumps(_differing(a, b), ensure_ascii=False, default=str))

        return check

    def clean(api: str) -> Any:
        def check(pieces: list[bytes]) -> None:
            raw.content_type = "text/event-stream"
            raw.pieces = pieces
            problem = _clean(loop.run_until_complete(one_turn(singles[api], max_retries=0)))
            if problem:
                raise Found(problem)

        return check

    work = [(f"{s} = {le}", s, differential((s, le))) for s, le in PAIRS]
    work += [(f"clean record: {api}", api, clean(api)) for api in ALL_APIS]
    work = [w for w in work if args.only in w[0]]
    seen: set[tuple[str, str]] = set()
    seeds: list[int] = []
    rounds = bodies = 0
    start = time.monotonic()
    print(f"fuzzing {len(work)} properties for {args.seconds:g} s, {args.examples} bodies a round", flush=True)
    try:
        while time.monotonic() - start < args.seconds:
            seed_ = args.seed if args.seed is not None and not seeds else rng.randrange(2**32)
            seeds.append(seed_)
            for name, api, check in work:
                if time.monotonic() - start >= args.seconds:
                    break
                found = _round(name, api, check, seed_, args.examples, args.events)
                rounds += 1
                bodies += args.examples
                if found is None:
                    continue
                pieces, what = found
                if (name, what) in seen:
                    continue
                seen.add((name, what))
                print(f"\nFOUND [{name}] seed {seed_}\n  body:   {pieces!r}\n  failed: {what}", flush=True)
    finally:
        for b in [*singles.values(), *(b for pair in pairs.values() for b in pair)]:
            loop.run_until_complete(b.aclose())
        loop.close()
        raw.close()
    took = time.monotonic() - start
    print(
        f"\n{rounds} rounds, up to {bodies} bodies, {len(seen)} finding(s) in {took:.0f} s; "
        f"seeds: {' '.join(map(str, seeds))}"
    )
    return 1 if seen else 0


if __name__ == "__main__":
    sys.exit(main())
