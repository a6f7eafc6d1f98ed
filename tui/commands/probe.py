"""``ttft probe -m SPEC``: this model's latency as a function of its work, measured and fitted.

Runs the designed experiment of :mod:`backends.probe.plan` (it says first what it
will spend), fits it (:mod:`telemetry.probe.fit`), prints a chart of TTFT against
input tokens with the fit, the figures with their intervals and the levers in plain
words, and saves the fit for this provider, model and base URL, which the chat and
``ask`` then use to split a turn's server wait. ``--json`` prints exactly the fit's
keys plus ``points``; ``--out DIR`` keeps every turn as ``ttft.turn`` JSONL, the
chart as SVG and the JSON. Exit 0 when a fit was made, 1 when not, 2 on bad usage, 3 when
``--out`` or the saved fit cannot be written (codes from ``tui.commands.exits``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from telemetry.duration import fmt_ms
from tui.commands.args import model_spec, positive_int
from tui.commands.exits import Exit, for_error_kind
from tui.commands.flags import add_local_flags, add_turn_flags, local_extra, local_flags_problem, settings_from_args
from tui.commands.help import examples
from tui.commands.output import add_output_flags, json_text, print_json
from tui.format import visible_controls

USAGE_ERROR = int(Exit.USAGE)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="measure how this model's TTFT and E2E grow with input and output tokens",
        description=__doc__,
        epilog=examples(
            "ttft probe -m local --quick",
            "ttft probe -m compat:qwen3 --base-url http://127.0.0.1:8080/v1 --budget 20000 --out probe/",
            "ttft probe -m openai:gpt-4o-mini --json -q > fit.json",
        ),
    )
    p.add_argument("-m", "--model", type=model_spec, metavar="PROVIDER:MODEL", help="as for ttft ask (e.g. local)")
    p.add_argument("--base-url", help="the API's address (e.g. http://127.0.0.1:8080/v1 for a compat server)")
    p.add_argument("--quick", action="store_true", help="a smaller plan: fewer lengths and 3 trials a point")
    p.add_argument("--budget", type=positive_int, metavar="TOKENS", help="spend at most about this many tokens")
    add_turn_flags(p, without=("--max-output-tokens",))  # the plan sets each turn's output length
    add_local_flags(p)
    add_output_flags(p, "print the fit and its points as a ttft.probe/1 JSON object")
    p.add_argument("--out", type=Path, metavar="DIR", help="write every turn (JSONL), the chart (SVG) and the JSON")
    p.add_argument("--no-save", action="store_true", help="do not save the fit for the chat and ask")
    p.add_argument(
        "--sdk", action="store_true", help="read with the API's SDK, not ttft's own reader (as ttft ask --sdk)"
    )
    p.set_defaults(func=run)


def _err(msg: str) -> None:
    print(visible_controls(f"ttft probe: {msg}"), file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from backends.probe.plan import BudgetError, make_plan
    from backends.providers.registry import ProviderError, create_backend, default_spec, is_local_spec

    spec = args.model or default_spec()
    try:
        if (problem := local_flags_problem(args, is_local_spec(spec))) is not None:
            _err(problem)
            return USAGE_ERROR
        # the engine's options as the turns' settings give them: the load before the plan is the turns' own
        backend = create_backend(
            spec, base_url=args.base_url, timeout_s=args.timeout, lean=not args.sdk, **local_extra(args)
        )
    except ProviderError as err:
        _err(f"{err.message}{' ' + err.hint if err.hint else ''}")
        return for_error_kind(err.kind)
    try:
        return asyncio.run(_probe(args, backend, make_plan, BudgetError))
    except KeyboardInterrupt:
        _err("interrupted; nothing saved")
        return Exit.INTERRUPTED


async def _context(backend: Any) -> int | None:
    """A local model's context window (the plan must fit in it); None for a hosted API."""
    load = getattr(backend, "load", None)
    if load is None:
        return None
    info = await load()
    sizes = [info.get(k) for k in ("n_ctx", "n_ctx_train")] if isinstance(info, dict) else []
    known = [n for n in sizes if isinstance(n, int) and n > 0]
    return min(known) if known else None  # the context the engine opened, never past what the model was trained on


