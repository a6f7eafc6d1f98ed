"""``ttft bench``: the batching trade-off, measured (aggregate tokens/s against each user's speed).

Runs closed-loop concurrency levels or open-loop Poisson rates against any provider, or
against llama.cpp's ``llama-server`` started here (``-m local-server[:PATH.gguf] --slots 4``).
Every request is a ``ttft.turn`` record; the run leaves ``turns.jsonl``, ``summary.json``
(vLLM bench key names), ``levels.csv`` and the charts in ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backends.load import event_loop
from backends.load.driver import LevelCancelled, LoadConfig
from backends.load.runner import BackendSpec, LoadRunner, default_transport, through_proxy
from telemetry.bench import aggregate as agg
from telemetry.bench import summary as bench_summary
from telemetry.bench.requests import read_bench
from telemetry.bench.slo import SLO
from telemetry.log.json_line import encode_line
from telemetry.log.turns import write_all
from telemetry.log.urls import redact_url
from tui import signals
from tui.commands.bench import args as bench_args
from tui.commands.bench import capacity as bench_capacity
from tui.commands.bench.output import HEADER, ProgressLine, bench_charts, level_row, server_line, wait_line
from tui.commands.exits import Exit, for_error_kind
from tui.commands.flags import settings_from_args
from tui.commands.output import note, print_json
from tui.format import visible_controls
from tui.report import charts


def register(sub: argparse._SubParsersAction) -> None:
    bench_args.build(sub, __doc__).set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.find_capacity:
            args.objectives = bench_capacity.parse_objectives(args)
            slo: SLO | None = args.objectives.slo()
        else:
            slo = SLO.parse(args.slo)
    except ValueError as exc:
        print(f"ttft bench: {exc}", file=sys.stderr)
        return 2
    try:
        if not args.json:
            # SIGTERM and SIGHUP stop it like Ctrl-C; on uvloop when installed (backends.load.event_loop)
            return signals.run(bench(args, slo), event_loop.loop_factory())
        # --json: stdout holds the summary alone; the tables and charts go to stderr (or nowhere, -q)
        with contextlib.ExitStack() as stack:
            sink = stack.enter_context(open(os.devnull, "w")) if args.quiet else sys.stderr
            stack.enter_context(contextlib.redirect_stdout(sink))
            rc = signals.run(bench(args, slo), event_loop.loop_factory())
        if (summary := getattr(args, "summary", None)) is not None:
            print_json(summary)
        return rc
    except KeyboardInterrupt as exc:
        print("\nttft bench: interrupted; results so far are in the output folder", file=sys.stderr)
        return signals.exit_code(exc)


# --- the run's files ------------------------------------------------------------------
class TurnsFile:
    """``turns.jsonl``: every record as a valid UTF-8 line. A failed write (disk full) is kept, not raised:
    the run goes on, says so at the end and exits non-zero, and a short write is cut back off the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: OSError | None = None
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)

    def write(self, records: list[dict[str, Any]]) -> None:
        if self.error is not None or not records:
            return
        start = os.lseek(self._fd, 0, os.SEEK_CUR)
        try:
            write_all(self._fd, b"".join(encode_line(r) for r in records))
        except OSError as exc:
            self.error = exc
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
                os.lseek(self._fd, start, os.SEEK_SET)

    def close(self) -> None:
        os.close(self._fd)


