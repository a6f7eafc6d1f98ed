"""Time and peak memory of `chat --resume`, `sessions`, `export` and `report` on large session logs.

    python tests/benchmarks/resume_scale.py            # a 2,000-turn log (~3 MB) and a ~100 MB log
    python tests/benchmarks/resume_scale.py --mb 20    # a smaller big log

Each case runs in its own process (so its peak RSS, ``ru_maxrss``, is its own) against logs generated
in a temporary folder. `chat --resume` drives the chat headless (``run_test``) and is timed from the
app's start until the transcript shows the resumed session's note (after its last turn is drawn).
A case that takes longer than ``--limit`` seconds is reported as such.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CASES = ("resume", "sessions", "export", "report")


def make_log(path: Path, turns: int, answer_chars: int) -> int:
    """A session of ``turns`` well-formed records (a real recorder's shape), written line by line."""
    from ttft.telemetry.log.json_line import encode_line

    from tests.support.turns import play, stream

    template = play(stream(visible=12))
    filler = "lorem ipsum dolor sit amet " * (answer_chars // 27 + 1)
    with path.open("wb") as f:
        for i in range(turns):
            rec = dict(template, session_id=path.stem, turn_index=i)
            rec["prompt"] = f"question {i}"
            rec["answer"] = f"answer {i}: " + filler[:answer_chars]
            f.write(encode_line(rec))
    return path.stat().st_size


def _resume(path: Path) -> None:
    from ttft.tui.chat.app import ChatApp
    from ttft.tui.widgets.transcript import NoteMessage

    from tests.support.tui_support import TimedBackend, factory_for

    async def main() -> None:
        app = ChatApp("fake:timed", factory=factory_for(TimedBackend(visible=1)), resume=path)
        async with app.run_test(size=(120, 40)) as pilot:
            while not any("resumed session" in str(n.content) for n in app.query(NoteMessage)):
                await pilot.pause(0.01)

    asyncio.run(main())


def _cli(*args: str) -> None:
    from ttft.tui.cli import main

    devnull = open(os.devnull, "w")  # noqa: SIM115 (kept open for the process)
    sys.stdout = devnull
    try:
        main(list(args))
    except SystemExit:
        pass
    finally:
        sys.stdout = sys.__stdout__


def run_case(case: str, path: Path, out_dir: Path) -> None:
    """In the child: one case, then its time and peak RSS as one JSON line."""
    t0 = time.perf_counter()
    if case == "resume":
        _resume(path)
    elif case == "sessions":
        _cli("sessions")
    elif case == "export":
        _cli("export", str(path), "-o", str(out_dir / "out.jsonl"))
    elif case == "report":
        _cli("report", str(path))
    took = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"case": case, "s": round(took, 2), "maxrss_mb": round(rss_mb)}))


def measure(case: str, path: Path, data: Path, limit: float) -> str:
    env = {**os.environ, "TTFT_DATA_DIR": str(data), "TTFT_CONFIG_DIR": str(data / "conf"), "TTFT_IN_PROCESS": "1"}
    cmd = [sys.executable, __file__, "--child", case, "--log", str(path)]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return f"did not finish in {limit:g} s"
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        return f"failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"
    d = json.loads(lines[-1])
    return f"{d['s']:.2f} s, {d['maxrss_mb']} MB peak RSS"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100, help="size of the big log (default 100)")
    ap.add_argument("--limit", type=float, default=120, help="seconds before a case counts as not finishing")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--log", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_case(args.child, args.log, args.log.parent)
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        sessions = data / "sessions"
        sessions.mkdir()
        (data / "conf").mkdir()
        small = sessions / "20260101-000000-2k00.jsonl"
        size = make_log(small, 2000, 500)
        logs = [("2,000 turns", small, size)]
        big = sessions / "20260101-000001-big0.jsonl"
        per_turn = size / 2000
        size = make_log(big, int(args.mb * 1e6 / per_turn), 500)
        logs.append((f"{size / 1e6:.0f} MB", big, size))
        for label, path, _size in logs:
            print(f"{label} ({path.stat().st_size / 1e6:.1f} MB):")
            for case in args.cases.split(","):
                if case == "sessions" and path is small:
                    continue  # lists every session: measured once, with both logs there
                print(f"  {case:<9} {measure(case, path, data, args.limit)}", flush=True)
                if case == "sessions":  # again: now the index says what was read before
                    print(f"  {'(again)':<9} {measure(case, path, data, args.limit)}", flush=True)


if __name__ == "__main__":
    main()
