"""``ttft proxy``: time the LLM calls of the agents and apps you already use, call by call.

A reverse proxy on 127.0.0.1 for the Anthropic Messages, OpenAI Chat Completions and Responses APIs
and any OpenAI-compatible server. Point an app at it (the lines it prints on start) and every call it
makes becomes a turn record (TTFT, TPOT, tokens, cache, cost, errors), logged as a session that
``ttft sessions`` and ``ttft export`` read. ``ttft proxy -- CMD ARGS...`` runs one program with the base
URLs set, prints the summary of its calls on stderr when it ends (as ``time`` does) and exits with the
program's own status. Prompts and answers are not kept unless ``--keep-content``; keys pass through to
the provider and are never stored.

The command is thin: the flags are read once into a :class:`backends.proxy.plan.ProxyPlan`
(``tui.commands.proxy.args``), :class:`backends.proxy.run.ProxyRunner` runs it, and this module prints
what it is shown (``tui.commands.proxy.output``). With no program, on a terminal and without
``--headless``, the live view (``tui.proxy.app``) shows the calls instead of the lines. ``--watch``
follows a proxy running elsewhere instead of starting one (``tui.commands.proxy.watch``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING

from ..exits import Exit
from . import args as proxy_args
from .output import app_telemetry_line, call_line, export_lines, note, print_out, summary_lines

if TYPE_CHECKING:
    from ....backends.proxy.plan import ProxyPlan
    from ....backends.proxy.run import ProxyRun, ProxyRunner, Started
    from ....backends.proxy.server import ProxiedCall, ProxyError

# The signals that end a run with no program. With a program, SIGINT and SIGQUIT are the terminal's
# keys: the program has them already (one process group) and decides; the others are passed on to it.
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))


def register(sub: argparse._SubParsersAction) -> None:
    proxy_args.build(sub, __doc__).set_defaults(func=run, read=proxy_args.read)


_err = note


def run(args: proxy_args.ProxyArgs) -> int:
    from ....backends.proxy.watch import WatchPlan

    plan = args.plan
    if isinstance(plan, str):
        _err(plan)
        return Exit.USAGE
    if isinstance(plan, WatchPlan):
        from .watch import run_watch

        return run_watch(plan, args.quiet, args.headless, STOP_SIGNALS)
    if args.print_env:
        return _print_env(plan)
    if args.remote:
        _err(
            f"warning: listening on {plan.config.host} (not loopback): any machine that reaches it can send "
            "calls through it, with their own keys, and read nothing of yours but what they send"
        )
    if not plan.runs_program and not args.headless and sys.stdin.isatty() and sys.stdout.isatty():
        return _live(plan, args.quiet)
    from ....backends.load import event_loop
    from ....backends.proxy.run import Listeners, ProxyRunner
    from ....backends.proxy.server import ProxyError

    view = _View(plan, args.quiet)
    runner = ProxyRunner(plan, Listeners(on_start=view.started, on_call=view.call, on_problem=_err))
    try:
        # on uvloop when installed, as ttft bench: the loop's own share of each relayed chunk is most of
        # the proxy's CPU under many streams (tests/benchmarks/proxy_overhead.py)
        result = event_loop.run(_run(runner), event_loop.loop_factory())
    except ProxyError as exc:
        _err(_cannot_start(exc))
        return Exit.USAGE
    return view.finished(result)


def _cannot_start(exc: ProxyError) -> str:
    """Why the proxy (or its OTLP receiver, whose error says its own way out) could not start."""
    from ....backends.proxy.otlp import OtlpError

    if isinstance(exc, OtlpError) and exc.hint:
        return f"{exc}; {exc.hint}"
    return f"{exc}; choose another with --port P (0: any free one) or --listen ADDR"


def _live(plan: ProxyPlan, quiet: bool) -> int:
    """The live view (``tui.proxy.app``) on the terminal; once it is back, the summary as the headless
    run prints it, and its exit status (q: 0, Ctrl-C: 130)."""
    from ....backends.proxy.server import ProxyError
    from ...proxy.app import ProxyApp

    app = ProxyApp(plan)
    app.run()
    for line in app.crash_lines:  # said as notifications while it ran; again now that the terminal is back
        print(line, file=sys.stderr)
    if isinstance(app.start_error, ProxyError):
        _err(_cannot_start(app.start_error))
        return Exit.USAGE
    if app.result is None:
        if app.start_error is not None:
            _err(f"the proxy did not stop cleanly: {app.start_error}")
        return Exit.FAILED
    return _View(plan, quiet).finished(app.result)


def _print_env(plan: ProxyPlan) -> int:
    from ....backends.proxy.otlp import otlp_env
    from ....backends.proxy.server import ProxyServer

    env = ProxyServer(plan.config, lambda _: None).env()
    if plan.config.otlp_port is not None:
        env.update(otlp_env(plan.config.otlp_port))
    for line in export_lines(env):
        print(line)
    return Exit.OK


async def _run(runner: ProxyRunner) -> ProxyRun:
    """The run, with the stop signals going to :meth:`ProxyRunner.stop` (see STOP_SIGNALS)."""
    loop = asyncio.get_running_loop()
    installed = []
    for s in STOP_SIGNALS:
        try:
            loop.add_signal_handler(s, runner.stop, s)
        except (NotImplementedError, RuntimeError, ValueError):  # off the main thread
            continue
        installed.append(s)
    try:
        return await runner.run()
    finally:
        for s in installed:
            loop.remove_signal_handler(s)


class _View:
    """What the run shows as it goes. Without a program: the lines to set and then one line per call on
    stdout, notes on stderr. With one: nothing until it ends (it has the terminal), then the summary."""

    def __init__(self, plan: ProxyPlan, quiet: bool) -> None:
        self.plan = plan
        self.quiet = quiet
        self.reader_gone = False

    def started(self, s: Started) -> None:
        if self.plan.runs_program:
            return
        for line in export_lines(s.env):
            print(line)
        sys.stdout.flush()
        if not self.quiet:
            upstream = self.plan.config.upstream or "each provider's own API"
            _err(f"listening on {s.base_url}, forwarding to {upstream}; session {s.session_id}; Ctrl-C ends it")

    def call(self, call: ProxiedCall) -> None:
        if self.plan.runs_program or self.reader_gone:
            return
        self.reader_gone = not print_out(call_line(call))  # `ttft proxy | head -3`: the calls still pass

    def finished(self, result: ProxyRun) -> int:
        if result.program_problem is not None:
            _err(result.program_problem)
        if not self.quiet and result.program_problem is None:
            for line in summary_lines(result.calls, result.sessions):
                print(line, file=sys.stderr)
            if (said := app_telemetry_line(result)) is not None:
                print(said, file=sys.stderr)
            if result.calls:
                _err(f"session {result.session_id} (ttft sessions, ttft export)")
        for what in result.not_saved:
            _err(f"could not write {what}")
        if self.plan.runs_program:
            return result.status if result.status is not None else Exit.FAILED
        if result.not_saved:
            return Exit.NOT_SAVED
        return result.status if result.status is not None else Exit.OK