def write_results(out: Path, levels: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    summary = bench_summary.summary(levels, meta=meta)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    with (out / "levels.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(bench_summary.CSV_COLUMNS))
        w.writeheader()
        for lv in levels:
            w.writerow(bench_summary.csv_row(lv))
    return summary


async def _wait_for_start(args: argparse.Namespace, meta: dict[str, Any]) -> None:
    """``--start-at``: sleep until that wall-clock moment, after the warm-up; said in the summary."""
    if args.start_at is None:
        return
    meta["start_at"] = datetime.fromtimestamp(args.start_at, UTC).isoformat(timespec="milliseconds")
    ahead = args.start_at - time.time()
    if ahead > 0:
        note(args, f"ttft bench: waiting {ahead:.1f} s for --start-at {meta['start_at']}")
        await asyncio.sleep(ahead)
        return
    meta["started_late_s"] = round(-ahead, 3)
    print(
        f"ttft bench: the warm-up ran {-ahead:.1f} s past --start-at: starting now "
        "(ttft report --merge says how much the runs overlapped)",
        file=sys.stderr,
    )


async def bench(args: argparse.Namespace, slo: SLO | None) -> int:
    mode = "rate" if args.rate else "concurrency"
    levels_in = args.rate or args.concurrency or (1.0, 2.0, 4.0, 8.0)
    if args.find_capacity:  # the levels are the search's; the HTTP pool is sized for its limit
        levels_in = (args.capacity_limit,)
    cfg = LoadConfig(
        mode=mode,  # type: ignore[arg-type]
        levels=tuple(levels_in),
        requests=args.requests,
        warmup=args.warmup,
        input_tokens=args.input_tokens,
        max_output_tokens=args.max_output_tokens,
        seed=args.seed,
        workers=max(1, args.workers),
        max_in_flight=args.max_in_flight,
        max_retries=args.max_retries,
        temperature=args.temperature,
        turn=settings_from_args(args),
        system=args.system,
    )
    if (why := bench_args.check_start(args.start_at, time.time())) is not None:
        print(f"ttft bench: {why}", file=sys.stderr)
        return Exit.USAGE
    # A random tail as session ids have: two runs started in the same second must not share an id
    # (their turns would collide in a merged report or a trace store) nor a default folder.
    run_id = "bench-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
    out: Path = args.out or Path(f"ttft-{run_id}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        turns = TurnsFile(out / "turns.jsonl")
    except OSError as exc:
        print(f"ttft bench: cannot write the results to {out}/: {exc.strerror or exc}", file=sys.stderr)
        return Exit.NOT_SAVED

    server = None
    spec, base_url = args.model, args.base_url
    if spec == bench_args.LOCAL_SERVER or spec.startswith(bench_args.LOCAL_SERVER + ":"):
        from backends.local.llama_server import LlamaServer, LlamaServerError, LlamaServerFailed, default_model

        try:
            path = spec.partition(":")[2]
            model = Path(path).expanduser() if path else default_model()
            server = LlamaServer(
                model,
                slots=args.slots,
                ctx=args.ctx,
                threads=args.threads,
                extra_args=["--ignore-eos"] if args.ignore_eos else [],
            )
            server.log_path = out / "llama-server.log"
            note(args, f"starting llama-server ({model.name}, {args.slots} slots) ...")
            await asyncio.to_thread(server.start)
        except LlamaServerError as exc:
            # Launched but never healthy is a failed run (1); no binary or no model file is the set-up's (2).
            print(visible_controls(f"ttft bench: {exc}"), file=sys.stderr)
            return Exit.FAILED if isinstance(exc, LlamaServerFailed) else Exit.USAGE
        note(args, f"llama-server healthy on {server.url}")
        spec, base_url = f"compat:{server.model_name}", server.base_url

    progress = ProgressLine(args.quiet, search=bool(args.find_capacity))
    lean = not (args.sdk or args.raw_stream)  # every hosted API has a lean reader; --sdk reads with the SDK
    transport = "aiohttp" if args.aiohttp else default_transport()
    via_proxy = lean and through_proxy(spec, base_url)
    if via_proxy and not args.quiet:
        print(
            "ttft bench: a proxy is set for this server (HTTPS_PROXY/HTTP_PROXY/ALL_PROXY): the lean reader "
            "goes through it over httpx2, at more client CPU per chunk",
            file=sys.stderr,
        )
    levels: list[dict[str, Any]] = []
    meta: dict[str, Any] = {
        "run_id": run_id,
        "model_spec": args.model,
        "base_url": redact_url(base_url),  # never its credentials or query values
        "mode": mode,
        "requests_per_level": cfg.requests,
        "warmup": cfg.warmup,
        "input_tokens": cfg.input_tokens,
        "max_output_tokens": cfg.max_output_tokens,
        "seed": cfg.seed,
        "workers": cfg.workers,
        "raw_stream": args.raw_stream,
        "lean": lean,
        "reader": "lean (orjson, httpx2 through the proxy)"
        if via_proxy
        else f"lean (orjson, {'httptools' if transport == 'proto' else 'aiohttp'})"
        if lean
        else "sdk (raw stream)"
        if args.raw_stream
        else "sdk",
        "event_loop": event_loop.running(),  # "uvloop X.Y.Z" or "asyncio" (every worker runs the same)
        "slo": slo.to_dict() if slo else None,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if server is not None:
        bufts = server.bufts()
        meta["server"] = {
            "kind": "llama-server",
            "model": str(server.model),
            "slots": args.slots,
            "ctx": args.ctx,
            "extra_bufts": bufts.use,  # off (--no-repack) on AMX CPUs: see backends.local.amx
            "extra_bufts_reason": bufts.reason,
        }
    try:
        try:
            runner = LoadRunner(
                cfg,
                spec=BackendSpec(
                    spec,
                    base_url,
                    raw_stream=args.raw_stream,
                    options={
                        **({"lean": True} if lean else {}),
                        **({"timeout_s": args.timeout} if args.timeout else {}),
                    },
                    aiohttp=lean and not via_proxy,
                    transport=transport,
                    fast_loop=event_loop.running() != "asyncio",
                ),
                run_id=run_id,
                on_progress=progress,
            )
            async with runner:
                if runner.backend is not None:
                    meta.update(provider=runner.backend.provider, api=runner.backend.api, model=runner.backend.model)

                def keep(records: list[dict[str, Any]]) -> None:
                    turns.write(records)
                    if meta.get("model") is None and records:  # --workers: the backends are the workers'
                        meta.update({k: records[0].get(k) for k in ("provider", "api", "model")})

                try:
                    warm = await runner.warmup()
                except LevelCancelled as exc:  # the turns in flight are kept, as cancelled
                    keep(exc.records)
                    raise
                keep(warm.records if warm else [])
                warmed = read_bench(warm.records).turns if warm else []
                if warmed and all(t.record.status != "ok" for t in warmed):
                    progress.end()
                    err = warmed[0].record.error
                    msg = visible_controls(f"ttft bench: every warm-up request failed: {err.message if err else None}")
                    print(msg, file=sys.stderr)  # the server's words: shown, never run
                    return Exit.FAILED
                await _wait_for_start(args, meta)
                print(HEADER)
                if args.find_capacity:

                    def probed(p: Any) -> None:
                        progress.end()
                        if p.unreadable:  # a worker's record that does not read: left out of the verdict
                            print(f"ttft bench: left out {p.unreadable} unreadable record(s)", file=sys.stderr)
                        for line in bench_capacity.probe_lines(p, level_row):
                            print(line, flush=True)

                    search = await bench_capacity.run_search(
                        runner, args, args.objectives, on_records=keep, on_probe=probed
                    )
                    levels.extend(search.levels())
                    meta["capacity"] = search.summary()
                for i in range(0 if args.find_capacity else len(cfg.levels)):
                    before = await asyncio.to_thread(server.metrics) if server else None
                    try:
                        res = await runner.level(i)
                    except LevelCancelled as exc:
                        keep(exc.records)
                        raise
                    keep(res.records)
                    read = read_bench(res.records)
                    if (problem := read.message()) is not None:  # a worker's record that does not read
                        print(visible_controls(f"ttft bench: {problem}"), file=sys.stderr)
                    a = agg.aggregate_level(read.turns, level=res.level, mode=res.mode, slo=slo, client=res.client)
                    if server is not None and before is not None:
                        from backends.local.llama_server import metrics_delta

                        a["server_metrics"] = metrics_delta(before, await asyncio.to_thread(server.metrics))
                    levels.append(a)
                    progress.end()
                    print(level_row(a), flush=True)
                    if (line := server_line(a)) is not None:
                        print(line, flush=True)
                    if (line := wait_line(a)) is not None:
                        print(line, flush=True)
        except Exception as exc:  # a bad spec or a missing key: one sentence, no traceback
            progress.end()
            hint = getattr(exc, "hint", None)
            print(visible_controls(f"ttft bench: {exc}" + (f" {hint}" if hint else "")), file=sys.stderr)
            if not levels:
                return for_error_kind(getattr(exc, "kind", "bad_spec"))
    finally:
        turns.close()
        if server is not None:
            server.stop()

    meta["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    unsaved: list[str] = []  # what could not be written (disk full, a folder gone read-only): said, exit 1
    if turns.error is not None:
        unsaved.append(f"{turns.path}: {turns.error.strerror or turns.error}")
    try:
        summary = write_results(out, levels, meta)
    except OSError as exc:
        unsaved.append(f"summary.json / levels.csv: {exc.strerror or exc}")
        summary = bench_summary.summary(levels, meta=meta)
    args.summary = {**summary, "out": str(out)}  # for --json
    title = meta.get("model") or args.model
    width = 78
    if args.charts == "png" and not charts.png_available():
        print("ttft bench: PNG charts need matplotlib (pip install matplotlib); writing SVG", file=sys.stderr)
    for name, chart in bench_charts(levels, str(title), meta.get("capacity")):
        print()
        print(chart.terminal(width, 18))
        try:
            charts.write_chart(chart, out / name, args.charts)
        except OSError as exc:
            unsaved.append(f"the {name} chart: {exc.strerror or exc}")
    print()
    print(summary["conclusion"])
    if meta.get("capacity"):
        print()
        print(meta["capacity"]["conclusion"])
    if slo:
        print(f"SLOs: {slo.describe()}")
    if unsaved:
        for what in unsaved:
            print(f"ttft bench: could not write {what}", file=sys.stderr)
        return Exit.NOT_SAVED
    print(f"\nresults in {out}/ (turns.jsonl, summary.json, levels.csv, tradeoff + ttft charts)")
    return Exit.OK if levels and all(lv["completed"] for lv in levels) else Exit.FAILED
