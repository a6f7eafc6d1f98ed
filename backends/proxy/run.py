"""One proxy run: the server up, a program run under it (or none, until stopped), every call kept and logged.

:class:`ProxyRunner` is the core that ``ttft proxy`` calls and a script can call the same way. It
starts the :class:`~backends.proxy.server.ProxyServer`, then either runs ``plan.command`` with the two
base URLs added to its environment (nothing else changed; it keeps this process's stdin, stdout and
stderr and its process group, so a terminal's Ctrl-C reaches it directly) and waits for it, or waits
for :meth:`ProxyRunner.stop`. Every call that ends is:

- stripped of its content unless ``keep_content`` (the server leaves it out already; this is the one
  place that could write it, so it makes sure);
- appended to the run's session log (``telemetry.log.turns.SessionLog``, one session per run) by one
  writer thread, in order, so an fsync never holds up the streams the loop is passing on;
- handed to ``on_call`` (the command's line per call);
- kept for the run's end (its summary, its sessions, ``--json``) without its per-chunk times unless
  ``--json`` will write them (``json_out``: every call's whole record, by its schema): a long answer's
  chunks are most of a record (~70 bytes each, a 1,000-chunk answer ~70 KB), and the summary and the
  sessions read only each call's figures, computed already. The session log has every record whole.

While it listens, the run's state file (:mod:`backends.proxy.state`: its pid, port and session log)
lets ``ttft proxy --watch`` find it from another terminal; it is removed once the log is written.

With ``otlp_port`` set (``--otlp``), the OTLP receiver (``backends.proxy.otlp``) runs beside the server
and the program's environment also points its OpenTelemetry exporter there (a signal's own endpoint for
traces or logs, or a gRPC protocol, which would send them past it, is left out); the tool spans it hands
over are kept, and handed to ``on_spans``. They are not logged: the state file says the receiver's
endpoint, so a watch says that it does not see them (``backends.proxy.watch``).

When the run ends the server is closed, the log's writes are waited for, the app's sessions are rebuilt
from the calls and the app's tool spans (``telemetry.proxy.sessions.rebuild``) and ``--json`` is
written, masked as the logs are, as a private file. A program that cannot be started ends the run with
the shell's status for it (127: not found, 126: not executable); one that a signal killed, with 128 +
the signal's number.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...telemetry import events as ev
from ...telemetry.export.json_text import json_text
from ...telemetry.log import private_files
from ...telemetry.log.secrets import mask, masked_record, masked_value
from ...telemetry.log.turns import LogWriteError, SessionLog
from ...telemetry.log.urls import redact_url
from ...telemetry.proxy.app_spans import AppToolSpan
from ...telemetry.proxy.sessions import ProxySession, rebuild
from ...telemetry.record import TurnRecord
from ...telemetry.steps import ToolStepRecord, of_kind
from .otlp import OtlpCounts, OtlpReceiver, program_env
from .plan import ProxyPlan
from .server import ProxiedCall, ProxyServer
from .state import RunInfo, StateFile, program_name, publish

SCHEMA = "ttft.proxy/1"
NOT_FOUND, NOT_EXECUTABLE = 127, 126  # the shell's statuses for a command it could not run


@dataclass(frozen=True, slots=True)
class Started:
    """What a run says once it listens: its address, the variables to set, and where its log goes."""

    base_url: str
    env: dict[str, str]
    session_id: str
    log_path: Path


@dataclass(frozen=True, slots=True)
class ProxyRun:
    """A finished run: its calls in the order they ended, the sessions rebuilt from them, the program's
    exit status (None when none ran), why it could not start, and what could not be written. The calls'
    records hold their per-chunk times only when the plan had a ``json_out`` (see the module doc)."""

    calls: tuple[ProxiedCall, ...]
    sessions: tuple[ProxySession, ...]
    session_id: str
    log_path: Path
    status: int | None = None
    program_problem: str | None = None
    not_saved: tuple[str, ...] = ()
    app_spans: tuple[AppToolSpan, ...] = ()  # the app's own tool spans (--otlp), in the order they came
    otlp: OtlpCounts | None = None  # what the OTLP receiver took; None: it did not run
    otlp_endpoint: str = ""
    began_ns: int = 0  # the run's start on the proxy's monotonic clock: the origin of the spans' times

    @property
    def timed_by_app(self) -> int:
        """The sessions' tool steps the app's own spans timed."""
        return sum(1 for s in self.sessions for st in of_kind(s.record.steps, ToolStepRecord) if st.timing == "span")

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object: every call's turn record and every session, masked as the logs are; with
        ``--otlp``, what the app's telemetry held (``app_telemetry``)."""
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "calls": [masked_record(c.record.to_dict()) for c in self.calls],
            "sessions": [masked_value(s.to_dict()) for s in self.sessions],
        }
        if self.otlp is not None:
            out["app_telemetry"] = masked_value(
                {
                    "endpoint": self.otlp_endpoint,
                    **self.otlp.to_dict(),
                    "joined": self.timed_by_app,
                    "spans": [s.to_dict(self.began_ns) for s in self.app_spans],
                }
            )
        return out


