"""Does the chat UI disturb what it measures? Run the real app headless against a loopback server.

The fake server (tests.fakes) runs in its own process, so it does not share our GIL, and
streams on a known schedule (default 2000 tokens/s). The app consumes the stream with the
real OpenAI SDK on its background stream loop while the UI thread paints at its frame rate.
We print, over all turns:

- TTFT error: |measured TTFT - scheduled first_token_ms| (includes loopback transit);
- gap error: |measured inter-chunk gap - scheduled gap| for every consecutive pair;
- stamp error: |chunk stamp - (server's request arrival + scheduled offset)| (both processes
  read the same CLOCK_MONOTONIC), the absolute version of the two above;
- render lag p50/p95 (arrival -> on screen) and whether a backlog grew over the turn;
- CPU use of this process (UI + stream thread) and of the stream thread alone;
- paint cost p50/p95 (a change to the answer -> on screen), for a fresh chat and for one
  resumed with ``--history`` prior turns (Markdown answers with lists and code): a paint
  must not cost more with more history.

A headless baseline (the same turns with run_turn and no UI) shows what the UI adds.

``--versus DIR`` measures the paint before and after in one interleaved run: this checkout's chat and
the one in DIR (an older checkout, e.g. ``git archive main | tar -x -C /tmp/base``), each a fresh
process per round, in alternating order, against one fake server. Per turn it prints

- the render lag after the stream ended: the last token's arrival stamp -> the screen refresh that
  first shows the answer's full render (and, apart, when the pane showed the turn's figures);
- the CPU of the chat's process tree (the UI process and its backend process, the fake server not
  included) over the turn's stream and end: first token -> full render on screen, in % of one core,
  sampled from outside the tree, and per 1,000 tokens (what a busy machine stretches least).

    python tests/benchmarks/ui_fidelity.py [--tokens-per-s 2000] [--tokens 2000] [--turns 5] [--history 50]
    python tests/benchmarks/ui_fidelity.py --panes 4      # the compare screen: 4 panes at 500 tokens/s each
    python tests/benchmarks/ui_fidelity.py --tokens-per-s 4000 --versus /tmp/base --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

# --code DIR (the --versus child): that checkout's modules, not this one's
sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(Path(__file__).parents[2]))


from ttft.backends.base import ChatRequest, Message
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry.metrics import percentiles

HERE = Path(__file__).resolve().parents[2]
TARGETS = "targets: TTFT and gap error median <= 1 ms, p99 <= 5 ms; render lag p95 <= 100 ms"


def _serve(conn: Any, schedule_kw: dict[str, Any]) -> None:
    """The fake server, in its own process; it also stamps when it actually wrote each token chunk."""
    import tests.fakes as fakes

    written: dict[int, list[int]] = {}
    original = fakes._Stream.data

    async def data(self: Any, obj: Any, event: str | None = None) -> None:
        await original(self, obj, event)
        if isinstance(obj, dict):
            delta = ((obj.get("choices") or [{}])[0] or {}).get("delta") or {}
            if delta.get("content") or delta.get("reasoning_content"):
                written.setdefault(id(self.rec), []).append(time.monotonic_ns())

    fakes._Stream.data = data  # type: ignore[method-assign]
    srv = fakes.FakeServer(fakes.Schedule(**schedule_kw)).start()
    conn.send(srv.openai_base_url)
    while True:
        cmd = conn.recv()
        if cmd == "requests":
            reqs = [r for r in srv.requests if r.path.endswith("completions")]
            conn.send([(r.received_ns, written.get(id(r), [])) for r in reqs])
        elif cmd == "stop":
            srv.stop()
            conn.send("ok")
            return


def make_backend(base_url: str) -> Any:
    from ttft.backends.providers.openai_chat import OpenAIChatBackend

    return OpenAIChatBackend("fake-model", provider="fake", base_url=base_url, api_key="sk-bench")


def errors(records: list[dict[str, Any]], served: list[tuple[int, list[int]]], schedule_kw: dict[str, Any]) -> dict:
    """Measured vs scheduled (what the issue asks), and measured vs when the server really wrote each chunk."""
    from ttft.telemetry.record import chunk_times_ms

    from tests.fakes import Schedule

    at = [a for a, _, _ in Schedule(**schedule_kw).chunks()]
    out: dict[str, list[float]] = {k: [] for k in ("ttft", "gap", "stamp_vs_write", "gap_vs_write", "server_late")}
    for rec, (arrived, writes) in zip(records, served, strict=True):
        chunks = chunk_times_ms(rec)  # ms from sent, any log schema
        if rec["metrics"]["ttft_ms"] is not None:
            out["ttft"].append(abs(rec["metrics"]["ttft_ms"] - at[0]))
        for (a, b), (sa, sb) in zip(itertools.pairwise(chunks), itertools.pairwise(at), strict=False):
            out["gap"].append(abs((b - a) - (sb - sa)))
        sent_ns = rec["_sent_ns"]
        stamps = [sent_ns + c * 1e6 for c in chunks]
        # One SSE event per token here, so chunk i is write i (the client may read several per recv).
        for st, w in zip(stamps, writes, strict=False):
            out["stamp_vs_write"].append(abs(st - w) / 1e6)
        for (a, b), (wa, wb) in zip(itertools.pairwise(stamps), itertools.pairwise(writes), strict=False):
            out["gap_vs_write"].append(abs((b - a) - (wb - wa)) / 1e6)
        for w, s in zip(writes, at, strict=False):
            out["server_late"].append((w - arrived) / 1e6 - s)
    return out


def line(name: str, vals: list[float]) -> str:
    p = percentiles(vals)
    if not vals:
        return f"  {name:<22} (none)"
    return f"  {name:<22} median {p.p50:7.3f} ms   p99 {p.p99:7.3f} ms   max {p.max:7.3f} ms   (n={len(vals)})"


class ThreadCPU:
    """CPU seconds of this process and of one thread (by native id)."""

    def __init__(self) -> None:
        self.proc = psutil.Process()

    def sample(self, native_id: int | None) -> tuple[float, float]:
        t = self.proc.cpu_times()
        thread = 0.0
        for th in self.proc.threads():
            if th.id == native_id:
                thread = th.user_time + th.system_time
        return t.user + t.system, thread


HISTORY_ANSWER = """## Step {i}