async def _probe(args: argparse.Namespace, backend: Any, make_plan: Any, budget_error: type[Exception]) -> int:
    from backends.probe.run import WarmupFailed, run_probe
    from telemetry.log.turns import SessionLog, new_session_id

    try:
        try:
            context = await _context(backend)
        except Exception as exc:  # a local model that does not load: its own message, no traceback
            _err(f"could not load the model: {getattr(exc, 'message', None) or exc}")
            return Exit.FAILED
        try:
            plan = make_plan(context, quick=args.quick, budget=args.budget)
        except budget_error as exc:
            _err(f"{exc}; raise --budget or use --quick")
            return USAGE_ERROR
        who = f"{backend.provider}:{backend.model}"
        if not args.quiet:
            _err(f"{who}: {plan.summary()}")
        log = None
        if args.out is not None:
            try:
                args.out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                _err(f"cannot create {args.out}: {exc.strerror or exc}")
                return Exit.NOT_SAVED
            log = SessionLog(f"probe-{new_session_id()}", directory=args.out)
        try:
            result = await run_probe(
                backend, plan, log=log, on_turn=_progress(plan.requests, args.quiet), settings=settings_from_args(args)
            )
        except WarmupFailed as exc:
            _done_progress()
            _err(str(exc))
            return Exit.FAILED
        _done_progress()
    finally:
        await backend.aclose()
    return _report(args, backend, result, log)


def _progress(total: int, quiet: bool = False) -> Any:
    shown = sys.stderr.isatty() and not quiet

    def on_turn(i: int, step: Any, record: Any) -> None:
        if not shown:
            return
        m = record.metrics
        ttft = fmt_ms(m.ttft_ms) if m.ttft_ms is not None else record.status
        what = step.kind or "warm-up"
        sys.stderr.write(f"\r\x1b[K  {i + 1}/{total} {what}: TTFT {ttft}")
        sys.stderr.flush()

    return on_turn


def _done_progress() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def _report(args: argparse.Namespace, backend: Any, result: Any, log: Any) -> int:
    from telemetry.probe.fit import curvature_note, levers
    from telemetry.probe.store import save_probe
    from tui.report.figures import probe_chart

    fit = result.fit
    data = fit.to_dict()
    chart = probe_chart(fit, f"TTFT by input tokens · {backend.provider}:{backend.model}")
    if args.json:
        print_json({"schema": "ttft.probe/1", **data})
    else:
        print(visible_controls(chart.terminal()))
        for line in figure_lines(fit, result.engine_prefill_per_1k):
            print(line)
        if note := curvature_note(fit):
            print(note)
        print(levers(fit, result.plan.design.cache_prefix))
    not_saved = False  # a file asked for that is missing is exit 3, as on every command
    for err in getattr(log, "write_errors", ()):
        _err(str(err))
        not_saved = True
    if args.out is not None:
        try:
            (args.out / "probe.svg").write_text(chart.svg(), encoding="utf-8")
            (args.out / "probe.json").write_text(json_text(data) + "\n", encoding="utf-8")
        except OSError as exc:
            _err(f"could not write to {args.out}: {exc.strerror or exc}")
            not_saved = True
    if fit.base_ttft_ms is None and fit.output_ms_per_100_tokens is None:
        _err("not enough successful turns to fit anything; nothing saved")
        return Exit.FAILED
    if not args.no_save:
        try:
            path = save_probe(backend.provider, backend.model, backend.base_url, fit)
        except OSError as exc:
            _err(f"could not save the probe: {exc.strerror or exc}")
            not_saved = True
        else:
            if not args.quiet:
                _err(f"saved for the chat and ask: {path}")
    return Exit.NOT_SAVED if not_saved else Exit.OK


def figure_lines(fit: Any, engine: Any) -> list[str]:
    """The fitted figures with their 95% intervals, one line each."""

    def e(est: Any, unit: str = " ms") -> str:
        if est is None:
            return "-"
        return f"{est.value:,.1f}{unit} ({est.low:,.1f}–{est.high:,.1f})"

    out = [
        f"base TTFT                 {e(fit.base_ttft_ms)}",
        f"prefill per 1k input      {e(fit.prefill_ms_per_1k_input_tokens)}",
        f"TPOT                      {e(fit.tpot_ms)}",
        f"per 100 output tokens     {e(fit.output_ms_per_100_tokens)}",
    ]
    c = fit.cache
    cached = f", {c.cached_tokens:,} tokens cached (usage)" if c.cached_tokens else ""
    out.append(f"prompt cache              {'seen' if c.detected else 'not seen'}: saves {e(c.ttft_saving_ms)}{cached}")
    if engine is not None:
        out.append(f"engine's own prefill/1k   {e(engine)} (llama.cpp t_p_eval, same turns)")
    return out
