"""``ttft compare``: one prompt on 2 to 4 models side by side (a Textual screen, or ``--headless`` for scripts)."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from ...backends.base import Backend
from ...backends.compare.panes import LABELS, MAX_PANES, BackendFactory
from ...backends.compare.run import ComparePlan, make_backends, no_tools, run_compare
from ...backends.providers.config import McpServerConfig
from ...backends.spec import parse_model
from ...telemetry.errors import ErrorKind, TtftError
from ...telemetry.log.surrogates import scrub
from ..format import visible_controls
from .args import CompareArgs, compare_args
from .exits import Exit, for_error_kind, for_turns
from .flags import add_local_flags, add_turn_flags, local_flags_problem, mcp_servers
from .help import examples
from .output import add_output_flags, print_json, warn
from .prompt import PromptTooLarge, read_prompt
from .tools import add_tool_flags, consent_of, wants_tools

LOG_FAILED = int(Exit.NOT_SAVED)  # as for ttft ask: the turns ran but could not be written to the session log


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="one prompt on 2-4 models side by side: race view, ranked summary, trials with verdicts",
        description=(
            "Send the same prompt to 2 to 4 models at the same instant (or one after another with --sequential) "
            "and compare TTFT, TTFVT, TPOT, E2E and output tokens. Every turn is logged with its comparison id "
            "and pane."
        ),
        epilog=examples(
            "ttft compare -m openai:gpt-4o-mini -m anthropic:claude-haiku-4-5",
            "ttft compare -m compat:qwen@http://127.0.0.1:8080/v1 -m compat:llama@http://127.0.0.1:8081/v1",
            "ttft compare --sequential -m local:smollm2-135m -m local:smollm2-360m",
            'ttft compare --headless -n 10 --out cmp -m openai:gpt-4o-mini -m openai:gpt-4.1-mini "hi"',
            'cat notes.md | ttft compare --headless --json -m A -m B "summarize"   # stdin, then the prompt',
            'ttft compare --headless -n 5 --mcp "uvx mcp-server-time" --allow-tools -m A -m B "time in Tokyo?"',
        ),
    )
    p.add_argument(
        "-m",
        "--model",
        action="append",
        required=True,
        metavar="PROVIDER:MODEL[@URL]",
        help="a pane (repeat 2-4 times); @URL gives that pane its own base URL, e.g. compat:qwen@http://127.0.0.1:8080/v1",
    )
    p.add_argument("--base-url", help="base URL for every -m without its own @URL")
    p.add_argument("--sequential", action="store_true", help="run the panes one after another (local models)")
    p.add_argument("--repeat", "-n", type=int, default=1, metavar="N", help="trials per prompt (default 1)")
    p.add_argument("--headless", action="store_true", help="no UI: print the summary table and verdicts")
    p.add_argument("--blind", action="store_true", help="hide model names until revealed (UI)")
    add_output_flags(p, "headless: print the ttft.compare/1 summary as JSON")
    p.add_argument("--out", type=Path, metavar="DIR", help="export the comparison: JSONL + summary and verdict CSVs")
    add_turn_flags(p)
    add_local_flags(p)
    add_tool_flags(p)  # --mcp, --allow-tools, --allow-tool NAME, --max-steps N: every pane is offered the same tools
    p.add_argument("prompt", nargs="*", help="the prompt (headless: piped stdin comes before it)")
    p.set_defaults(func=run, read=compare_args)


def plan_of(args: CompareArgs, prompt: str, mcp_servers: list[McpServerConfig]) -> ComparePlan:
    """The flags as the comparison's typed, immutable plan (built once; everything after reads it)."""
    return ComparePlan.of(
        args.models,
        args.base_url,
        prompt=prompt,
        repeat=args.repeat,
        mode="sequential" if args.sequential else "parallel",
        blind=args.blind,
        settings=args.settings,
        system=args.system,
        timeout_s=args.timeout,
        mcp_servers=tuple(mcp_servers),
        consent=consent_of(args.tools.allow_all, args.tools.allowed),
        max_steps=args.tools.max_steps,
        mcp_start_timeout_s=args.tools.mcp.start_timeout_s,
        mcp_call_timeout_s=args.tools.mcp.call_timeout_s,
        out=args.out,
        submitted_ns=args.started_ns,  # the process start (tui.cli): the first turns' delay
    )