Prefill reads the whole prompt at once; decode writes one token at a time, so **TTFT** grows
with the prompt and **TPOT** with the model size. A longer paragraph wraps over several lines
in the transcript, which is what a real answer looks like.

- first point about the *cache*
- second point, with `inline code`
- third point

```python
def step_{i}(tokens: list[int]) -> int:
    return sum(t * 2 for t in tokens)
```

That is all for step {i}.
"""


def history_log(template: dict[str, Any], n: int, directory: Path) -> Path:
    """A session log with ``n`` finished turns (Markdown answers) for the app to resume."""
    import json

    path = directory / "history.jsonl"
    with path.open("w") as f:
        for i in range(n):
            rec = {k: v for k, v in template.items() if not k.startswith("_")}
            rec.update(turn_index=i, prompt=f"question {i}", answer=HISTORY_ANSWER.format(i=i), session_id="history")
            f.write(json.dumps(rec) + "\n")
    return path


async def run_ui(
    base_url: str, turns: int, size: tuple[int, int], isolated: bool = True, resume: Path | None = None
) -> tuple[list[dict[str, Any]], list[dict], dict]:
    from ttft.tui.chat.app import ChatApp

    from tests.support.tui_support import wait_until

    backend_holder: dict[str, Any] = {}

    def factory(spec: str, url: str | None) -> Any:
        if isolated:  # what `ttft chat` does: the backend in its own process
            from ttft.backends.ask.isolated import ProcessBackend

            backend_holder["b"] = ProcessBackend("compat:fake-model", base_url)
        else:
            backend_holder["b"] = make_backend(base_url)
        return backend_holder["b"]

    app = ChatApp("fake:fake-model", factory=factory, session_id="bench", resume=resume)
    records: list[dict[str, Any]] = []
    lags: list[dict] = []
    cpu = ThreadCPU()
    stream_tid = app.runner._thread.native_id
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: resume is None or bool(app.chat.session.records), timeout=60)
        await pilot.pause(0.5)
        prior = len(app.chat.session.records)
        wall0 = time.perf_counter()
        p0, s0 = cpu.sample(stream_tid)
        for i in range(turns):
            app.query_one("#prompt").value = f"turn {i}: write a long answer"
            await pilot.press("enter")
            await wait_until(
                pilot, lambda n=i: len(app.chat.session.records) == prior + n + 1 and not app.chat.busy, timeout=60
            )
            rec = app.chat.session.records[-1].to_dict()  # with _sent_ns (see main)
            records.append(rec)
            lags.append(app.chat.drawn.lag_by_turn[rec["turn_index"]])
        p1, s1 = cpu.sample(stream_tid)
        wall = time.perf_counter() - wall0
        cpu_info = {"process": (p1 - p0) / wall, "stream_thread": (s1 - s0) / wall, "wall_s": wall}
        cpu_info["widgets"] = len(list(app.screen.walk_children()))
    return records, lags, cpu_info


async def run_headless(base_url: str, turns: int) -> list[dict[str, Any]]:
    backend = make_backend(base_url)
    out = []
    for i in range(turns):
        req = ChatRequest((Message("user", f"turn {i}"),))
        rec = new_recorder(backend, req, session_id="bench-headless", turn_index=i)
        record = await run_turn(backend, req, rec)
        d = record.to_dict()
        d["_sent_ns"] = record.timestamps.sent
        out.append(d)
    await backend.aclose()
    return out


# --- before and after in one interleaved run (--versus) -------------------------------------------
async def one_run(base_url: str, turns: int, size: tuple[int, int]) -> list[dict[str, Any]]:
    """One fresh chat (the code on sys.path), ``turns`` turns: per turn, the stamps that bound it."""
    from textual.screen import Screen
    from ttft.backends.ask.isolated import ProcessBackend
    from ttft.tui.chat.app import ChatApp
    from ttft.tui.chat.screen import ChatScreen

    rendered: dict[int, int] = {}  # id(the turn's answer widget) -> when its full render was first on screen
    figures: dict[int, int] = {}  # turn index -> when the pane showed its figures
    answers: dict[int, int] = {}  # turn index -> id(its answer widget)

    def after_refresh(screen: Any) -> None:
        msg = getattr(screen, "answer", None)  # the chat's answer being drawn (either checkout has it)
        if msg is not None and id(msg) not in rendered and msg.answer.display and not msg.stream.display:
            rendered[id(msg)] = time.monotonic_ns()

    for name in ("_refresh_layout", "_compositor_refresh"):
        method = getattr(Screen, name)

        def wrapped(self: Any, *a: Any, _method: Any = method, **k: Any) -> Any:
            out = _method(self, *a, **k)
            after_refresh(self)
            return out

        setattr(Screen, name, wrapped)
    # Where the chat shows a turn's figures: its painter (tui.chat.paint), or the screen in an older checkout.
    try:
        from ttft.tui.chat.paint import TurnPainter as owner
    except ImportError:
        owner = ChatScreen
    original = owner._show_figures

    def show_figures(self: Any, event: Any) -> None:
        figures.setdefault(event.record.turn_index, time.monotonic_ns())
        screen = getattr(self, "screen", self)
        if screen.drawn.answer is not None:
            answers[event.record.turn_index] = id(screen.drawn.answer)
        original(self, event)

    owner._show_figures = show_figures  # type: ignore[method-assign]
    app = ChatApp(
        "fake:fake-model",
        factory=lambda spec, url: ProcessBackend("compat:fake-model", base_url),
        session_id="bench",
        warm_up=True,  # as `ttft chat` does
    )
    out: list[dict[str, Any]] = []

    async def until(cond: Any) -> None:
        # a plain sleep, not the pilot's pause: that waits on the screen's queue, and at every 20 ms its
        # own work was a quarter of the UI thread's CPU while a turn streamed (not the chat's)
        deadline = time.monotonic() + 60
        while not cond():
            assert time.monotonic() < deadline, "condition not reached in time"
            await asyncio.sleep(0.1)

    async with app.run_test(size=size) as pilot:
        await until(lambda: app.chat.session.backend is not None)
        await asyncio.sleep(1.0)  # the warm-up's first stream is done
        for i in range(turns):
            app.query_one("#prompt").value = f"turn {i}: write a long answer"  # type: ignore[attr-defined]
            await pilot.press("enter")
            await until(lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy)
            rec = app.chat.session.records[-1]
            ts = rec.timestamps
            lag = app.chat.drawn.lag_by_turn.get(rec.turn_index, {})
            done_ns = rendered.get(answers.get(rec.turn_index, -1), figures[rec.turn_index])
            out.append(
                {
                    "first_token_ns": ts.first_token,
                    "last_token_ns": ts.last_token,
                    "shown_ns": done_ns,
                    "end_lag_ms": (done_ns - (ts.last_token or 0)) / 1e6,
                    "figures_ms": (figures[rec.turn_index] - (ts.last_token or 0)) / 1e6,
                    "lag_p50_ms": lag.get("p50_ms"),
                    "lag_p95_ms": lag.get("p95_ms"),
                    "paints": lag.get("paints"),
                    "tokens": rec.tokens.output,
                }
            )
            await asyncio.sleep(0.5)  # between turns, as a reader would: the collection after a turn is not timed
    return out


class TreeSampler:
    """CPU seconds of a process and of its descendants, sampled every ``every_s`` from outside the tree."""

    def __init__(self, pid: int, every_s: float = 0.01) -> None:
        self.proc = psutil.Process(pid)
        self.every_s = every_s
        # (monotonic ns, own CPU s, descendants' CPU s, own main thread's CPU s)
        self.samples: list[tuple[int, float, float, float]] = []
        self._stop = threading.Event()
        self._kids: dict[int, psutil.Process] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _cpu(self, p: psutil.Process) -> float:
        t = p.cpu_times()
        return t.user + t.system

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                own = self._cpu(self.proc)
                for k in self.proc.children(recursive=True):
                    self._kids.setdefault(k.pid, k)
                kids = 0.0
                for k in list(self._kids.values()):
                    try:
                        kids += self._cpu(k)
                    except psutil.Error:
                        self._kids.pop(k.pid, None)
                main = next((t.user_time + t.system_time for t in self.proc.threads() if t.id == self.proc.pid), 0.0)
                self.samples.append((time.monotonic_ns(), own, kids, main))
            except psutil.Error:
                return
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, t_ns: int) -> tuple[float, float, float]:
        """(own, descendants, own main thread) CPU seconds at ``t_ns``, from the nearest sample at or before it."""
        best = self.samples[0]
        for s in self.samples:
            if s[0] > t_ns:
                break
            best = s
        return best[1], best[2], best[3]


def run_versus(args: argparse.Namespace, base_url: str) -> None:
    """Both checkouts, ``--rounds`` fresh processes each, in alternating order; per-turn figures, medians."""
    codes = {"this checkout": str(HERE), f"--versus {args.versus}": str(Path(args.versus).resolve())}
    results: dict[str, list[list[dict[str, Any]]]] = {k: [] for k in codes}
    for r in range(args.rounds):
        order = list(codes) if r % 2 == 0 else list(reversed(codes))
        for name in order:
            cmd = [sys.executable, __file__, "--one-run", "--code", codes[name], "--base-url", base_url]
            cmd += ["--turns", str(args.turns), "--size", args.size]
            env = {**os.environ, "TTFT_DATA_DIR": tempfile.mkdtemp(prefix="ttft-bench-"), "PYTHONPATH": codes[name]}
            child = subprocess.Popen(cmd, cwd=codes[name], env=env, stdout=subprocess.PIPE, text=True)
            sampler = TreeSampler(child.pid)
            stdout, _ = child.communicate(timeout=600)
            sampler.stop()
            turns = json.loads(stdout.strip().splitlines()[-1])
            for t in turns:
                (u0, k0, m0), (u1, k1, m1) = sampler.at(t["first_token_ns"]), sampler.at(t["shown_ns"])
                wall = (t["shown_ns"] - t["first_token_ns"]) / 1e9
                t["cpu_ui_pct"], t["cpu_backend_pct"] = 100 * (u1 - u0) / wall, 100 * (k1 - k0) / wall
                t["cpu_main_pct"] = 100 * (m1 - m0) / wall
                # CPU per token: what a busy machine stretches least (a starved process's % of a core falls
                # as its turn's wall time grows; its CPU seconds per token stay)
                per_k = 1000 / max(1, t["tokens"] or 0)
                t["tree_ms_per_k"] = 1000 * ((u1 - u0) + (k1 - k0)) * per_k
                t["main_ms_per_k"] = 1000 * (m1 - m0) * per_k
                t["backend_ms_per_k"] = 1000 * (k1 - k0) * per_k
                t["cpu_tree_pct"] = t["cpu_ui_pct"] + t["cpu_backend_pct"]
            results[name].append(turns)
            print(f"  round {r + 1} {name}: " + "  ".join(versus_cells(turns)), flush=True)
    print(f"\nmedians over {args.rounds} rounds x {args.turns} turns (each round a fresh chat process):")
    for name, runs in results.items():
        flat = [t for run in runs for t in run]
        per_run = [statistics.median(t["end_lag_ms"] for t in run) for run in runs]
        print(f"  {name:<28} " + "  ".join(versus_cells(flat)))
        print(f"  {'':<28} end lag per round (median of its turns): {', '.join(f'{x:.0f}' for x in per_run)} ms")
    print(f"load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


def versus_cells(turns: list[dict[str, Any]]) -> list[str]:
    def med(key: str) -> float:
        return statistics.median(t[key] for t in turns if t.get(key) is not None)

    return [
        f"end lag {med('end_lag_ms'):6.1f} ms (figures at {med('figures_ms'):4.0f})",
        f"tree CPU {med('cpu_tree_pct'):5.1f}% (UI {med('cpu_ui_pct'):5.1f}%, of it the main thread"
        f" {med('cpu_main_pct'):5.1f}%; backend {med('cpu_backend_pct'):5.1f}%)",
        f"CPU per 1,000 tokens {med('tree_ms_per_k'):4.0f} ms (UI main thread {med('main_ms_per_k'):3.0f},"
        f" backend {med('backend_ms_per_k'):3.0f})",
        f"render lag p50 {med('lag_p50_ms'):5.1f} ms p95 {med('lag_p95_ms'):5.1f} ms",
        f"paints {med('paints'):.0f}",
    ]


def where(isolated: bool) -> str:
    return "backend in its own process (the default)" if isolated else "backend in the UI process (TTFT_IN_PROCESS=1)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens-per-s", type=float, default=2000.0)
    ap.add_argument("--tokens", type=int, default=2000, help="visible tokens per turn")
    ap.add_argument("--first-token-ms", type=float, default=200.0)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--compare-in-process", action="store_true", help="also run with the backend in the UI process")
    ap.add_argument("--history", type=int, default=50, help="also run resumed with this many prior turns (0: skip)")
    ap.add_argument(
        "--panes", type=int, default=1, help="2-4: the compare screen instead, with this many panes (compare_fidelity)"
    )
    ap.add_argument("--versus", metavar="DIR", help="also run the chat of the checkout in DIR, interleaved (see above)")
    ap.add_argument("--rounds", type=int, default=3, help="with --versus: fresh processes per checkout")
    ap.add_argument("--one-run", action="store_true", help=argparse.SUPPRESS)  # a --versus child
    ap.add_argument("--code", help=argparse.SUPPRESS)  # the checkout a --versus child imports
    ap.add_argument("--base-url", help=argparse.SUPPRESS)  # the fake server a --versus child talks to
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    if args.one_run:
        print(json.dumps(asyncio.run(one_run(args.base_url, args.turns, (w, h)))))
        return 0
    if args.panes > 1:  # the same figures for the compare screen, each pane at its own (default) rate
        import compare_fidelity

        given = [a for a in sys.argv[1:] if a.startswith("--")]
        sys.argv = [compare_fidelity.__file__, "--panes", str(args.panes)]
        for flag in ("--tokens-per-s", "--tokens", "--first-token-ms", "--size"):
            if flag in given:
                sys.argv += [flag, str(getattr(args, flag[2:].replace("-", "_")))]
        return compare_fidelity.main()
    os.environ["TTFT_DATA_DIR"] = tempfile.mkdtemp(prefix="ttft-bench-")
    schedule_kw = {
        "first_token_ms": args.first_token_ms,
        "token_ms": 1000.0 / args.tokens_per_s,
        "visible_tokens": args.tokens,
        "reasoning_tokens": 0,
    }
    parent, child = mp.Pipe()
    server = mp.get_context("spawn").Process(target=_serve, args=(child, schedule_kw), daemon=True)
    server.start()
    base_url = parent.recv()

    def served(n_before: int, n: int) -> list[tuple[int, list[int]]]:
        parent.send("requests")
        return parent.recv()[n_before : n_before + n]

    print(
        f"ui_fidelity: {args.turns} turns x {args.tokens} tokens at {args.tokens_per_s:.0f} tokens/s "
        f"(first token at {args.first_token_ms:.0f} ms), app at {w}x{h}; {os.cpu_count()} CPUs; "
        f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )

    if args.versus:
        run_versus(args, base_url)
        parent.send("stop")
        parent.recv()
        return 0

    # The app records the send stamp only as ms offsets; keep the absolute one for stamp errors.
    import ttft.telemetry.record as record_mod

    original = record_mod.TurnRecord.to_dict

    def to_dict(self: Any) -> dict[str, Any]:
        d = original(self)
        d["_sent_ns"] = self.timestamps.sent
        return d

    record_mod.TurnRecord.to_dict = to_dict  # type: ignore[method-assign]

    headless = asyncio.run(run_headless(base_url, args.turns))
    e0 = errors(headless, served(0, args.turns), schedule_kw)
    runs = []
    done = args.turns
    for isolated in (True, False) if args.compare_in_process else (True,):
        ui_records, lags, cpu = asyncio.run(run_ui(base_url, args.turns, (w, h), isolated))
        runs.append((isolated, ui_records, lags, cpu, errors(ui_records, served(done, args.turns), schedule_kw)))
        done += args.turns
    if args.history:
        resume = history_log(headless[0], args.history, Path(os.environ["TTFT_DATA_DIR"]))
        ui_records, lags, cpu = asyncio.run(run_ui(base_url, args.turns, (w, h), True, resume))
        history_run = (ui_records, lags, cpu, errors(ui_records, served(done, args.turns), schedule_kw))
        done += args.turns
    parent.send("stop")
    parent.recv()

    labels = {
        "ttft": "TTFT error (vs plan)",
        "gap": "gap error (vs plan)",
        "stamp_vs_write": "stamp - server write",
        "gap_vs_write": "gap error (vs writes)",
        "server_late": "server late vs plan",
    }
    print("\nheadless baseline (run_turn, no UI):")
    for k, label in labels.items():
        print(line(label, e0[k]))

    def paint_line(lags: list[dict], cpu: dict) -> str:
        p50 = percentiles([x["paint_p50_ms"] for x in lags if x.get("paint_p50_ms") is not None]).p50 or 0
        p95 = max((x["paint_p95_ms"] for x in lags if x.get("paint_p95_ms") is not None), default=0)
        return f"  paint cost             p50 {p50:.1f} ms   p95 {p95:.1f} ms (worst turn)   widgets {cpu['widgets']}"

    shown = [(f"with the chat UI painting, {where(iso)}:", lags, cpu, e1) for iso, _r, lags, cpu, e1 in runs]
    if args.history:
        _r, lags, cpu, e1 = history_run
        shown.append((f"the same, resumed with {args.history} prior turns in the transcript:", lags, cpu, e1))
    for title, lags, cpu, e1 in shown:
        print(f"\n{title}")
        for k, label in labels.items():
            print(line(label, e1[k]))
        p50s = [x["p50_ms"] for x in lags if x.get("p50_ms") is not None]
        p95s = [x["p95_ms"] for x in lags if x.get("p95_ms") is not None]
        print(
            f"  render lag             p50 {percentiles(p50s).p50 or 0:.1f} ms   p95 {max(p95s, default=0):.1f} ms "
            f"(worst turn)   paints/turn {percentiles([x['paints'] for x in lags]).p50:.0f}"
        )
        print(f"  render lag p95/turn    {', '.join(f'{x:.0f}' for x in p95s)} ms")
        growth = [x.get("lag_growth") for x in lags]
        backlog = [x.get("backlog_max") for x in lags]
        print(
            f"  backlog                max chunks unpainted at a paint {max(backlog, default=0)}; "
            f"lag 2nd half / 1st half per turn {', '.join(f'{g:.2f}' if g else '-' for g in growth)}"
        )
        print(
            f"  CPU                    UI process {100 * cpu['process']:.0f}% of a core, "
            f"its stream thread {100 * cpu['stream_thread']:.0f}%, over {cpu['wall_s']:.1f} s"
        )
        print(paint_line(lags, cpu))
    print(TARGETS)
    _, _, lags, _, e1 = runs[0]
    p95s = [x["p95_ms"] for x in lags if x.get("p95_ms") is not None]
    ok = (
        percentiles(e1["ttft"]).p50 <= 1
        and percentiles(e1["gap"]).p50 <= 1
        and percentiles(e1["ttft"]).p99 <= 5
        and percentiles(e1["gap"]).p99 <= 5
        and max(p95s, default=0) <= 100
    )
    print("verdict (default mode):", "within targets" if ok else "OUTSIDE targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
