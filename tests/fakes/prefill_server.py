"""TEST FIXTURE: a loopback Chat Completions server whose latency has a known cost per token.

It is not a model. It answers ``POST .../chat/completions`` (streaming, with a usage
chunk when asked) on a schedule that is the truth ``ttft probe`` has to recover:

- every whitespace-separated word of the messages is one input token;
- a prefix cache in blocks of ``block`` tokens (as vLLM's and SGLang's): a prompt's
  leading blocks that an earlier prompt had are served from cache, reported as
  ``usage.prompt_tokens_details.cached_tokens``, and cost nothing to prefill;
- the first token comes ``base_ms + prefill_ms_per_token * (input - cached)`` after
  the request arrived (sleeps target absolute times, so the server's own work and
  the event loop's jitter are inside the schedule, not added to it);
- each further token comes ``token_ms`` after the previous one, and exactly
  ``max_completion_tokens`` (or ``max_tokens``) tokens are sent.

So TTFT = base_ms + prefill_ms_per_token * fresh input (+ loopback noise), TPOT = token_ms,
E2E = TTFT + (N - 1) * token_ms. Headers go out at once, before the prefill.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
import uuid
from typing import Any

from aiohttp import web

from tests.fakes.loop_thread import LoopThreadServer


class PrefillServer(LoopThreadServer):
    thread_name = "prefill-fake"

    def __init__(
        self,
        *,
        base_ms: float = 20.0,
        prefill_ms_per_token: float = 0.02,
        token_ms: float = 2.0,
        block: int = 16,
        default_tokens: int = 16,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(host=host)
        self.base_ms = base_ms
        self.prefill_ms_per_token = prefill_ms_per_token
        self.token_ms = token_ms
        self.block = block
        self.default_tokens = default_tokens
        self.requests: list[dict[str, int]] = []  # per request: input, cached, output tokens
        self._blocks: set[bytes] = set()

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def ttft_ms(self, input_tokens: int, cached: int = 0) -> float:
        """The schedule's TTFT for a prompt (without the loopback's own time)."""
        return self.base_ms + self.prefill_ms_per_token * (input_tokens - cached)

    # --- the prefix cache ---------------------------------------------------------------
    def _cached(self, words: list[str]) -> int:
        """Tokens served from cache; the prompt's own blocks are remembered for the next ones."""
        h = hashlib.sha256()
        hits, missed = 0, False
        for start in range(0, len(words) - len(words) % self.block, self.block):
            h.update("\x00".join(words[start : start + self.block]).encode() + b"\x01")
            key = h.digest()  # a chain: a block's key covers every token before it
            if key in self._blocks and not missed:
                hits += 1
            else:
                missed = True
                self._blocks.add(key)
        return hits * self.block

    # --- HTTP ---------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "prefill-fake", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        body = await request.json()
        words = " ".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict)).split()
        cached = self._cached(words)
        n_out = int(body.get("max_completion_tokens") or body.get("max_tokens") or self.default_tokens)
        self.requests.append({"input": len(words), "cached": cached, "output": n_out})
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        model = str(body.get("model", "prefill-fake"))
        cid = "chatcmpl-" + uuid.uuid4().hex[:12]

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
        try:
            await resp.write(chunk({"role": "assistant", "content": ""}))
            target = arrived + self.ttft_ms(len(words), cached) / 1000
            for i in range(n_out):
                if i:
                    target += self.token_ms / 1000
                delay = target - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await resp.write(chunk({"content": f"t{i} "}))
            await resp.write(chunk({}, "length"))
            if include_usage:
                usage = {
                    "prompt_tokens": len(words),
                    "completion_tokens": n_out,
                    "total_tokens": len(words) + n_out,
                    "prompt_tokens_details": {"cached_tokens": cached},
                }
                await resp.write(chunk(None, usage=usage))
            await resp.write(b"data: [DONE]\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp
