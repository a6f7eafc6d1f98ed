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

from ...telemetry.duration import fmt_ms
from ...telemetry.log import private_files
from ..format import visible_controls
from .args import ProbeArgs, probe_args
from .exits import Exit, for_error_kind
from .flags import (
    add_local_flags,
    add_turn_flags,
    local_extra,
    local_flags_problem,
    model_spec,
    positive_int,
)
from .help import examples
from .output import add_output_flags, print_json

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
    p.set_defaults(func=run, read=probe_args)


def _err(msg: str) -> None:
    print(visible_controls(f"ttft probe: {msg}"), file=sys.stderr)


def run(args: ProbeArgs) -> int:
    from ...backends.probe.orchestrate import ModelLoadFailed, OutDirError, run_probe
    from ...backends.probe.plan import BudgetError
    from ...backends.probe.run import WarmupFailed
    from ...backends.providers.registry import ProviderError, default_spec, is_local_spec

    spec = args.model or default_spec()
    try:
        if (problem := local_flags_problem(args.local, is_local_spec(spec))) is not None:
            _err(problem)
            return USAGE_ERROR
        plan = plan_of(args, spec)
        progress = _Progress(args.quiet)
        try:
            result = asyncio.run(run_probe(plan, on_plan=progress.plan, on_turn=progress.turn))
        except WarmupFailed as exc:
            _done_progress()
            _err(str(exc))
            return Exit.FAILED
    except ProviderError as err:
        _err(f"{err.message}{' ' + err.hint if err.hint else ''}")
        return for_error_kind(err.kind)
    except ModelLoadFailed as exc:
        _err(str(exc))
        return Exit.FAILED
    except BudgetError as exc:
        _err(f"{exc}; raise --budget or use --quick")
        return USAGE_ERROR
    except OutDirError as exc:
        _err(str(exc))
        return Exit.NOT_SAVED
    except KeyboardInterrupt:
        _err("interrupted; nothing saved")
        return Exit.INTERRUPTED
    _done_progress()
    return _report(args, result)


def plan_of(args: ProbeArgs, spec: str) -> Any:
    """The flags as a ProbePlan (ProviderError when ``-m`` or ``--base-url`` does not resolve); the
    engine's options as the turns' settings give them: the load before the schedule is the turns' own."""
    from ...backends.probe.orchestrate import ProbePlan
    from ...backends.providers.registry import resolve

    return ProbePlan(
        target=resolve(spec, base_url=args.base_url),
        quick=args.quick,
        budget=args.budget,
        settings=args.settings,
        out=args.out,
        sdk=args.sdk,
        timeout_s=args.timeout,
        local_options=local_extra(args.local),
    )


class _Progress:
    """The plan's summary on stderr before the first request (unless ``-q``), then one line that each
    turn rewrites, on a terminal only."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.shown = sys.stderr.isatty() and not quiet
        self.total = 0

    def plan(self, who: str, schedule: Any) -> None:
        self.total = schedule.requests
        if not self.quiet:
            _err(f"{who}: {schedule.summary()}")

    def turn(self, i: int, step: Any, record: Any) -> None:
        if not self.shown:
            return
        m = record.metrics
        ttft = fmt_ms(m.ttft_ms) if m.ttft_ms is not None else record.status
        what = step.kind or "warm-up"
        sys.stderr.write(f"\r\x1b[K  {i + 1}/{self.total} {what}: TTFT {ttft}")
        sys.stderr.flush()


def _done_progress() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def _report(args: ProbeArgs, result: Any) -> int:
    from ...telemetry.probe.fit import curvature_note, levers
    from ..report.figures import probe_chart

    fit = result.fit
    chart = probe_chart(fit, f"TTFT by input tokens · {result.provider}:{result.model}")
    if args.json:
        print_json(result.to_dict())
    else:
        print(visible_controls(chart.terminal()))
        for line in figure_lines(fit, result.engine_prefill_per_1k):
            print(line)
        if note := curvature_note(fit):
            print(note)
        print(levers(fit, result.schedule.design.cache_prefix))
    not_saved = False  # a file asked for that is missing is exit 3, as on every command
    for err in result.log_errors:
        _err(err)
        not_saved = True
    if args.out is not None:
        try:
            private_files.replace(args.out / "probe.svg", chart.svg().encode("utf-8"))
            result.save(args.out)  # probe.json; the turns are there already
        except OSError as exc:
            _err(f"could not write to {args.out}: {exc.strerror or exc}")
            not_saved = True
    if not result.fitted:
        _err("not enough successful turns to fit anything; nothing saved")
        return Exit.FAILED
    if not args.no_save:
        try:
            path = result.save_fit()
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
