"""``ttft ask``: one turn, headless and scriptable.

The answer streams to stdout, a one-line telemetry summary goes to stderr; ``--json``
prints the full ``ttft.turn`` record to stdout instead, ``-q`` drops the summary. Exit
codes come from ``tui.commands.exits``: 1 when the turn failed (the record is still printed
and logged, with ``status: error``), 2 for a command line that cannot make a turn, 3 when
the turn could not be written to the session log (the answer and record are still printed),
130/143/129 when interrupted (the turn is logged as cancelled). Every turn is appended to
the session log.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ...backends.agent.loop import AgentListener
from ...backends.ask.plan import AskPlan, Unresolved, engine_isolation, read_attachments
from ...backends.ask.run import AskResult, AskTurn, ToolsNotStarted
from ...backends.base import build_request
from ...backends.providers.registry import ProviderError, Target, default_spec, names_local_engine, resolve
from ...telemetry import events as ev
from ...telemetry.cost import fmt_usd
from ...telemetry.duration import fmt_ms
from ...telemetry.log.secrets import mask, masked_record
from ...telemetry.log.surrogates import scrub
from ...telemetry.log.turns import check_session_id
from ...telemetry.metrics import OWN_DELAY_SHOWN_MS
from ...telemetry.record import ErrorInfo, TurnRecord
from ...telemetry.recorder import TurnRecorder
from ...telemetry.wire import WaitSplit
from .. import signals
from ..format import visible_controls
from .args import AskArgs, ask_args
from .exits import Exit, for_error_kind
from .flags import add_local_flags, add_turn_flags, local_flags_problem, model_spec
from .help import examples
from .output import add_output_flags, json_text, note
from .prompt import PromptTooLarge, read_prompt
from .tools import add_tool_flags, tool_plan, tools_problem

if TYPE_CHECKING:
    from ...backends.agent.host import ToolResult
    from ...telemetry.agent.steps import ToolStep

LOG_FAILED = int(Exit.NOT_SAVED)  # the turn ran, but its record could not be written to the session log


def session_id_arg(value: str) -> str:
    """``--session``: an id in the sessions folder, never a path out of it."""
    try:
        return check_session_id(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-m",
        "--model",
        type=model_spec,
        metavar="PROVIDER:MODEL",
        help="e.g. openai:gpt-4o-mini, anthropic:claude-x, "
        "compat:MODEL (with --base-url), local, local:/path/model.gguf, or a configured provider",
    )
    p.add_argument("--base-url", help="the API's address (e.g. http://127.0.0.1:8080/v1 for a compat server)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ask",
        help="ask one question; answer to stdout, telemetry summary to stderr",
        description="One turn, headless and scriptable: the answer streams to stdout, one summary line to "
        "stderr, and the turn is appended to the session log. Piped stdin comes first in the prompt.",
        epilog=examples(
            'ttft ask -m openai:gpt-4o-mini "Why is the sky blue?"',
            'ttft ask -m compat:qwen3 --base-url http://127.0.0.1:8080/v1 --json "hi" > turn.json',
            'ttft ask -m anthropic:claude-sonnet-4-5 --thinking-budget adaptive "hi"',
            'git diff | ttft ask -q "write the commit message"   # stdin, a blank line, then the prompt',
            'ttft ask -m openai:gpt-4o-mini -a chart.png -a notes.txt "what does the chart show?"',
            'ttft ask -m openai:gpt-4o-mini --mcp "uvx mcp-server-time" --allow-tools "what time is it in Tokyo?"',
        ),
    )
    add_model_options(p)
    add_turn_flags(p)
    add_local_flags(p)
    add_output_flags(p, "print the full ttft.turn record instead of the answer")
    add_tool_flags(p)
    p.add_argument(
        "--session", metavar="ID", type=session_id_arg, help="append to this session's log (default: a new session)"
    )
    p.add_argument(
        "--sdk",
        action="store_true",
        help="read with the API's SDK (openai, or anthropic for Messages), not ttft's own reader (same record;"
        " the SDK's import adds 0.5-2 s before the send)",
    )
    p.add_argument(
        "-a",
        "--attach",
        action="append",
        default=[],
        metavar="PATH",
        help="send a file with the prompt (repeat for more): a png, jpeg, gif or webp image as the API's image"
        " part, or a text file inline under its name; checked before the send (exit 2 when it cannot go)",
    )
    p.add_argument("prompt", nargs="*", help="the question; piped stdin comes before it (or is the whole of it)")
    p.set_defaults(func=run, read=ask_args)


def error_line(e: ErrorInfo) -> str:
    """``error: MESSAGE HINT``, one sentence after the other even when the message has no full stop
    (the local engine's "...exceeds the context of 4096 tokens" ran into "shorten the ...")."""
    message = mask(e.message or "").rstrip()
    hint = mask(e.hint or "").strip()
    if hint and message and message[-1] not in ".!?:;":
        message += "."
        hint = hint[0].upper() + hint[1:]
    return f"error: {message}" + (f" {hint}" if hint else "")


def summary_line(rec: TurnRecord) -> str:
    """One line for stderr: the numbers that say where the time went (a turn that failed before
    anything was sent, a bad -m, key or address, has no numbers: its error alone)."""
    if rec.status == "error" and rec.error is not None and not rec.attempts:
        return error_line(rec.error)
    m, t = rec.metrics, rec.tokens

    def f(v: float | None) -> str:
        return fmt_ms(v, digits=None, missing="-")

    who = f"{rec.provider}:{rec.model}"
    parts = [f"TTFT {f(m.ttft_ms)}"]
    http = rec.http
    # the wire split (telemetry.wire) as logged, to the microsecond, so the line agrees with the log
    wait = WaitSplit.from_dict(m.wait_ms.to_dict()) if http is not None and m.wait_ms is not None else None
    if http is not None and wait is not None:
        conn = f" ({http.connection} connection)" if http.connection else ""
        parts.append(f"network {f(wait.network_ms)}{conn}, server {f(wait.server)}, first token {f(wait.first_token)}")
    if m.reasoning_delay_ms is not None:
        est = " est" if m.reasoning_delay_estimated else ""
        parts.append(f"TTFVT {f(m.ttfvt_ms)} (thinking {f(m.reasoning_delay_ms)}{est})")
    tpot = m.tpot_ms
    if tpot:
        parts.append(f"TPOT {f(tpot)} ({1000 / tpot:.0f} tok/s)")
    out = t.output
    if out is not None:
        r = f", {t.reasoning} reasoning" if t.reasoning else ""
        parts.append(f"{out} tokens out{r} ({t.source})")
    if rec.attachments:
        from ...telemetry.server.prompt_share import attachment_cost  # only a turn with files needs them
        from ...telemetry.server.timings import server_timings

        n = len(rec.attachments)
        files = attachment_cost(rec.attachments, t.input, server_timings(rec.server))
        added = f", ~{files.tokens:,} tokens in" if files is not None and files.tokens is not None else ""
        parts.append(f"{n} file{'s' if n > 1 else ''} attached{added}")
    if rec.agent is not None:
        a = rec.agent
        parts.append(
            f"{a.step_count} steps: model {f(a.time_in_model_ms)}, tools {f(a.time_in_tools_ms)},"
            f" ttft {f(a.time_in_ttft_ms)}"
        )
    elif rec.tool_calls:
        n = len(rec.tool_calls)
        parts.append(f"{n} tool call{'s' if n > 1 else ''} (finish_reason {rec.stop_reason or '-'})")
    if m.e2e_ms is not None:
        parts.append(f"E2E {f(m.e2e_ms)}")
    else:  # no token came: an "E2E" would time an answer that does not exist
        parts.append(f"no tokens ({f(m.total_ms)} in all)")
    if m.server_timing_source == "probe" and m.server_ttft_ms is not None:  # a saved ttft probe
        parts.append(f"server: prefill {f(m.server_ttft_ms)} expected, queue {f(m.server_queue_ms)}")
    elif m.server_timing_source is not None:  # the server's own per-request figures
        queue = f"queue {f(m.server_queue_ms)}, " if m.server_queue_ms is not None else ""
        parts.append(
            f"server ({m.server_timing_source}): {queue}prefill {f(m.server_ttft_ms)}, rest {f(m.server_rest_ms)}"
        )
    if m.load_ms:  # a local model's load: apart from ttft's own delay, its llama.cpp import (a GPU's start) said
        from ...telemetry.server.timings import load_import_ms, server_timings

        imported = load_import_ms(rec.server)
        imp = f", llama.cpp import {f(imported)}" if imported is not None and imported >= OWN_DELAY_SHOWN_MS else ""
        parts.append(f"model load {f(m.load_ms)}{imp}")
        parts += [f"on {st.placement}" for st in server_timings(rec.server) if st.placement]
    if m.mcp_start_ms is not None:  # the servers' start: before the send, but not ttft's own delay
        parts.append(f"MCP start {f(m.mcp_start_ms)}")
    own = m.own_delay_ms
    if own is not None and own >= OWN_DELAY_SHOWN_MS:
        parts.append(f"ttft's own {f(own)} before the send")
    if len(rec.attempts) > 1:
        parts.append(f"{len(rec.attempts)} attempts (+{f(m.retry_ms)} retrying)")
    if not rec.settings.stream:
        parts.append("not streamed")
    if rec.cost is not None:
        parts.append(f"cost {fmt_usd(rec.cost.total_usd, 3)}")
    line = " · ".join(parts) + f" · {who}"
    if http is not None and http.request_id:
        line += f" · request id {http.request_id}"
    if rec.status == "error" and rec.error is not None:
        line = error_line(rec.error) + f"\n{line}"
    elif rec.status == "cancelled":
        line = f"cancelled · {line}"
    return line


class AnswerEcho:
    """The answer on stdout as it streams: its text, and each tool call the model asks for on a line of
    its own, ``tool call: NAME(ARGUMENTS)``, its arguments as they arrive (the record keeps them too).

    On a terminal outside text is shown, never run (:func:`tui.format.visible_controls`); piped, the
    text is byte-exact.
    """

    def __init__(self, recorder: TurnRecorder | None) -> None:
        self.recorder = recorder
        self.shown = visible_controls if sys.stdout.isatty() else str
        self.wrote = False
        self.at_line_start = True
        self.calls = 0  # tool calls begun on stdout
        self.in_call = False
        self.line_done = False  # the last thing written was a whole line of ttft's (a call's, a tool result's)

    def follow(self, recorder: TurnRecorder) -> None:
        """The next model step of a tool-using turn: its calls are counted afresh."""
        self._end_call()
        self.recorder = recorder
        self.calls = 0

    def tool_ended(self, step: ToolStep, result: ToolResult | None) -> None:
        """``tool result: NAME (status, bytes, ms): FIRST LINE``: the result is outside text, shown
        (never run) on a terminal as the model's text is."""
        self._end_call()
        if not self.at_line_start:
            self._write("\n")
        took = (step.end_ns - step.start_ns) / 1e6
        head = ""
        if result is not None and result.text:
            line = result.text.strip().splitlines()[0] if result.text.strip() else ""
            head = f": {self.shown(line[:200])}" if line else ""
        cut = ", truncated" if step.truncated else ""
        what = f"{step.status}, {step.result_bytes} bytes{cut}, {took:.0f} ms"
        self._write(f"tool result: {self.shown(step.name)} ({what}){head}\n")
        self.line_done = True
        sys.stdout.flush()

    def _write(self, text: str) -> None:
        if text:
            sys.stdout.write(text)
            self.wrote = True
            self.at_line_start = text.endswith("\n")

    def _end_call(self) -> None:
        if self.in_call:
            self._write(")\n")
            self.in_call = False
            self.line_done = True

    def feed(self, e: ev.Event) -> None:
        if isinstance(e, ev.TextDelta) and e.text:
            self._end_call()
            self.line_done = False
            self._write(self.shown(e.text))
        elif isinstance(e, ev.TERMINAL):
            self._end_call()  # a tool-using step's calls are whole: their line ends before the tools run
        elif isinstance(e, ev.ToolCallDelta):
            # the recorder has it already: it says when a call begins
            count = self.recorder.tool_call_count if self.recorder is not None else self.calls + bool(e.name)
            if count != self.calls:
                self._end_call()
                if not self.at_line_start:
                    self._write("\n")
                self._write(f"tool call: {self.shown(e.name) or '?'}(")
                self.calls, self.in_call = count, True
            self._write(self.shown(e.arguments))
        else:
            return
        sys.stdout.flush()

    def close(self) -> None:
        """The answer's last line ended: a call's, or one newline after the text (as ``echo`` would)."""
        if self.in_call:
            self._end_call()
        elif self.wrote and not self.line_done:
            self._write("\n")
        sys.stdout.flush()


def _target(spec: str, base_url: str | None) -> Target | Unresolved:
    """``-m`` and ``--base-url`` resolved once for the whole command; a spec, key or config that does not
    resolve is kept, to be the turn's recorded error (after the flags are checked)."""
    try:
        return resolve(spec, base_url=base_url)
    except ProviderError as err:
        return Unresolved(spec, base_url, err)


def _plan(args: AskArgs) -> AskPlan | str:
    """The flags as the turn's plan, or why they cannot make a turn (exit 2)."""
    started = args.started_ns or ev.now_ns()  # tui.cli stamps the process start: ttft's own delay runs from it
    try:
        prompt = read_prompt(args.prompt)
    except PromptTooLarge as exc:
        return str(exc)
    if not prompt and not args.attach:
        return 'give a question, e.g. ttft ask -m openai:gpt-4o-mini "hi" (or pipe it on stdin)'
    spec = args.model or default_spec()
    target = _target(spec, args.base_url)
    if isinstance(target, Unresolved):  # the turn's error later; these checks read the spec alone
        named = names_local_engine(spec)  # None (a config that does not read) refuses neither: it is the turn's error
        local_for_flags, local_for_tools = named is not False, named is True
    else:
        local_for_flags = local_for_tools = target.local
    if (problem := local_flags_problem(args.local, local_for_flags)) is not None:
        return problem
    if (problem := tools_problem(args.tools, local_for_tools)) is not None:
        return problem
    files = read_attachments(args.attach, target) if args.attach else ()
    if not isinstance(files, tuple):  # nothing was sent: a file that cannot go is the command line's problem
        return f"-a {visible_controls(files.sentence)}"
    system = scrub(args.system) if args.system else None
    return AskPlan(
        target=target,
        request=build_request(prompt, system=system, settings=args.settings, attachments=files),
        tools=tool_plan(args.tools),
        isolation=engine_isolation(),
        sdk=args.sdk,  # without the SDK unless asked: importing it is most of a hosted ask's own delay
        timeout_s=args.timeout,
        session=args.session,
        submitted_ns=started,
    )


def _listener(args: AskArgs, answer: AnswerEcho) -> AgentListener:
    """What ``ask`` hears of its turn: the answer echoed (not with --json), and notices on stderr."""
    echo = not args.json

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.ModelLoadStarted) and e.what and not args.quiet:
            print(f"ttft: {visible_controls(e.what)}", file=sys.stderr, flush=True)  # e.g. assembling the model
        if echo:
            answer.feed(e)

    def on_notice(text: str) -> None:
        if not args.quiet:
            print(f"ttft: {visible_controls(text)}", file=sys.stderr, flush=True)

    return AgentListener(
        on_event=on_event,
        on_step=answer.follow if echo else None,
        on_tool=answer.tool_ended if echo else None,
        on_notice=on_notice,
    )


