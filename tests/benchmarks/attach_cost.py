"""What attachments and pricing cost ``ttft ask``, and what pricing costs per turn.

Runs ``python -m tui.cli ask -m openai:gpt-4o-mini --base-url FAKE --json "hi"`` in fresh processes
against the loopback fake server, interleaved (one of each variant per round), and prints medians of:

- own delay: the record's ``own_delay_ms`` (``tui.cli``'s first line -> the first send);
- wall: process spawn -> exit (pricing runs after the answer, so it shows here, not in the own delay);
- CPU: the process's user + system time (less disturbed than wall times by a busy machine).

Variants: ``--base DIR`` (a checkout without this work, e.g. ``git archive`` of main's HEAD), this
checkout, and this checkout with ``-a`` a 0.5 MB PNG and a 100 KB text file. Then, in this process:
the first ``price_turn`` (the genai-prices import and lookup), a remembered one, and reading plus
base64-encoding an image attachment of 1 and 5 MB.

    python tests/benchmarks/attach_cost.py [--rounds 7] [--base DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _ask(root: Path, url: str, extra: list[str], data_dir: str) -> tuple[float, float, float]:
    env = {**os.environ, "PYTHONPATH": str(root), "TTFT_DATA_DIR": data_dir, "OPENAI_API_KEY": "sk-bench"}
    env.pop("TTFT_MODEL", None)
    cmd = [
        sys.executable,
        "-m",
        "ttft.tui.cli",
        "ask",
        "-m",
        "openai:gpt-4o-mini",
        "--base-url",
        url,
        *extra,
        "--json",
        "hi",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if p.returncode != 0:
        raise SystemExit(f"ask failed ({root}): {p.stderr[-400:]}")
    return json.loads(p.stdout)["metrics"]["own_delay_ms"], wall, cpu


def _in_process(tmp: Path) -> None:
    from tests.support import files

    t0 = time.perf_counter()
    from ttft.telemetry.cost import PriceRef, price_turn
    from ttft.telemetry.metrics import TokenCounts

    tokens = TokenCounts(1800, 1024, 120, 0, "usage")
    ref = PriceRef("gpt-4o-mini", provider_id="openai")
    price_turn(ref, tokens, "2026-03-02T12:00:00.000+00:00")
    first = (time.perf_counter() - t0) * 1000
    n = 20_000
    t0 = time.perf_counter()
    for _ in range(n):
        price_turn(ref, tokens, "2026-03-02T12:00:00.000+00:00")
    per = (time.perf_counter() - t0) / n * 1e6
    print(f"price_turn: first {first:.0f} ms (the genai-prices import and lookup), then {per:.1f} us a turn")

    from ttft.backends.attachments import Attachment, read_attachment

    for mb in (1, 5):
        path = tmp / f"img{mb}.png"
        path.write_bytes(files.png(64, 64).ljust(mb * 1_000_000, b"\x00"))
        times = []
        for _ in range(9):
            t0 = time.perf_counter()
            a = read_attachment(path)
            assert isinstance(a, Attachment)
            a.data_url()
            times.append((time.perf_counter() - t0) * 1000)
        print(f"read + base64 of a {mb} MB image: median {statistics.median(times):.1f} ms (9 runs)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--base", type=Path, help="a checkout without this work (git archive of main's HEAD)")
    args = p.parse_args()
    from tests.fakes import FakeServer, Schedule
    from tests.support import files

    tmp = Path(tempfile.mkdtemp(prefix="ttft-attach-bench-"))
    pic, notes = tmp / "pic.png", tmp / "notes.txt"
    pic.write_bytes(files.png(1024, 768).ljust(500_000, b"\x00"))  # the fake takes bodies up to 1 MiB
    notes.write_text("a line of notes for the model to read\n" * 2700)  # ~100 KB
    variants: dict[str, tuple[Path, list[str]]] = {}
    if args.base:
        variants["base (main)"] = (args.base.resolve(), [])
    variants["this branch"] = (ROOT, [])
    variants["this branch -a 0.5 MB png -a 100 KB txt"] = (ROOT, ["-a", str(pic), "-a", str(notes)])
    results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in variants}
    with FakeServer(Schedule(first_token_ms=50, token_ms=5, visible_tokens=10, input_tokens=1800)) as srv:
        for root, extra in variants.values():  # one unmeasured run each: the disk cache, .pyc files
            _ask(root, srv.openai_base_url, extra, str(tmp / "data"))
        for _ in range(args.rounds):
            for name, (root, extra) in variants.items():
                results[name].append(_ask(root, srv.openai_base_url, extra, str(tmp / "data")))
    print(f"ttft ask -m openai:gpt-4o-mini against a loopback fake, {args.rounds} interleaved rounds (medians):")
    for name, runs in results.items():
        own = statistics.median(r[0] for r in runs)
        wall = statistics.median(r[1] for r in runs)
        cpu = statistics.median(r[2] for r in runs)
        print(f"  {name:<40} own delay {own:5.0f} ms   wall {wall:5.0f} ms   CPU {cpu:5.0f} ms")
    _in_process(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
