"""TEST FIXTURE: a loopback OpenAI-compatible server that simulates continuous batching.

It is not a model. It answers ``POST .../chat/completions`` (streaming, Chat Completions
wire format with a usage chunk) on a schedule whose decode slows as more streams run
at once, which is the trade-off ``ttft bench`` has to measure:

- at most ``slots`` requests are served at once; the rest wait in a FIFO queue
  (their wait shows up in TTFT, as in llama-server with more users than ``-np``);
- once admitted, a request's first token comes after ``prefill_ms`` (+ ``prefill_ms_per_token``
  per prompt word);
- every following token comes ``token_ms * (1 + alpha * (active - 1))`` later, where
  ``active`` is the number of admitted streams at that moment (sleeps target absolute
  times, so there is no drift).

So with ``c <= slots`` steady concurrent users the simulated truth is
``TPOT = token_ms * (1 + alpha * (c - 1))``, ``TTFT = prefill_ms`` (+ loopback noise), and
aggregate output throughput ``c * N / (prefill + (N - 1) * TPOT)`` tokens/s for N-token answers;
``expected(c, n)`` computes it. Each token is one word (``"w12 "``), so word counts equal token
counts; usage reports prompt words as ``prompt_tokens``. With ``timings=True`` the last chunk
carries llama-server style ``timings``. With ``unique_answers=True`` every answer's words name
their request (``a7.00 a7.01 ...`` for the 8th request), so a test can tell which answer a later
turn carries. ``log`` keeps, per request, when it arrived (``time.monotonic()``), its messages,
its ``max_tokens``, its ``ignore_eos`` (None when not sent) and the answer sent.

Use in-process (``with BatchingServer(...) as srv: srv.base_url``) or as a separate process:
``python -m tests.fakes.batching_server --port 8123 --slots 4 --token-ms 10 --alpha 0.3``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from ttft.backends.local.llama_server import free_port as free_port  # for callers that start this fake as a process

from tests.fakes.loop_thread import LoopThreadServer


@dataclass(frozen=True)
class Expected:
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    output_throughput: float  # tokens/s across all users, steady state
    per_user_tps: float


class BatchingServer(LoopThreadServer):
    thread_name = "batching-fake"
    backlog = 1024  # the bench opens hundreds of streams at once

    def __init__(
        self,
        *,
        slots: int = 8,
        token_ms: float = 10.0,
        alpha: float = 0.25,
        prefill_ms: float = 20.0,
        prefill_ms_per_token: float = 0.0,
        default_tokens: int = 32,
        timings: bool = False,
        unique_answers: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(host=host, port=port)
        self.slots = slots
        self.token_ms = token_ms
        self.alpha = alpha
        self.prefill_ms = prefill_ms
        self.prefill_ms_per_token = prefill_ms_per_token
        self.default_tokens = default_tokens
        self.timings = timings
        self.unique_answers = unique_answers
        self.log: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self.served = 0
        self.prompts: list[str] = []
        self._sem: asyncio.Semaphore | None = None

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def step_ms(self, active: int) -> float:
        return self.token_ms * (1 + self.alpha * (max(active, 1) - 1))

    def expected(self, concurrency: int, tokens: int) -> Expected:
        """Steady-state truth for ``concurrency`` closed-loop users asking ``tokens`` each (c <= slots)."""
        c = min(concurrency, self.slots)
        tpot = self.step_ms(c)
        e2e = self.prefill_ms + (tokens - 1) * tpot
        return Expected(self.prefill_ms, tpot, e2e, c * tokens / (e2e / 1000), 1000 / tpot)

    # --- HTTP ---------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        return app

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "batching-fake", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        arrived = time.monotonic()
        n = int(body.get("max_completion_tokens") or body.get("max_tokens") or self.default_tokens)
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
        self.prompts.append(prompt)
        n_prompt = len(prompt.split())
        model = body.get("model", "batching-fake")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        cid = "chatcmpl-" + uuid.uuid4().hex[:12]
        serial = len(self.log)
        words = [f"a{serial}.{i:02d} " if self.unique_answers else f"w{i:02d} " for i in range(n)]
        self.log.append(
            {
                "arrived": arrived,
                "messages": body.get("messages", []),
                "max_tokens": body.get("max_tokens"),
                "ignore_eos": body.get("ignore_eos"),  # vLLM's and llama-server's switch, when sent
                "answer": "".join(words),
            }
        )

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
            obj: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        assert self._sem is not None
        async with self._sem:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                await resp.write(chunk({"role": "assistant", "content": ""}))
                loop = asyncio.get_running_loop()
                start = loop.time()
                target = start + (self.prefill_ms + self.prefill_ms_per_token * n_prompt) / 1000
                first = None
                sent: list[float] = []  # when each token left (loop time: time.monotonic)
                for i in range(n):
                    if i:
                        target += self.step_ms(self.active) / 1000
                    delay = target - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    await resp.write(chunk({"content": words[i]}))
                    sent.append(loop.time())
                    if first is None:
                        first = loop.time()
                end = loop.time()
                self.finished(arrived, start, sent)
                await resp.write(chunk({}, "length"))
                extra: dict[str, Any] = {}
                if include_usage:
                    extra["usage"] = {
                        "prompt_tokens": n_prompt,
                        "completion_tokens": n,
                        "total_tokens": n_prompt + n,
                    }
                if self.timings:
                    extra["timings"] = {
                        "cache_n": 0,
                        "prompt_n": n_prompt,
                        "prompt_ms": ((first or end) - start) * 1000,
                        "predicted_n": n,
                        "predicted_ms": (end - (first or end)) * 1000,
                        "queue_ms": (start - arrived) * 1000,
                    }
                if extra:
                    await resp.write(chunk(None, **extra))
                await resp.write(b"data: [DONE]\n\n")
                self.served += 1
            except (ConnectionResetError, asyncio.CancelledError):
                pass
            finally:
                self.active -= 1
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp

    def finished(self, arrived: float, admitted: float, sent: list[float]) -> None:
        """A request's answer is out: when it arrived, got a slot, and sent each token (``time.monotonic``).
        Nothing here; a subclass keeps the server's own histograms from it."""

    async def setup(self) -> None:
        self._sem = asyncio.Semaphore(self.slots)  # bound to the server's loop


def wait_http(url: str, timeout: float = 20) -> None:
    """Block until ``url`` answers (a server started in another process is ready)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def main() -> None:
    p = argparse.ArgumentParser(description="TEST FIXTURE: simulated batching OpenAI-compatible server")
    p.add_argument("--port", type=int, default=8123)
    p.add_argument("--slots", type=int, default=8)
    p.add_argument("--token-ms", type=float, default=10.0)
    p.add_argument("--alpha", type=float, default=0.25)
    p.add_argument("--prefill-ms", type=float, default=20.0)
    p.add_argument("--timings", action="store_true")
    a = p.parse_args()
    srv = BatchingServer(
        slots=a.slots, token_ms=a.token_ms, alpha=a.alpha, prefill_ms=a.prefill_ms, timings=a.timings, port=a.port
    )

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(srv.serve_forever(lambda: print(f"batching fake on {srv.base_url}", flush=True)))


if __name__ == "__main__":
    main()
