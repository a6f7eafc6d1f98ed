"""A year of session logs: `sessions`, `export` (CSV, Parquet, JSONL), `chat --resume` and `ask --session`
on a 1 GB log, this tree against the release before (commit c11f561), in one run.

    python tests/benchmarks/log_scale.py                 # a 1 GB log (~345,000 turns)
    python tests/benchmarks/log_scale.py --gb 0.1        # a quick run
    python tests/benchmarks/log_scale.py --keep /tmp/big # keep the generated log for the next run

The log is generated from real records (``tests.support.turns``: a played stream, as a recorder
writes it) with the index the writer leaves beside it as it appends each turn (``log_index``; built
here in one go, the same tally the appends would leave: tests/telemetry/log/test_log_index.py
checks that they agree). Each case runs in its own process, cold: a copy of the log's folder made
for it, so no listing has been run before it. Figures per case: wall time, the peak RSS of the
process and of its largest worker (``ru_maxrss``, self and children), and the output's size against
the log's. The release before runs from ``git archive c11f561`` (read only: no worktree), its CLI
on ``PYTHONPATH``; a case past ``--limit`` seconds is reported "over limit". Cases alternate old,
new per case. Also printed: `sessions` with no index at all (a log another version wrote), and
whether the CSVs of both are the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if "--child" not in sys.argv:  # a child imports the code measured from PYTHONPATH (the release before, or this tree)
    sys.path.insert(0, str(ROOT))

BEFORE = "c11f561"
SESSION = "20260101-000000-year"
CASES = ("sessions", "csv", "parquet", "jsonl", "resume", "ask")


def make_log(folder: Path, gb: float) -> Path:
    """``gb`` of turns of a played stream, a 500-character answer each, and the writer's index."""
    from ttft.telemetry.log import log_index
    from ttft.telemetry.log.json_line import encode_line
    from ttft.telemetry.log.turns import line_index, parse_line

    from tests.support.turns import play, stream

    path = folder / f"{SESSION}.jsonl"
    template = play(stream(visible=12))
    filler = "lorem ipsum dolor sit amet " * 20
    tally: log_index.Tally | None = None
    with path.open("wb") as f:
        tally = log_index.new(f.fileno())
        i = 0
        while f.tell() < gb * 1e9:
            rec = dict(template, session_id=SESSION, turn_index=i, prompt=f"question {i}")
            rec["answer"] = f"answer {i}: " + filler[:500]
            rec["status"] = "error" if i % 50 == 0 else "ok"
            line = encode_line(rec)
            f.write(line)
            # what SessionLog.append does for each line under its lock (log_index.appended), in memory
            parsed = parse_line(line)
            if parsed:
                tally.add(parsed)
            tally.take(line_index(line))
            tally.moved_past(line)
            i += 1
    assert log_index.save(path, tally, None)
    return path


# --- in the child -------------------------------------------------------------------------
def _cli(*args: str) -> None:
    from ttft.tui.cli import main

    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (kept open for the process)
    try:
        main(list(args))
    except SystemExit:
        pass
    finally:
        sys.stdout = sys.__stdout__


def _resume(path: Path) -> None:
    """`ttft chat --resume` (the latest session), headless, until the resumed session's note is drawn."""
    import asyncio

    from ttft.tui.chat.app import ChatApp
    from ttft.tui.widgets.transcript import NoteMessage

    from tests.support.tui_support import TimedBackend, factory_for

    try:
        from ttft.telemetry.log.sessions import resolve

        target = resolve(None)  # as `chat --resume` finds the latest session
    except Exception as exc:
        raise SystemExit(str(exc)) from None
    assert target.name == path.name

    async def main() -> None:
        app = ChatApp("fake:timed", factory=factory_for(TimedBackend(visible=1)), resume=target)
        async with app.run_test(size=(120, 40)) as pilot:
            while not any("resumed session" in str(n.content) for n in app.query(NoteMessage)):
                await pilot.pause(0.01)

    asyncio.run(main())


