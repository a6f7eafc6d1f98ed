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
import contextlib
import os
import sys
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ...backends.base import Backend, ChatRequest, build_request
from ...backends.finish import finish_turn
from ...backends.providers.registry import (
    ProviderError,
    Target,
    create_backend,
    default_spec,
    names_local_engine,
    parse_spec,
    resolve,
)
from ...backends.turn import new_recorder, run_turn
from ...telemetry import events as ev
from ...telemetry.cost import fmt_usd
from ...telemetry.duration import fmt_ms
from ...telemetry.errors import TtftError
from ...telemetry.log.secrets import mask, masked_record
from ...telemetry.log.surrogates import scrub
from ...telemetry.log.turns import SessionLog, check_session_id
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
from .tools import add_tool_flags, consent_of, start_host, tools_problem, wants_tools

if TYPE_CHECKING:
    from ...backends.agent.consent import Consent
    from ...backends.agent.host import ToolResult
    from ...backends.agent.loop import AgentTurn
    from ...backends.attachments import Attachment, Refused
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
            f"{a.get('step_count')} steps: model {f(a.get('time_in_model_ms'))}, tools {f(a.get('time_in_tools_ms'))},"
            f" ttft {f(a.get('time_in_ttft_ms'))}"
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


def _failed_record(
    spec: str, base_url: str | None, request: ChatRequest, err: TtftError, log: SessionLog, submitted_ns: int
) -> TurnRecord:
    """A turn that never reached a server (bad spec, missing key, bad URL) is still a recorded turn."""
    provider, model = parse_spec(spec) if spec.strip() else ("", None)
    stub = SimpleNamespace(provider=provider, api="", model=model or "", base_url=base_url)
    rec = new_recorder(stub, request, session_id=log.session_id, turn_index=log.next_turn_index())
    rec.feed(ev.Submitted(submitted_ns))
    rec.feed(ev.Failed.of(err))
    return finish_turn(rec, log)  # a failed write is kept in log.write_errors, reported by run()


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


async def _ask(
    backend: Backend, request: ChatRequest, recorder: TurnRecorder, log: SessionLog, echo: bool, quiet: bool = False
) -> TurnRecord:
    answer = AnswerEcho(recorder)

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.ModelLoadStarted) and e.what and not quiet:
            print(f"ttft: {visible_controls(e.what)}", file=sys.stderr, flush=True)  # e.g. assembling the model
        if echo:
            answer.feed(e)

    try:
        return await run_turn(backend, request, recorder, log=log, on_event=on_event)
    finally:
        answer.close()
        await backend.aclose()


@dataclass
class _AgentAsk:
    """A turn with tools as ``ask`` makes it: what its loop is given, and the loop once its servers are up
    (``agent``: None until then; the record is ``agent.result.record``)."""

    backend: Backend
    request: ChatRequest
    consent: Consent
    log: SessionLog
    submitted_ns: int
    max_steps: int
    agent: AgentTurn | None = None

    def record(self) -> TurnRecord | None:
        return self.agent.result.record if self.agent is not None else None


async def _ask_agent(turn: _AgentAsk, args: AskArgs, echo: bool) -> TurnRecord:
    """A turn with tools (``--mcp``): the MCP servers started, the loop run, the servers ended; the
    record is the agent's (logged by it, also when cancelled)."""
    from ...backends.agent.loop import AgentListener, AgentSettings, AgentTurn

    answer = AnswerEcho(None)

    def on_notice(text: str) -> None:
        if not args.quiet:
            print(f"ttft: {visible_controls(text)}", file=sys.stderr, flush=True)

    echoed = AgentListener(on_event=answer.feed, on_step=answer.follow, on_tool=answer.tool_ended) if echo else None
    listener = replace(echoed or AgentListener(), on_notice=on_notice)
    try:
        t0 = ev.now_ns()
        host = await start_host(args.tools.mcp, on_notice)
        turn.agent = AgentTurn(
            turn.backend,
            turn.request,
            host,
            turn.consent,
            session_id=turn.log.session_id,
            turn_index=turn.log.next_turn_index(),
            log=turn.log,
            # the servers' start: its own figure, not ttft's own delay
            settings=AgentSettings(max_steps=turn.max_steps, mcp_start_ns=(t0, ev.now_ns())),
            listener=listener,
            submitted_ns=turn.submitted_ns,
        )
        try:
            return await turn.agent.run()
        finally:
            answer.close()
            with contextlib.suppress(Exception):  # a server that will not end never costs the turn
                await host.aclose()
    finally:
        await turn.backend.aclose()


def _make_backend(
    spec: str, base_url: str | None, target: Target | ProviderError, timeout: float | None, *, sdk: bool = False
) -> Backend:
    """The local engine runs in its own process, so a native crash ends the turn with a record instead of
    killing ttft; a hosted backend stays in this process (spawning one would cost more than the answer).
    A spec that did not resolve is raised here, to become the turn's recorded error."""
    if isinstance(target, ProviderError):
        raise target
    if target.local and os.environ.get("TTFT_IN_PROCESS") != "1":
        from ..isolated import ProcessBackend

        return ProcessBackend(spec, base_url)  # a BackendStartError (a TtftError) when it cannot start
    # Without the SDK unless asked: importing it is most of a hosted ask's own delay.
    return create_backend(target, timeout_s=timeout, lean=not sdk)


