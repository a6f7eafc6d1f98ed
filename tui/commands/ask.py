"""``ttft ask``: one turn, headless and scriptable.

The answer streams to stdout, a one-line telemetry summary goes to stderr; ``--json``
prints the full ``ttft.turn`` record to stdout instead. Exit code 0 on success, 1 on
error (the record is still printed and logged, with ``status: error``), 3 when the turn
could not be written to the session log (the answer and record are still printed), 130
when interrupted (143 for SIGTERM, 129 for SIGHUP: the turn is logged as cancelled).
Every turn is appended to the session log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from types import SimpleNamespace
from typing import Any

from backends.base import Backend, ChatRequest, build_request
from backends.finish import finish_turn
from backends.providers import ProviderError, create_backend, default_spec, is_local_spec, parse_spec
from backends.turn import new_recorder, run_turn
from telemetry import events as ev
from telemetry.log import SessionLog, check_session_id
from telemetry.metrics import OWN_DELAY_SHOWN_MS
from telemetry.record import TurnRecord
from telemetry.recorder import TurnRecorder
from telemetry.settings import TurnSettings
from telemetry.surrogates import scrub
from telemetry.wire import WaitSplit
from tui import signals
from tui.commands.args import model_spec, non_negative_int, positive_int, seconds, temperature
from tui.format import visible_controls

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
LOG_FAILED = 3  # exit code: the turn ran, but its record could not be written to the session log
# JSON escapes C0 itself; DEL and C1 (0x9b is a CSI) it leaves raw with ensure_ascii=False.
_JSON_RAW_CONTROLS = re.compile("[\x7f-\x9f]")


def session_id_arg(value: str) -> str:
    """``--session``: an id in the sessions folder, never a path out of it."""
    try:
        return check_session_id(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def deadline_arg(value: str) -> float:
    """``--deadline``: a positive number of seconds."""
    try:
        secs = float(value)
    except ValueError:
        secs = float("nan")
    if not secs > 0 or secs == float("inf"):
        raise argparse.ArgumentTypeError(f"takes a positive number of seconds, not {value!r}")
    return secs


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
    p.add_argument(
        "--timeout",
        type=seconds,
        default=None,
        metavar="S",
        help="end the turn when no new token came for S seconds; keepalives do not count (default 60)",
    )


def add_turn_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", help="a system prompt")
    p.add_argument("--max-output-tokens", type=positive_int, metavar="N")
    p.add_argument("--temperature", type=temperature)
    p.add_argument(
        "--reasoning-effort", choices=EFFORTS, help="OpenAI reasoning_effort / Anthropic output_config.effort"
    )
    p.add_argument(
        "--reasoning-summary", choices=("auto", "concise", "detailed"), help="Responses API reasoning summary"
    )
    p.add_argument(
        "--thinking-budget", metavar="N|adaptive", help="Anthropic extended thinking: budget tokens or adaptive"
    )
    p.add_argument("--thinking-display", choices=("summarized", "omitted"), help="Anthropic thinking display")
    p.add_argument("--no-stream", action="store_true", help="ask for the whole answer at once (TTFT == E2E)")
    p.add_argument(
        "--max-retries",
        type=non_negative_int,
        default=2,
        metavar="N",
        help="SDK retries on 408/409/429/5xx (default 2)",
    )
    p.add_argument(
        "--deadline",
        type=deadline_arg,
        default=None,
        metavar="S",
        help="end the turn as an error after S seconds in all, however steadily it streams (partial answer kept)",
    )


def settings_from_args(args: argparse.Namespace) -> TurnSettings:
    extra: dict[str, Any] = {}
    budget: int | None = None
    tb = getattr(args, "thinking_budget", None)
    if tb:
        if str(tb).lower() == "adaptive":
            extra["thinking"] = "adaptive"
        else:
            try:
                budget = int(tb)
            except ValueError:
                raise SystemExit(
                    f"ttft: --thinking-budget takes a number of tokens or 'adaptive', not {tb!r}"
                ) from None
    return TurnSettings(
        stream=not getattr(args, "no_stream", False),
        max_output_tokens=getattr(args, "max_output_tokens", None),
        temperature=getattr(args, "temperature", None),
        reasoning_effort=getattr(args, "reasoning_effort", None),
        reasoning_summary=getattr(args, "reasoning_summary", None),
        thinking_budget=budget,
        thinking_display=getattr(args, "thinking_display", None),
        max_retries=getattr(args, "max_retries", 2),
        deadline_s=getattr(args, "deadline", None),
        extra=extra,
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="ask one question; answer to stdout, telemetry summary to stderr")
    add_model_options(p)
    add_turn_options(p)
    p.add_argument("--json", action="store_true", help="print the full ttft.turn record instead of the answer")
    p.add_argument(
        "--session", metavar="ID", type=session_id_arg, help="append to this session's log (default: a new session)"
    )
    p.add_argument(
        "--sdk",
        action="store_true",
        help="read Chat Completions (openai, compat) with the OpenAI SDK, not ttft's own reader (same record;"
        " the SDK's import adds 0.5-1 s)",
    )
    p.add_argument("prompt", nargs="*", help="the question (read from stdin when omitted)")
    p.set_defaults(func=run)


def summary_line(d: dict[str, Any]) -> str:
    """One line for stderr: the numbers that say where the time went."""
    m, t = d["metrics"], d["tokens"]

    def f(v: float | None, unit: str = " ms") -> str:
        return "-" if v is None else f"{v:.0f}{unit}" if v >= 100 else f"{v:.1f}{unit}"

    who = f"{d['provider']}:{d['model']}"
    parts = [f"TTFT {f(m.get('ttft_ms'))}"]
    http = d.get("http") or {}
    wait = WaitSplit.from_dict(m.get("wait_ms")) if http else None
    if wait is not None:  # the wire split (telemetry.wire)
        conn = f" ({http['connection']} connection)" if http.get("connection") else ""
        parts.append(f"network {f(wait.network_ms)}{conn}, server {f(wait.server)}, first token {f(wait.first_token)}")
    if m.get("reasoning_delay_ms") is not None:
        est = " est" if m.get("reasoning_delay_estimated") else ""
        parts.append(f"TTFVT {f(m.get('ttfvt_ms'))} (thinking {f(m.get('reasoning_delay_ms'))}{est})")
    tpot = m.get("tpot_ms")
    if tpot:
        parts.append(f"TPOT {f(tpot)} ({1000 / tpot:.0f} tok/s)")
    out = t.get("output")
    if out is not None:
        r = f", {t['reasoning']} reasoning" if t.get("reasoning") else ""
        parts.append(f"{out} tokens out{r} ({t['source']})")
    if m.get("e2e_ms") is not None:
        parts.append(f"E2E {f(m['e2e_ms'])}")
    else:  # no token came: an "E2E" would time an answer that does not exist
        parts.append(f"no tokens ({f(m.get('total_ms'))} in all)")
    if m.get("expected_prefill_ms") is not None and m.get("server_queue_ms") is not None:  # a saved ttft probe
        parts.append(f"server: prefill {f(m['expected_prefill_ms'])} expected, queue {f(m['server_queue_ms'])}")
    own = m.get("own_delay_ms")
    if own is not None and own >= OWN_DELAY_SHOWN_MS:
        parts.append(f"ttft's own {f(own)} before the send")
    if d.get("attempts", 1) > 1:
        parts.append(f"{d['attempts']} attempts (+{f(m.get('retry_ms'))} retrying)")
    if not d["settings"].get("stream", True):
        parts.append("not streamed")
    line = " · ".join(parts) + f" · {who}"
    if http.get("request_id"):
        line += f" · request id {http['request_id']}"
    if d["status"] == "error" and d.get("error"):
        e = d["error"]
        line = f"error: {e['message']}" + (f" {e['hint']}" if e.get("hint") else "") + f"\n{line}"
    elif d["status"] == "cancelled":
        line = f"cancelled · {line}"
    return line


def _failed_record(
    spec: str, base_url: str | None, request: ChatRequest, err: ProviderError, log: SessionLog, submitted_ns: int
) -> TurnRecord:
    """A turn that never reached a server (bad spec, missing key) is still a recorded turn."""
    provider, model = parse_spec(spec) if spec.strip() else ("", None)
    stub = SimpleNamespace(provider=provider, api="", model=model or "", base_url=base_url)
    rec = new_recorder(stub, request, session_id=log.session_id, turn_index=log.next_turn_index())
    rec.feed(ev.Submitted(submitted_ns))
    rec.feed(ev.Failed(ev.now_ns(), err.kind, err.message, None, err.hint))
    return finish_turn(rec, log)  # a failed write is kept in log.write_errors, reported by run()


async def _ask(
    backend: Backend, request: ChatRequest, recorder: TurnRecorder, log: SessionLog, echo: bool
) -> TurnRecord:
    wrote = False
    # On a terminal the answer's control characters are shown, not run; piped, it stays byte-exact.
    shown = visible_controls if sys.stdout.isatty() else str

    def on_event(e: ev.Event) -> None:
        nonlocal wrote
        if isinstance(e, ev.ModelLoadStarted) and e.what:
            print(f"ttft: {visible_controls(e.what)}", file=sys.stderr, flush=True)  # e.g. assembling the model
        if echo and isinstance(e, ev.TextDelta) and e.text:
            sys.stdout.write(shown(e.text))
            sys.stdout.flush()
            wrote = True

    try:
        return await run_turn(backend, request, recorder, log=log, on_event=on_event)
    finally:
        if wrote:
            sys.stdout.write("\n")
            sys.stdout.flush()
        await backend.aclose()


def _make_backend(spec: str, base_url: str | None, timeout: float | None, *, sdk: bool = False) -> Backend:
    """The local engine runs in its own process, so a native crash ends the turn with a record instead of
    killing ttft; a hosted backend stays in this process (spawning one would cost more than the answer)."""
    if is_local_spec(spec) and os.environ.get("TTFT_IN_PROCESS") != "1":
        from tui.isolated import BackendStartError, ProcessBackend

        try:
            return ProcessBackend(spec, base_url)
        except BackendStartError as exc:
            raise ProviderError(str(exc), kind=exc.kind, hint=exc.hint) from None
    # Without the SDK unless asked: importing it is most of a hosted ask's own delay.
    return create_backend(spec, base_url=base_url, timeout_s=timeout, lean=not sdk)


def run(args: argparse.Namespace) -> int:
    started = getattr(args, "started_ns", None) or ev.now_ns()  # tui.cli stamps the process start
    prompt = " ".join(args.prompt).strip()
    if not prompt and not sys.stdin.isatty():
        prompt = sys.stdin.read().strip()
    prompt = scrub(prompt)  # bytes argv could not decode arrive as lone surrogates, which no request can carry
    if not prompt:
        print(
            'ttft ask: give a question, e.g. ttft ask -m openai:gpt-4o-mini "hi" (or pipe it on stdin)', file=sys.stderr
        )
        return 2
    settings = settings_from_args(args)
    request = build_request(prompt, system=scrub(args.system) if args.system else None, settings=settings)
    log = SessionLog(args.session)
    spec = args.model or default_spec()
    recorder: TurnRecorder | None = None
    try:
        try:
            backend = _make_backend(spec, args.base_url, args.timeout, sdk=getattr(args, "sdk", False))
        except ProviderError as err:
            record = _failed_record(spec, args.base_url, request, err, log, started)
        else:
            recorder = new_recorder(backend, request, session_id=log.session_id, turn_index=log.next_turn_index())
            recorder.feed(ev.Submitted(started))  # ttft's own delay runs from the process start to the send
            # SIGTERM and SIGHUP (a container stop, a closed terminal) end the turn like Ctrl-C
            record = signals.run(_ask(backend, request, recorder, log, echo=not args.json))
    except KeyboardInterrupt as exc:
        if recorder is None:
            return signals.exit_code(exc)
        record = recorder.finish()  # run_turn recorded Cancelled and logged it
        _print(record, args.json, log)
        return signals.exit_code(exc)
    _print(record, args.json, log)
    if log.write_errors:
        return LOG_FAILED
    return 0 if record.status == "ok" else 1


def _print(record: TurnRecord, as_json: bool, log: SessionLog) -> None:
    """The record (``--json``), the summary, and any log write that failed, on stderr; a closed terminal
    (after SIGHUP) or a closed pipe just ends the printing: the turn is in the log."""
    try:
        _print_record(record, as_json)
        for err in log.write_errors:
            print(f"ttft ask: {err}; the turn was not saved (its record is above with --json)", file=sys.stderr)
    except OSError:
        pass


def _print_record(record: TurnRecord, as_json: bool) -> None:
    d = record.to_dict()
    if as_json:  # every control character escaped: the same JSON values, and safe on a terminal
        text = json.dumps(d, ensure_ascii=False, indent=2)
        print(_JSON_RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text))
    print(visible_controls(summary_line(d)), file=sys.stderr)  # the server's error text among it