def child(case: str, path: Path, out_dir: Path, base_url: str) -> None:
    t0 = time.perf_counter()
    out = None
    if case == "sessions":
        _cli("sessions")
    elif case in ("csv", "parquet", "jsonl"):
        out = out_dir / f"out.{case}"
        _cli("export", SESSION, "-f", case, "-o", str(out))
    elif case == "resume":
        _resume(path)
    elif case == "ask":
        _cli("ask", "--session", SESSION, "-q", "-m", "compat:fake-model", "--base-url", base_url, "hi")
    took = time.perf_counter() - t0
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime  # this process's and its workers'
    size = out.stat().st_size if out is not None and out.exists() else None
    rss, child_rss = me.ru_maxrss / 1024, kids.ru_maxrss / 1024
    print(json.dumps({"s": took, "cpu": cpu, "rss": rss, "child_rss": child_rss, "out": size}))


# --- in the parent ------------------------------------------------------------------------
def measure(case: str, code: Path, log: Path, limit: float, base_url: str) -> dict[str, object] | str:
    """One case in a fresh copy of the log's folder (cold), run by the code at ``code``."""
    with tempfile.TemporaryDirectory(prefix="ttft-logscale-") as tmp:
        data = Path(tmp)
        sessions = data / "sessions"
        sessions.mkdir()
        os.link(log, sessions / log.name) if _same_fs(log, sessions) else shutil.copy(log, sessions / log.name)
        if (log.parent / ".index").is_dir():
            shutil.copytree(log.parent / ".index", sessions / ".index")
        if case == "ask":  # appends: a copy, so the shared log is never written
            os.unlink(sessions / log.name)
            shutil.copy(log, sessions / log.name)
            # the copy is another file (its inode), so its index is the original's moved to it: the
            # same bytes counted the same (an index never trusts a file other than the one it counted)
            header = sessions / ".index" / f"{log.stem}.json"
            if header.exists():
                h = json.loads(header.read_bytes())
                h["inode"] = (sessions / log.name).stat().st_ino
                header.write_text(json.dumps(h))
        env = {
            **os.environ,
            "TTFT_DATA_DIR": str(data),
            "TTFT_CONFIG_DIR": str(data / "conf"),
            "TTFT_IN_PROCESS": "1",
            "PYTHONPATH": f"{code}{os.pathsep}{ROOT}",  # the code measured first; the benchmark's helpers after
        }
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case, "--log", str(sessions / log.name)]
        cmd += ["--base-url", base_url]
        try:
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit, cwd=data)
        except subprocess.TimeoutExpired:
            return "over limit"
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if p.returncode or not lines:
            return "failed: " + " ".join((p.stderr or p.stdout).strip().splitlines()[-1:])[:200]
        result: dict[str, object] = json.loads(lines[-1])
        if case == "csv":  # kept to compare the two CSVs byte for byte
            shutil.move(str(data / "out.csv"), str(log.parent / f"{code.name}.csv"))
        return result