def _resolved(spec: str, base_url: str | None) -> Target | ProviderError:
    """``-m`` and ``--base-url`` resolved once for the whole command; a spec, key or config that does not
    resolve is kept, to be the turn's error when the backend is made (after the flags are checked)."""
    try:
        return resolve(spec, base_url=base_url)
    except ProviderError as err:
        return err


def read_attachments(paths: list[str], target: Target | ProviderError) -> tuple[Attachment, ...] | Refused:
    """``-a`` files, read and checked against the API and model ``target`` names, before anything is sent.

    A spec that does not resolve is not this check's to report: the turn then fails with its own error.
    """
    from ...backends.attachments import Refused, check_attachments, read_attachment

    files: list[Attachment] = []
    for path in paths:
        got = read_attachment(path)
        if isinstance(got, Refused):
            return got
        files.append(got)
    if files and not isinstance(target, ProviderError):
        model = target.model or ("local" if target.local else "")
        refused = check_attachments(files, api=target.api, model=model)
        if refused is not None:
            return refused
    return tuple(files)


def run(args: AskArgs) -> int:
    started = args.started_ns or ev.now_ns()  # tui.cli stamps the process start
    try:
        prompt = read_prompt(args.prompt)
    except PromptTooLarge as exc:
        print(f"ttft ask: {exc}", file=sys.stderr)
        return Exit.USAGE
    paths = list(args.attach)
    if not prompt and not paths:
        print(
            'ttft ask: give a question, e.g. ttft ask -m openai:gpt-4o-mini "hi" (or pipe it on stdin)', file=sys.stderr
        )
        return Exit.USAGE
    spec = args.model or default_spec()
    target = _resolved(spec, args.base_url)
    if isinstance(target, ProviderError):  # the turn's error later; these checks read the spec alone
        named = names_local_engine(spec)  # None (a config that does not read) refuses neither: it is the turn's error
        local_for_flags, local_for_tools = named is not False, named is True
    else:
        local_for_flags = local_for_tools = target.local
    if (problem := local_flags_problem(args.local, local_for_flags)) is not None:
        print(f"ttft ask: {problem}", file=sys.stderr)
        return Exit.USAGE
    if (problem := tools_problem(args.tools, local_for_tools)) is not None:
        print(f"ttft ask: {problem}", file=sys.stderr)
        return Exit.USAGE
    files = read_attachments(paths, target) if paths else ()
    if not isinstance(files, tuple):  # nothing was sent: a file that cannot go is the command line's problem
        print(f"ttft ask: -a {visible_controls(files.sentence)}", file=sys.stderr)
        return Exit.USAGE
    settings = args.settings
    system = scrub(args.system) if args.system else None
    request = build_request(prompt, system=system, settings=settings, attachments=files)
    log = SessionLog(args.session)
    recorder: TurnRecorder | None = None
    try:
        try:
            backend = _make_backend(spec, args.base_url, target, args.timeout, sdk=args.sdk)
        except TtftError as err:  # a ProviderError, a BackendStartError: said and recorded, never a traceback
            where = target.base_url if isinstance(target, Target) else args.base_url  # $OPENAI_BASE_URL too
            record = _failed_record(spec, where, request, err, log, started)
        else:
            if wants_tools(args.tools.mcp.specs):
                consent = consent_of(args.tools.allow_all, args.tools.allowed)
                tooled = _AgentAsk(backend, request, consent, log, started, args.tools.max_steps)
                try:
                    record = signals.run(_ask_agent(tooled, args, echo=not args.json))
                except KeyboardInterrupt as exc:
                    if (cut := tooled.record()) is None:
                        return signals.exit_code(exc)
                    _print(cut, args, log)
                    return signals.exit_code(exc)
                except Exception as exc:  # an MCP server that did not start: said, never a traceback
                    if tooled.record() is not None:
                        raise
                    print(f"ttft ask: the MCP servers did not start: {visible_controls(str(exc))}", file=sys.stderr)
                    return Exit.FAILED
                _print(record, args, log)
                if log.write_errors or (tooled.agent is not None and tooled.agent.result.log_error):
                    return LOG_FAILED
                return Exit.OK if record.status == "ok" else for_error_kind(record.error.type if record.error else None)
            recorder = new_recorder(backend, request, session_id=log.session_id, turn_index=log.next_turn_index())
            recorder.feed(ev.Submitted(started))  # ttft's own delay runs from the process start to the send
            # SIGTERM and SIGHUP (a container stop, a closed terminal) end the turn like Ctrl-C
            record = signals.run(_ask(backend, request, recorder, log, echo=not args.json, quiet=args.quiet))
    except KeyboardInterrupt as exc:
        if recorder is None:
            return signals.exit_code(exc)
        record = recorder.finish()  # run_turn recorded Cancelled and logged it
        _print(record, args, log)
        return signals.exit_code(exc)
    _print(record, args, log)
    if log.write_errors:
        return LOG_FAILED
    return Exit.OK if record.status == "ok" else for_error_kind(record.error.type if record.error else None)


def _print(record: TurnRecord, args: AskArgs, log: SessionLog) -> None:
    """The record (``--json``), the summary, and any log write that failed, on stderr; a closed terminal
    (after SIGHUP) or a closed pipe just ends the printing: the turn is in the log."""
    try:
        _print_record(record, args)
        for err in log.write_errors:
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