def _noop(*_: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Listeners:
    """What a run tells its front end: started, each call as it ends, a problem (a log write that failed)."""

    on_start: Callable[[Started], None] = _noop
    on_call: Callable[[ProxiedCall], None] = _noop
    on_problem: Callable[[str], None] = _noop
    on_spans: Callable[[Sequence[AppToolSpan]], None] = _noop  # the app's tool spans, as each export came


def without_content(record: TurnRecord) -> TurnRecord:
    """The record with no word of the conversation: prompt, answer, reasoning and tool arguments emptied
    (tool names, sizes, tokens and timings stay)."""
    calls = tuple({**c, "arguments": ""} if c.get("arguments") else c for c in record.tool_calls)
    if not (record.prompt or record.answer or record.reasoning) and calls == record.tool_calls:
        return record
    return dataclasses.replace(record, prompt="", answer="", reasoning="", tool_calls=calls)


@dataclass
class _Collected:
    calls: list[ProxiedCall] = field(default_factory=list)
    spans: list[AppToolSpan] = field(default_factory=list)
    not_saved: list[str] = field(default_factory=list)


class ProxyRunner:
    """Runs one :class:`ProxyPlan` (see the module doc); listeners are given here, once."""

    def __init__(self, plan: ProxyPlan, listeners: Listeners | None = None) -> None:
        self.plan = plan
        self.listeners = listeners or Listeners()
        self._log = SessionLog(directory=plan.sessions_dir)
        self._stopped: asyncio.Event | None = None
        self._stop_signal: int | None = None
        self._program: asyncio.subprocess.Process | None = None
        self._got = _Collected()
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ttft-proxy-log")

    @property
    def session_id(self) -> str:
        return self._log.session_id

    def stop(self, signum: int = signal.SIGINT) -> None:
        """A stop signal: without a program it ends the run (its status 128 + ``signum``). With one, the
        program decides: SIGINT is left to it (a terminal's Ctrl-C reaches the whole process group, so it
        has it already: the proxy waits for it, as ``time`` does); any other is passed on to it."""
        if self._program is not None:
            if signum != signal.SIGINT and self._program.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._program.send_signal(signum)
            return
        if self._stop_signal is None:
            self._stop_signal = signum
        if self._stopped is not None:
            self._stopped.set()

    async def run(self) -> ProxyRun:
        """Start the server (its ProxyError, e.g. a port taken, is raised from here), run until the program
        ends or :meth:`stop`, then close and settle everything (see the module doc)."""
        self._stopped = asyncio.Event()
        began = ev.now_ns()
        server = ProxyServer(self.plan.config, self._on_call, session_id=self.session_id)
        await server.start()
        receiver: OtlpReceiver | None = None
        if self.plan.config.otlp_port is not None:
            receiver = OtlpReceiver(self.plan.config.otlp_port, self._on_spans)
            try:
                await receiver.start()
            except BaseException:
                await server.aclose()
                raise
        env = {**server.env(), **(receiver.env() if receiver is not None else {})}
        status: int | None = None
        problem: str | None = None
        state = self._publish(server, receiver)
        try:
            self.listeners.on_start(Started(server.base_url, env, self.session_id, self._log.path))
            if self.plan.runs_program:
                status, problem = await self._run_program(env, otlp=receiver is not None)
            else:
                if self._stop_signal is not None:  # stopped while it started
                    self._stopped.set()
                await self._stopped.wait()
                status = 128 + (self._stop_signal or signal.SIGINT)
        finally:
            if receiver is not None:
                await receiver.aclose()
            await server.aclose()
            await asyncio.get_running_loop().run_in_executor(None, self._writer.shutdown, True)
            if state is not None:  # once every call is in the log: a watcher that sees it go has read them all
                state.remove()
        return self._finish(status, problem, receiver, began)

    def _publish(self, server: ProxyServer, receiver: OtlpReceiver | None) -> StateFile | None:
        """The run's state file, for ``--watch``; a failure is said and the run goes on without it."""
        info = RunInfo(
            pid=os.getpid(),
            port=server.port,
            base_url=server.base_url,
            upstream=redact_url(self.plan.config.upstream) or "",
            session_id=self.session_id,
            log_path=self._log.path.absolute(),
            program=program_name(self.plan.command),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            otlp_endpoint=receiver.endpoint if receiver is not None else "",
        )
        try:
            return publish(info, self.plan.state_dir)
        except OSError as exc:
            self.listeners.on_problem(
                mask(
                    f"could not write the state file ({exc.strerror or exc}): ttft proxy --watch will not find this run"
                )
            )
            return None

    async def _run_program(self, env: dict[str, str], *, otlp: bool) -> tuple[int, str | None]:
        """The program's exit status (the shell's for one it could not start, with why). ``otlp``: its
        exporter is pointed at the receiver (``backends.proxy.otlp.program_env``)."""
        argv = self.plan.command
        full = program_env(os.environ, env) if otlp else {**os.environ, **env}
        try:
            self._program = await asyncio.create_subprocess_exec(*argv, env=full)
        except FileNotFoundError:
            return NOT_FOUND, f"{argv[0]}: command not found"
        except PermissionError:
            return NOT_EXECUTABLE, f"{argv[0]}: permission denied (not an executable program)"
        except OSError as exc:  # an exec format error, a name too long
            return NOT_EXECUTABLE, f"{argv[0]}: cannot run it: {exc.strerror or exc}"
        rc = await self._program.wait()
        return (128 - rc if rc < 0 else rc), None  # a signal's death: 128 + its number, as a shell says

    def _on_call(self, call: ProxiedCall) -> None:
        if not self.plan.config.keep_content:
            call = dataclasses.replace(call, record=without_content(call.record))
        self._writer.submit(self._append, call.record)
        self.listeners.on_call(call)
        if self.plan.json_out is None and call.record.chunks:  # kept lighter: see the module doc
            call = dataclasses.replace(call, record=dataclasses.replace(call.record, chunks=()))
        self._got.calls.append(call)

    def _on_spans(self, spans: Sequence[AppToolSpan]) -> None:
        self._got.spans.extend(spans)
        self.listeners.on_spans(spans)

    def _append(self, record: TurnRecord) -> None:
        """On the writer thread: one record into the session log; a failure is said once, then counted."""
        try:
            self._log.append(record)
        except LogWriteError as exc:
            if not self._got.not_saved:
                self.listeners.on_problem(mask(f"could not write the session log: {exc}"))
            self._got.not_saved.append(str(self._log.path))

    def _finish(self, status: int | None, problem: str | None, receiver: OtlpReceiver | None, began: int) -> ProxyRun:
        calls = tuple(self._got.calls)
        spans = tuple(self._got.spans)
        sessions = tuple(rebuild([(c.record, c.shape) for c in calls], spans))
        not_saved = [f"the session log {self._log.path}"] if self._got.not_saved else []
        result = ProxyRun(calls, sessions, self.session_id, self._log.path, status, problem, app_spans=spans)
        if receiver is not None:
            result = dataclasses.replace(result, otlp=receiver.counts, otlp_endpoint=receiver.endpoint, began_ns=began)
        if self.plan.json_out is not None:
            try:
                private_files.replace(self.plan.json_out, (json_text(result.to_dict()) + "\n").encode("utf-8"))
            except OSError as exc:
                not_saved.append(f"{self.plan.json_out}: {exc.strerror or exc}")
        return dataclasses.replace(result, not_saved=tuple(not_saved))