def same_csv(a: Path, b: Path) -> str:
    """Whether two turn CSVs hold the same cells: byte for byte, or else on the columns both have (a
    column added since the release before is named)."""
    if subprocess.run(["cmp", "-s", str(a), str(b)]).returncode == 0:
        return "the same bytes"
    with a.open(newline="") as fa, b.open(newline="") as fb:
        ra, rb = csv.reader(fa), csv.reader(fb)
        ha, hb = next(ra), next(rb)
        shared = [c for c in ha if c in hb]
        ia, ib = [ha.index(c) for c in shared], [hb.index(c) for c in shared]
        n = 0
        for x, y in itertools.zip_longest(ra, rb):
            if x is None or y is None or [x[i] for i in ia] != [y[i] for i in ib]:
                return f"DIFFERENT at row {n + 1}"
            n += 1
    added = [c for c in hb if c not in ha]
    return f"the same {n} rows, cell for cell, on the {len(shared)} columns both have (added since: {', '.join(added)})"


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _same_fs(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.stat().st_dev


def _fmt(r: dict[str, object] | str, log_size: int) -> str:
    if isinstance(r, str):
        return r
    rss = f"{r['rss']:.0f} MB" + (f" (worker {r['child_rss']:.0f})" if r["child_rss"] else "")
    size = f", {int(r['out']) / log_size:.3f}x log" if r.get("out") else ""  # type: ignore[call-overload]
    return f"{r['s']:.2f} s (cpu {r['cpu']:.1f} s), {rss}{size}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="size of the log (default 1)")
    ap.add_argument("--limit", type=float, default=100, help="seconds before a case is 'over limit' (default 100)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--keep", type=Path, help="a folder to keep (and reuse) the generated log in")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--log", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--base-url", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.log, args.log.parent.parent, args.base_url)
        return

    from tests.fakes.server import FakeServer

    with tempfile.TemporaryDirectory(prefix="ttft-logscale-") as tmp:
        work = Path(tmp)
        old = work / "before"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        folder = args.keep or work / "log"
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"{SESSION}.jsonl"
        if not log.exists() or abs(log.stat().st_size - args.gb * 1e9) > 0.05 * args.gb * 1e9:
            t0 = time.perf_counter()
            for stale in (log, *(folder / ".index").glob("*")) if (folder / ".index").exists() else (log,):
                stale.unlink(missing_ok=True)
            make_log(folder, args.gb)
            print(f"generated in {time.perf_counter() - t0:.0f} s", flush=True)
        size = log.stat().st_size
        with log.open("rb") as f:
            turns = sum(1 for _ in f)
        cpu_lines = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
        cpu = next((ln.split(":", 1)[1].strip() for ln in cpu_lines if ln.startswith("model name")), "?")
        print(f"log: {size / 1e9:.2f} GB, {turns} turns; {os.cpu_count()} cores, {cpu}; limit {args.limit:g} s")
        print(f"load average at the start: {_load()} (a shared machine: wall time grows with others' work, cpu less)")
        print(f"{'case':<22} {'before (' + BEFORE + ')':<48} {'now':<48} ratio")
        srv = FakeServer()
        srv.start()
        try:
            noindex = folder / "noindex"
            for case in args.cases.split(","):
                before = measure(case, old, log, args.limit, srv.openai_base_url)
                now = measure(case, ROOT, log, args.limit, srv.openai_base_url)
                ratio = ""
                if isinstance(before, dict) and isinstance(now, dict):
                    ratio = f"{float(before['s']) / float(now['s']):.1f}x faster"  # type: ignore[arg-type]
                elif before == "over limit" and isinstance(now, dict):
                    ratio = f">{args.limit / float(now['s']):.1f}x faster"  # type: ignore[arg-type]
                print(f"{case:<22} {_fmt(before, size):<48} {_fmt(now, size):<48} {ratio}", flush=True)
                if case == "sessions":  # a log no writer indexed (another version's): counted once, whole
                    noindex.mkdir(exist_ok=True)
                    bare = noindex / log.name
                    if not bare.exists():
                        os.link(log, bare) if _same_fs(log, noindex) else shutil.copy(log, bare)
                    now = measure(case, ROOT, bare, args.limit, srv.openai_base_url)
                    print(f"{'sessions, no index':<22} {'(as above)':<48} {_fmt(now, size):<48}", flush=True)
            a, b = folder / f"{old.name}.csv", folder / f"{ROOT.name}.csv"
            if a.exists() and b.exists():
                print(f"CSV before and now: {same_csv(a, b)}")
            print(f"load average at the end: {_load()}")
            for f in (a, b):
                f.unlink(missing_ok=True)
            shutil.rmtree(noindex, ignore_errors=True)
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
