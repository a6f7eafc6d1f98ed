"""One conversation with one backend: messages, settings, the session log, past records.

No widgets here, so the chat and each compare pane can hold one each. Its past turns are typed
``TurnRecord``s: a resumed log's lines are read into records here, at the edge, and a line that
does not read as one is counted with the log's other unreadable lines (``Skipped``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..backends.ask.core import TurnCore
from ..backends.attachments import Attachment
from ..backends.base import Backend, ChatRequest, Message, build_request
from ..backends.turn import new_recorder, warm_up
from ..telemetry import events as ev
from ..telemetry.cost import warm as warm_prices
from ..telemetry.log.branches import lineage, links, on_branch
from ..telemetry.log.turns import SessionLog, Skipped, count_bad, parse_line, tail_records_from
from ..telemetry.record import TurnRecord
from ..telemetry.settings import TurnSettings
from ..telemetry.typed_read import RecordError, bulk_read
from .runner import LiveTurn, LoopThread, start

if TYPE_CHECKING:
    from ..telemetry.recorder import TurnRecorder

BackendFactory = Callable[[str, str | None], Backend]
# A tool-using turn for this backend, request, first recorder and log, or None (no tools to offer it).
AgentFactory = Callable[[Backend, ChatRequest, "TurnRecorder", SessionLog], TurnCore | None]
RESUME_TURNS = 200  # the last turns a resume reads up front (history, timelines); the rest is read lazily


def default_backend_factory(
    spec: str, base_url: str | None, *, timeout_s: float | None = None, lean: bool = True
) -> Backend:
    """The backend in its own process (timestamps independent of painting); TTFT_IN_PROCESS=1 keeps it here.
    Either way a compat server's turns record its own queue and KV use (``server_gauges``) for the pane.

    ``timeout_s``: the token idle timeout (``--timeout``); None is the provider's own. ``lean``: the hosted
    APIs without their SDKs (the same record; a third of the backend's CPU per token)."""
    if os.environ.get("TTFT_IN_PROCESS") == "1":
        from ..backends.providers.registry import create_backend  # imported late: the SDKs are slow to import

        return create_backend(spec, base_url=base_url, timeout_s=timeout_s, server_gauges=True, lean=lean)
    from ..backends.ask.isolated import BackendStartError, ProcessBackend

    try:
        return ProcessBackend(spec, base_url, timeout_s=timeout_s, lean=lean)
    except BackendStartError:
        raise  # the spec, key or config is wrong: say so
    except (OSError, RuntimeError):  # no child process here (sandbox, frozen build): stamp in this process
        from ..backends.providers.registry import create_backend

        return create_backend(spec, base_url=base_url, timeout_s=timeout_s, server_gauges=True, lean=lean)


def default_model_spec() -> str:
    try:
        from ..backends.providers.registry import default_spec
    except ImportError:
        return "local"
    return default_spec()


@dataclass
class ChatSession:
    runner: LoopThread
    spec: str
    settings: TurnSettings = field(default_factory=TurnSettings)
    base_url: str | None = None
    factory: BackendFactory = default_backend_factory
    log: SessionLog = field(default_factory=SessionLog)
    system_prompt: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # recorded with each turn (compare id, pane, ...)

    def __post_init__(self) -> None:
        self.backend: Backend | None = None
        self.messages: list[Message] = []
        self.records: list[TurnRecord] = []  # every turn of the session this chat holds, branches included
        # The turns of the branch the chat is on, oldest first, whose exchanges end ``messages`` (the
        # context before them, a resumed log's earlier turns or a compare pane's, is not theirs to cut).
        self.path: list[TurnRecord] = []
        self._branch_of: int | None = None  # the turn the next one's prompt replaces (branch_at)
        self.turn_index = 0
        self.live: LiveTurn | None = None
        self._sent: Message | None = None  # the live turn's user message: its attachments stay in the context
        # The backend being created (on the stream loop): the start-up warm-up and the first turn share it.
        self._creating: concurrent.futures.Future[Backend] | None = None
        self._warming: asyncio.Future[None] | None = None  # the warm-up of the current backend
        # A resumed session's earlier turns as context, read in a thread (see resume); the first turn waits for it.
        self._earlier: concurrent.futures.Future[list[Message]] | None = None
        self._read_earlier: Callable[[], None] | None = None  # starts the read of _earlier (read_earlier)

    # --- backend -------------------------------------------------------------------
    async def ensure_backend(self, *, keep_failure: bool = False) -> Backend:
        """Create the backend on the stream loop (a local model loads there, never on the UI thread).

        Once, however many wait for it: a turn sent while the warm-up is still creating it waits
        for that one. A failed creation is tried again by the next call, unless ``keep_failure``
        (the warm-up): then the first turn meets the same error without paying for it twice.
        """
        while self.backend is None:
            fut = self._creating
            if fut is None:
                fut = self._creating = self.runner.submit(self._make(self.factory, self.spec, self.base_url))
            try:
                backend = await asyncio.wrap_future(fut)
            except Exception:
                if not keep_failure and self._creating is fut:
                    self._creating = None
                raise
            if self._creating is fut:  # still the model wanted (no switch meanwhile)
                self._creating = None
                if self.backend is None:
                    self.backend = backend
                else:  # one was put in place meanwhile: it wins
                    self._close_later(backend)
        return self.backend

    @staticmethod
    async def _make(factory: BackendFactory, spec: str, base_url: str | None) -> Backend:
        return factory(spec, base_url)  # on the stream loop: a process start or a model load never blocks the UI

    async def warm_up(self) -> None:
        """Start the backend and pay its first-use costs now (the SDK's first stream, a local model's load),
        while the user types, so the first turn's own delay is as small as any later turn's.

        Never raises: a backend that cannot start says so on the first turn, as it would without this.
        """
        try:
            backend = await self.ensure_backend(keep_failure=True)
        except Exception:
            return

        async def warm() -> None:
            await warm_up(backend, self.settings.extra)  # a local model loads as the turns will ask
            # The price table's import (0.2-0.3 s, once), in a thread while the user types: at the first
            # turn's end it would hold the stream loop just as the answer's last paint is due.
            await asyncio.get_running_loop().run_in_executor(None, warm_prices, getattr(backend, "price", None))

        self._warming = warming = asyncio.wrap_future(self.runner.submit(warm()))
        with contextlib.suppress(Exception):
            await warming

    def switch_model(self, spec: str, base_url: str | None = None) -> None:
        """The next turn uses ``spec``; the old backend closes in the background."""
        old, self.backend = self.backend, None
        creating, self._creating = self._creating, None
        self._warming = None
        self.spec, self.base_url = spec, base_url
        if old is not None:
            self._close_later(old)
        if creating is not None:  # one being created for the old model: close it once it exists
            creating.add_done_callback(self._close_created)

    def _close_created(self, fut: concurrent.futures.Future[Backend]) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self._close_later(fut.result())

    def _close_later(self, backend: Backend) -> None:
        fut = self.runner.submit(backend.aclose())
        fut.add_done_callback(lambda f: f.exception())  # an error closing the old one is not the user's problem

    async def close_backend(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:

            async def close() -> None:
                await backend.aclose()

            with contextlib.suppress(Exception):
                await self.runner.call(close)

    @property
    def label(self) -> str:
        if self.backend is not None:
            return f"{self.backend.provider} · {self.backend.model}"
        return self.spec

    # --- turns ---------------------------------------------------------------------
    def build_request(self, prompt: str, attachments: tuple[Attachment, ...] = ()) -> ChatRequest:
        return build_request(
            prompt, system=self.system_prompt, history=self.messages, settings=self.settings, attachments=attachments
        )

    async def start(
        self,
        prompt: str,
        *,
        submitted_ns: int | None = None,
        attachments: tuple[Attachment, ...] = (),
        agent: AgentFactory | None = None,
    ) -> LiveTurn:
        """Start a turn. ``submitted_ns``: when the user asked (Enter), on the events' clock; ttft's own
        delay (``own_delay_ms``) runs from there to the first send. ``attachments``: files read and
        checked by ``backends.attachments`` (``check_attachments`` against this backend first).
        ``agent``: where tools are offered, the turn it makes (the agent loop, ``live.agent``); else one stream."""
        submitted_ns = ev.now_ns() if submitted_ns is None else submitted_ns
        backend = await self.ensure_backend()
        await self._take_earlier()
        request = self.build_request(prompt, attachments)
        self._sent = request.messages[-1]
        recorder = new_recorder(
            backend, request, session_id=self.log.session_id, turn_index=self.turn_index, extra=self.extra
        )
        recorder.branch_of, self._branch_of = self._branch_of, None
        recorder.feed(ev.Submitted(submitted_ns))  # before the runner sees the recorder: no other feeder yet
        warming = self._warming
        if warming is not None and not warming.done() and backend.provider == "local":
            # Sent while the start-up load still runs: the wait for it is this turn's load phase, as a load
            # in the turn would be (never its own delay, never TTFT).
            recorder.feed(ev.ModelLoadStarted(ev.now_ns(), what="waiting for the model load begun at start-up"))
            with contextlib.suppress(Exception):
                await asyncio.shield(warming)
            recorder.feed(ev.ModelLoadFinished(ev.now_ns()))
        self.turn_index += 1
        tooled = agent(backend, request, recorder, self.log) if agent is not None else None
        self.live = start(self.runner, tooled or TurnCore(backend, request, recorder, log=self.log))
        return self.live

    def complete(self, record: TurnRecord) -> None:
        """Fold a finished turn into the conversation. A turn with no answer text leaves the context unchanged."""
        self.records.append(record)
        self.path.append(record)
        self.live = None
        # the log may have moved its index past another writer's turn
        self.turn_index = max(self.turn_index, record.turn_index + 1)
        sent, self._sent = self._sent, None
        if record.answer:
            # The live turn's own message (its files with it: the next turn's model still sees them); a
            # logged one holds its prompt only, since a log never keeps an attachment's contents.
            user = sent if sent is not None else Message("user", record.prompt)
            self.messages += [user, Message("assistant", record.answer)]

    def pop_last_exchange(self) -> str | None:
        """For regenerate: the last prompt, with its answer removed from the context; the next turn is
        a new branch in its place (``branch_at``)."""
        if not self.path:
            return None
        last = self.path[-1]
        self.branch_at(last.turn_index)
        return last.prompt

    def branch_at(self, turn_index: int) -> TurnRecord | None:
        """The next turn replaces turn ``turn_index`` of this branch (an edited prompt): the context goes
        back to what that turn was sent with, and the next record says ``branch_of``. The turns from
        there on stay in the log and in ``records``; the branch's turns are the record returned
        (None when the turn is not on this branch: nothing changes)."""
        at = next((k for k, r in enumerate(self.path) if r.turn_index == turn_index), None)
        if at is None:
            return None
        edited = self.path[at]
        self.messages = self.messages[: self._context_before(at)]
        del self.path[at:]
        self._branch_of = turn_index
        return edited

    def _context_before(self, at: int) -> int:
        """How many of ``messages`` come before ``path[at]``'s exchange (a turn without an answer has none)."""
        return max(0, len(self.messages) - 2 * sum(1 for r in self.path[at:] if r.answer))

    def files_sent_with(self, turn_index: int) -> tuple[Attachment, ...]:
        """The files a turn of this branch was sent with, when this chat sent it and it is in the context
        (a logged turn keeps no contents; a turn without an answer left none): what regenerate sends again."""
        at = next((k for k, r in enumerate(self.path) if r.turn_index == turn_index), None)
        if at is None or not self.path[at].answer:
            return ()
        k = self._context_before(at)
        return self.messages[k].attachments if k < len(self.messages) and self.messages[k].role == "user" else ()

    def continue_with(self, messages: list[Message]) -> None:
        """Go on from another conversation's context (a compare pane's): none of this log's turns is
        in it, so none is on the branch."""
        self.messages, self.path, self._branch_of = list(messages), [], None

    def new_chat(self) -> None:
        self.messages, self.records, self.turn_index, self.live = [], [], 0, None
        self.path, self._branch_of = [], None
        self._sent = None
        self._earlier, self._read_earlier = None, None
        self.log = SessionLog()

    def resume(self, path: Path, skipped: Skipped | None = None, *, turns: int = RESUME_TURNS) -> list[TurnRecord]:
        """Continue a logged session: the same log file, its transcript as context (lines it cannot
        read are left out, and counted in ``skipped``).

        Only the last ``turns`` records are read now, backwards from the file's end, so a long log opens
        at once; they are returned, typed. A line that is well formed but does not read as a record
        (a hand-edited setting, say) is counted in ``skipped`` like any damaged line; its prompt and
        answer still go into the context, as the earlier turns' do. The context of the turns before
        them is read in a thread, and the next turn waits for it (``_take_earlier``).
        """
        logged, start = tail_records_from(path, turns, skipped)
        self.log = SessionLog(path.stem, directory=path.parent)
        self.records, self.live, self._sent = _typed(path, logged, skipped), None, None
        # The context is the branch the log ended on, not every turn ever logged (telemetry.log.branches).
        nodes = links(logged)
        branch = on_branch(logged, nodes)
        self.messages = [m for rec in branch for m in _exchange(rec)]
        on_path = {r.get("turn_index") for r in branch}
        self.path = [r for r in on_branch(self.records) if r.turn_index in on_path]
        self._branch_of = None
        self.turn_index = max((r.get("turn_index", -1) for r in logged), default=-1) + 1
        first = branch[0].get("turn_index") if branch else None
        self._earlier, self._read_earlier = _context_reader(path, start, nodes, first) if start > 0 else (None, None)
        return self.records

    def read_earlier(self) -> None:
        """Start reading a resumed session's earlier context, if not begun: the chat calls it once the
        transcript is drawn, so the read (every line of a year's log) does not slow the drawing."""
        start, self._read_earlier = self._read_earlier, None
        if start is not None:
            start()

    async def _take_earlier(self) -> None:
        """Put a resumed session's earlier turns before the context (once, when they have been read)."""
        fut = self._earlier
        if fut is None:
            return
        self.read_earlier()
        try:
            earlier = await asyncio.wrap_future(fut)
        except Exception:  # unreadable meanwhile: the last turns are context enough
            earlier = []
        if self._earlier is fut:  # still the same session (no new chat or other resume meanwhile)
            self._earlier = None
            self.messages = earlier + self.messages


def _typed(path: Path, logged: list[dict[str, Any]], skipped: Skipped | None) -> list[TurnRecord]:
    """The records of those logged lines that read as one; the others are counted in ``skipped``."""
    out: list[TurnRecord] = []
    with bulk_read():
        for d in logged:
            try:
                out.append(TurnRecord.from_dict(d))
            except RecordError:
                continue
    count_bad(path, len(logged) - len(out), skipped)
    return out


def _exchange(rec: dict[str, Any]) -> list[Message]:
    """A logged turn's prompt and answer as context, as ``complete`` folds a turn in (none without an answer)."""
    answer = rec.get("answer")
    return [Message("user", rec.get("prompt") or ""), Message("assistant", answer)] if answer else []


YIELD_EVERY = 32  # lines of the earlier context read between offers of the interpreter to the screen


def _context(path: Path, end: int, later: dict[int, int | None], first: int | None) -> list[Message]:
    """The prompt/answer pairs, in the first ``end`` bytes, of the branch that leads to turn ``first``
    (the oldest of the later turns read already, whose links are ``later``), read line by line."""
    exchanges: dict[int, dict[str, Any]] = {}
    pos = 0
    with path.open("rb") as f:
        for n, raw in enumerate(f):
            pos += len(raw)
            if pos > end:
                break
            if n % YIELD_EVERY == 0:
                time.sleep(0)  # the interpreter offered to the screen: a year's read never stalls the drawing
            rec = parse_line(raw)
            if rec and isinstance(rec.get("turn_index"), int):
                exchanges[rec["turn_index"]] = {k: rec.get(k) for k in ("turn_index", "branch_of", "prompt", "answer")}
    if first is None:
        return [m for rec in exchanges.values() for m in _exchange(rec)]
    nodes = {**links(exchanges.values()), **later}
    return [m for i in lineage(nodes, first) if i in exchanges and i not in later for m in _exchange(exchanges[i])]


def _context_reader(
    path: Path, end: int, later: dict[int, int | None], first: int | None
) -> tuple[concurrent.futures.Future[list[Message]], Callable[[], None]]:
    """The earlier context's future, and the function that starts its read in a thread."""
    fut: concurrent.futures.Future[list[Message]] = concurrent.futures.Future()

    def work() -> None:
        try:
            with bulk_read():
                fut.set_result(_context(path, end, later, first))
        except BaseException as exc:  # the future carries it to the turn that waits
            fut.set_exception(exc)

    return fut, threading.Thread(target=work, name="ttft-resume-context", daemon=True).start