def run(args: CompareArgs, factory: BackendFactory | None = None) -> int:
    """``factory`` makes each pane's backend (tests pass fakes); by default headless runs make them in
    this process, the screen each in its own process, as in the chat, so painting four panes can never
    delay a timestamp (``TTFT_IN_PROCESS=1`` keeps them here)."""
    if not 1 <= len(args.models) <= MAX_PANES:
        print(f"ttft compare: give 1 to {MAX_PANES} -m options (got {len(args.models)})", file=sys.stderr)
        return Exit.USAGE
    if args.repeat < 1:
        print("ttft compare: --repeat must be at least 1", file=sys.stderr)
        return Exit.USAGE
    specs = [parse_model(m, args.base_url) for m in args.models]
    from ...backends.providers.registry import names_local_engine

    any_local = any(names_local_engine(s.spec) is not False for s in specs)  # unknown (None): the pane says why
    if (problem := local_flags_problem(args.local, any_local)) is not None:
        print(f"ttft compare: {problem} (it applies to the local panes only)", file=sys.stderr)
        return Exit.USAGE
    try:
        servers = mcp_servers(args.tools.mcp.specs)
    except TtftError as exc:  # a --mcp spec that names nothing: a usage error, said in a line
        print(visible_controls(f"ttft compare: {exc} {exc.hint or ''}".strip()), file=sys.stderr)
        return Exit.USAGE
    if args.tools.consent_asked and not wants_tools(args.tools.mcp.specs):
        print("ttft compare: --allow-tools and --allow-tool need --mcp SPEC (the tools to allow)", file=sys.stderr)
        return Exit.USAGE
    if args.headless:
        try:
            prompt = read_prompt(args.prompt)
        except PromptTooLarge as exc:
            print(f"ttft compare: {exc}", file=sys.stderr)
            return Exit.USAGE
    else:  # the screen owns the terminal: stdin is never read
        prompt = scrub(" ".join(args.prompt).strip())
    if args.headless and not prompt:
        print("ttft compare --headless: give a prompt (argument or stdin)", file=sys.stderr)
        return Exit.USAGE
    plan = plan_of(args, prompt, servers)
    if factory is None and not args.headless:
        from ..session import default_backend_factory

        factory = functools.partial(default_backend_factory, timeout_s=plan.timeout_s)
    try:
        backends = make_backends(plan, factory)
    except Exception as exc:  # a bad spec, a missing key: one sentence, no traceback
        print(visible_controls(f"ttft compare: {exc}"), file=sys.stderr)
        return for_error_kind(getattr(exc, "kind", ErrorKind.BAD_SPEC))
    if args.headless and plan.mcp_servers and (problem := no_tools(backends)) is not None:
        print(visible_controls(f"ttft compare: {problem}"), file=sys.stderr)
        return Exit.USAGE
    if args.headless:
        from .. import signals

        try:
            # SIGTERM, SIGHUP: like Ctrl-C, turns kept
            return signals.run(headless(plan, backends, quiet=args.quiet, as_json=args.json))
        except KeyboardInterrupt as exc:
            return signals.exit_code(exc)
    from ..compare.app import CompareApp
    from ..tool_servers import ToolServers

    app = CompareApp(
        backends,
        settings=plan.settings,
        mode=plan.mode,
        repeat=plan.repeat,
        blind=plan.blind,
        system=plan.system,
        initial_prompt=plan.prompt or None,
        out_dir=plan.out,
        factory=factory,
        tools=ToolServers(
            list(plan.mcp_servers), start_timeout_s=plan.mcp_start_timeout_s, call_timeout_s=plan.mcp_call_timeout_s
        ),
        consent=plan.consent,
        max_steps=plan.max_steps,
    )
    app.run()
    for line in app.crash_lines:  # said as notifications while it ran; again now that the terminal is back
        print(line, file=sys.stderr)
    return app.return_code or 0


async def headless(plan: ComparePlan, backends: list[Backend], *, quiet: bool, as_json: bool) -> int:
    """Run the plan (:func:`backends.compare.run.run_compare`), then print, export and choose the exit code."""
    from rich.console import Console

    from ..compare.view import summary

    err = Console(stderr=True)

    def note(text: str) -> None:  # a summary or progress line, left out with -q (tui.commands.output.note)
        if not quiet:
            print(visible_controls(text), file=sys.stderr, flush=True)

    done = 0
    total = plan.repeat * len(backends)

    def progress(pane: int, trial: int, record: Any) -> None:
        nonlocal done
        done += 1
        if not quiet:
            err.print(f"[dim]{done}/{total} {LABELS[pane]} trial {trial + 1}: {record.status}[/dim]", highlight=False)

    def said(pane: int, text: str) -> None:  # a cut result, the step limit: outside words, shown
        if not quiet:
            print(visible_controls(f"ttft compare: {LABELS[pane]}: {text}"), file=sys.stderr, flush=True)

    result = await run_compare(
        plan,
        backends=backends,
        on_turn=progress,
        on_tool_notice=said,
        on_warn=lambda text: warn(f"ttft compare: {text}"),  # a server that failed: said even with -q
        on_note=note,
    )
    if as_json:
        print_json(result.to_dict())
    else:
        console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
        console.print(f"comparison {result.comparison_id} · session {result.session_id}")
        console.print(summary(result.comparison, result.names, mode=result.run.mode, skew_ms=result.run.start_skew_ms))
    turns = [(r.status, r.error.type if r.error else None) for recs in result.records for r in recs]
    # a call nothing allowed (exit 5, as ttft ask): the flags are what to change, whatever the other panes did
    rc = Exit.TOOL_DENIED if any(k == ErrorKind.TOOL_NOT_ALLOWED for _, k in turns) else for_turns(turns)
    if rc == Exit.TOOL_DENIED:
        warn("ttft compare: allow a tool with --allow-tool NAME (or every tool with --allow-tools)")
    if plan.out:
        try:
            paths = result.save(plan.out)
        except OSError as exc:
            print(f"ttft compare: could not write the export to {plan.out}: {exc.strerror or exc}", file=sys.stderr)
            return Exit.NOT_SAVED
        note("wrote " + ", ".join(str(p) for p in paths))
    if result.log_errors:  # the panes' answers are above; the user must know they are not in the log
        n = len(result.log_errors)
        lost = f"{n} turn{'s were' if n != 1 else ' was'} not saved"
        print(f"ttft compare: {result.log_errors[0]}; {lost}", file=sys.stderr)
        return LOG_FAILED
    return rc