def run(args: AskArgs) -> int:
    plan = _plan(args)
    if isinstance(plan, str):
        print(f"ttft ask: {plan}", file=sys.stderr)
        return Exit.USAGE
    answer = AnswerEcho(None)
    turn = AskTurn(plan, _listener(args, answer))
    try:
        # SIGTERM and SIGHUP (a container stop, a closed terminal) end the turn like Ctrl-C
        result = signals.run(turn.run())
    except KeyboardInterrupt as exc:
        answer.close()
        cut = turn.ended()  # recorded as cancelled and logged, with what arrived; None: no turn began
        if cut is not None:
            _print(cut, args)
        return signals.exit_code(exc)
    except ToolsNotStarted as exc:  # said, never a traceback
        answer.close()
        print(f"ttft ask: {visible_controls(exc.message)}", file=sys.stderr)
        return Exit.FAILED
    answer.close()
    _print(result, args)
    return exit_code(result)


def exit_code(result: AskResult) -> int:
    """The one reading of a turn's end as the exit status (tui.commands.exits)."""
    if result.log_errors:
        return LOG_FAILED
    record = result.record
    return Exit.OK if record.status == "ok" else for_error_kind(record.error.type if record.error else None)


def _print(result: AskResult, args: AskArgs) -> None:
    """The record (``--json``), the summary, and any log write that failed, on stderr; a closed terminal
    (after SIGHUP) or a closed pipe just ends the printing: the turn is in the log."""
    try:
        _print_record(result.record, args)
        for err in result.log_errors:
            print(f"ttft ask: {err}; the turn was not saved (its record is above with --json)", file=sys.stderr)
    except OSError:
        pass


def _print_record(record: TurnRecord, args: AskArgs) -> None:
    if args.json:  # every control character escaped: the same JSON values, and safe on a terminal
        print(json_text(masked_record(record.to_dict())))  # its error's words: no key, token or URL credential
    if record.status == "error" and args.quiet:  # -q drops the summary, never the error
        e = record.error or ErrorInfo("", "")
        print(visible_controls(error_line(e)), file=sys.stderr)
    else:
        note(args.quiet, summary_line(record))  # the server's error text among it: shown, never run
