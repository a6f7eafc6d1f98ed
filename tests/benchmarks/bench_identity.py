"""Do two ttft versions leave the same bench outputs? Seeded runs, compared with timing masked.

    python tests/benchmarks/bench_identity.py run DIR [--seed 7]     # from the checkout to test (PYTHONPATH=.)
    python tests/benchmarks/bench_identity.py compare BASE1 BASE2 OTHER

``run`` runs five seeded benches (closed loop, open loop, a capacity search, a probe user, stub tools)
against the simulated batching server (tests/fakes/batching_server.py) and leaves each run's folder and
exit code in DIR. ``compare`` reads ``summary.json``, ``turns.jsonl`` and ``levels.csv`` of each run:
a field is masked when its name carries a date, a duration, an id or a timing-derived figure, or when
it differs between BASE1 and BASE2 (two runs of the same code), and ``turns.jsonl`` is compared as a
multiset (completion order is timing). It prints the values compared and masked and each document that
differs, and exits 1 when one does. Run it from two checkouts (``git archive REV | tar -x -C DIR``) to
prove a reshaping changed no output; a different ``--seed`` differs in every run (the negative control).
In a closed loop two users ending in the same millisecond can swap which takes the next request
(``extra.bench.user``): a timing race, seen in about 1 run in 10 on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

RUNS = {
    "conc": ["--concurrency", "1,2", "--requests", "4"],
    "rate": ["--rate", "50,100", "--requests", "4"],
    "cap": ["--find-capacity", "--slo", "ttft_p90=2000ms", "--requests", "4", "--capacity-limit", "4"],
    "probe": ["--concurrency", "2", "--requests", "4", "--probe-rate", "5"],
    "tools": ["--concurrency", "2", "--requests", "3", "--tool-latency", "5"],
}
TIMING = re.compile(
    r"(_ms|_s|_at|_id|^id|cpu|lag|throughput|tokens_per_s|goodput|diagnosis|conclusion|bottleneck|"
    r"duration|time|base_url|url|session|achieved|elapsed|seconds|when)",
    re.IGNORECASE,
)


def run(root: Path, seed: str) -> None:
    from ttft.tui.cli import main

    from tests.fakes.batching_server import BatchingServer

    root.mkdir(parents=True, exist_ok=True)
    os.environ["TTFT_DATA_DIR"] = str(root / "data")
    with BatchingServer(slots=4, token_ms=2, alpha=0.3, prefill_ms=5) as srv:
        base = ["bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--seed", seed, "--warmup", "1"]
        for name, extra in RUNS.items():
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                rc = main([*base, "-q", *extra, "--out", str(root / name), "--json"])
            (root / f"{name}.rc").write_text(f"{rc}\n{err.getvalue()}")
            print(name, rc)


def _general(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def _flat(x: Any, p: str = "") -> dict[str, Any]:
    if isinstance(x, dict):
        out: dict[str, Any] = {p + "{keys}": tuple(sorted(x))}
        for k, v in x.items():
            out.update(_flat(v, f"{p}.{k}"))
        return out
    if isinstance(x, list):
        out = {p + "[len]": len(x)}
        for i, v in enumerate(x):
            out.update(_flat(v, f"{p}[{i}]"))
        return out
    return {p: x}


def _load(d: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in sorted(p for p in d.iterdir() if p.is_dir() and p.name in RUNS):
        rows = list(csv.reader((r / "levels.csv").open(encoding="utf-8")))
        out[(r.name, "summary")] = [_flat(json.loads((r / "summary.json").read_text()))]
        out[(r.name, "turns")] = [_flat(json.loads(ln)) for ln in (r / "turns.jsonl").read_text().splitlines()]
        out[(r.name, "csv")] = [_flat(dict(zip(rows[0], row, strict=True))) for row in rows[1:]] + [_flat(rows[0])]
    return out


def compare(base1: Path, base2: Path, other: Path) -> int:
    a, b, c = _load(base1), _load(base2), _load(other)
    total = masked = differing = 0
    for key, docs in a.items():
        varying = {
            _general(k) for xa, xb in zip(docs, b[key], strict=False) for k in {*xa, *xb} if xa.get(k) != xb.get(k)
        }

        def masked_doc(x: dict[str, Any], varying: set[str] = varying) -> str:
            nonlocal total, masked
            out = {}
            for k, v in x.items():
                total += 1
                if _general(k) in varying or TIMING.search(k.rsplit(".", 1)[-1]):
                    masked += 1
                    out[_general(k)] = "*"  # present, its value masked
                else:
                    out[k] = v
            return json.dumps(out, sort_keys=True, default=str)

        if sorted(map(masked_doc, docs)) != sorted(map(masked_doc, c.get(key, []))):
            differing += 1
            print(f"differs: {key[0]}/{key[1]}")
    codes = [(d / f"{n}.rc").read_text().split("\n")[0] for d in (base1, other) for n in RUNS]
    print(f"exit codes equal: {codes[: len(RUNS)] == codes[len(RUNS) :]}")
    print(f"documents {len(a)}, values {total}, masked {masked}, compared {total - masked}, differing {differing}")
    return 1 if differing else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--seed", default="7")
    c = sub.add_parser("compare")
    c.add_argument("dirs", type=Path, nargs=3)
    args = p.parse_args()
    if args.cmd == "run":
        run(args.dir, args.seed)
        return 0
    return compare(*args.dirs)


if __name__ == "__main__":
    sys.exit(main())
