"""One conversation with one backend: messages, settings, the session log, past records.

No widgets here, so the chat and each compare pane can hold one each.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backends.base import Backend, ChatRequest, Message, build_request
from backends.turn import new_recorder, warm_up
from telemetry import events as ev
from telemetry.log.turns import SessionLog, Skipped, parse_line, tail_records_from
from telemetry.settings import TurnSettings
from tui.runner import LiveTurn, LoopThread, start_turn

BackendFactory = Callable[[str, str | None], Backend]
RESUME_TURNS = 200  # the last turns a resume reads up front (history, timelines); the rest is read lazily


def default_backend_factory(spec: str, base_url: str | None, *, timeout_s: float | None = None) -> Backend:
    """The backend in its own process (timestamps independent of painting); TTFT_IN_PROCESS=1 keeps it here.
    Either way a compat server's turns record its own queue and KV use (``server_gauges``) for the pane.

    ``timeout_s``: the token idle timeout (``--timeout``); None is the provider's own."""
    if os.environ.get("TTFT_IN_PROCESS") == "1":
        from backends.providers.registry import create_backend  # imported late: the SDKs are slow to import

        return create_backend(spec, base_url=base_url, timeout_s=timeout_s, server_gauges=True)
    from tui.isolated import BackendStartError, ProcessBackend

    try:
        return ProcessBackend(spec, base_url, timeout_s=timeout_s)
    except BackendStartError:
        raise  # the spec, key or config is wrong: say so
    except (OSError, RuntimeError):  # no child process here (sandbox, frozen build): stamp in this process
        from backends.providers.registry import create_backend

        return create_backend(spec, base_url=base_url, timeout_s=timeout_s, server_gauges=True)


def default_model_spec() -> str:
    try:
        from backends.providers.registry import default_spec
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
        self.records: list[dict[str, Any]] = []
        self.turn_index = 0
        self.live: LiveTurn | None = None
        # The backend being created (on the stream loop): the start-up warm-up and the first turn share it.
        self._creating: concurrent.futures.Future[Backend] | None = None
        self._warming: asyncio.Future[None] | None = None  # the warm-up of the current backend
        # A resumed session's earlier turns as context, read in a thread (see resume); the first turn waits for it.
        self._earlier: concurrent.futures.Future[list[Message]] | None = None

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
            await warm_up(backend)

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
    def build_request(self, prompt: str) -> ChatRequest:
        return build_request(prompt, system=self.system_prompt, history=self.messages, settings=self.settings)

    async def start(self, prompt: str, *, submitted_ns: int | None = None) -> LiveTurn:
        """Start a turn. ``submitted_ns``: when the user asked (Enter), on the events' clock; ttft's own
        delay (``own_delay_ms``) runs from there to the first send."""
        submitted_ns = ev.now_ns() if submitted_ns is None else submitted_ns
        backend = await self.ensure_backend()
        await self._take_earlier()
        request = self.build_request(prompt)
        recorder = new_recorder(
            backend, request, session_id=self.log.session_id, turn_index=self.turn_index, extra=self.extra
        )
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
        self.live = start_turn(self.runner, backend, request, recorder, self.log)
        return self.live

    def complete(self, record: dict[str, Any]) -> None:
        """Fold a finished turn into the conversation. A turn with no answer text leaves the context unchanged."""
        self.records.append(record)
        self.live = None
        index = record.get("turn_index")
        if isinstance(index, int):  # the log may have moved it past another writer's turn
            self.turn_index = max(self.turn_index, index + 1)
        if record.get("answer"):
            self.messages += [Message("user", record.get("prompt") or ""), Message("assistant", record["answer"])]

    def pop_last_exchange(self) -> str | None:
        """For regenerate: the last prompt, with its answer removed from the context."""
        if not self.records:
            return None
        last = self.records[-1]
        if last.get("answer") and len(self.messages) >= 2 and self.messages[-1].role == "assistant":
            self.messages = self.messages[:-2]
        return last.get("prompt")

    def new_chat(self) -> None:
        self.messages, self.records, self.turn_index, self.live = [], [], 0, None
        self._earlier = None
        self.log = SessionLog()

    def resume(self, path: Path, skipped: Skipped | None = None, *, turns: int = RESUME_TURNS) -> list[dict[str, Any]]:
        """Continue a logged session: the same log file, its transcript as context (lines it cannot
        read are left out, and counted in ``skipped``).

        Only the last ``turns`` records are read now, backwards from the file's end, so a long log opens
        at once; they are returned. The context of the turns before them is read in a thread, and the
        next turn waits for it (``_take_earlier``).
        """
        records, start = tail_records_from(path, turns, skipped)
        self.log = SessionLog(path.stem, directory=path.parent)
        self.messages, self.records, self.live = [], [], None
        for rec in records:
            self.complete(rec)
        self.turn_index = max((r.get("turn_index", -1) for r in records), default=-1) + 1
        self._earlier = _read_context_in_thread(path, start) if start > 0 else None
        return records

    async def _take_earlier(self) -> None:
        """Put a resumed session's earlier turns before the context (once, when they have been read)."""
        fut = self._earlier
        if fut is None:
            return
        try:
            earlier = await asyncio.wrap_future(fut)
        except Exception:  # unreadable meanwhile: the last turns are context enough
            earlier = []
        if self._earlier is fut:  # still the same session (no new chat or other resume meanwhile)
            self._earlier = None
            self.messages = earlier + self.messages


def _context(path: Path, end: int) -> list[Message]:
    """The prompt/answer pairs of the records in the first ``end`` bytes, read line by line."""
    out: list[Message] = []
    pos = 0
    with path.open("rb") as f:
        for raw in f:
            pos += len(raw)
            if pos > end:
                break
            rec = parse_line(raw)
            if rec and rec.get("answer"):  # as complete() folds a turn in
                out += [Message("user", rec.get("prompt") or ""), Message("assistant", rec["answer"])]
    return out


def _read_context_in_thread(path: Path, end: int) -> concurrent.futures.Future[list[Message]]:
    fut: concurrent.futures.Future[list[Message]] = concurrent.futures.Future()

    def work() -> None:
        try:
            fut.set_result(_context(path, end))
        except BaseException as exc:  # the future carries it to the turn that waits
            fut.set_exception(exc)

    threading.Thread(target=work, name="ttft-resume-context", daemon=True).start()
    return fut
