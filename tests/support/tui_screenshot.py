"""Render docs/chat.svg: the chat mid-answer after two finished turns, from scripted events.

    python tests/support/tui_screenshot.py [docs/chat.svg]

Deterministic (fixed stamps, frozen clock), so the picture changes only when the UI does.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ttft.telemetry import events as ev
from ttft.tui.chat.app import ChatApp

from tests.support.tui_support import MS, T0, SequenceBackend, finished, wait_until

ANSWER_1 = """Time to first token is the wait before **anything** streams back:
queueing, prefill of the whole prompt, and the network.

```python
import time
t0 = time.monotonic()
first = next(stream)          # blocks until the first chunk
print(f"TTFT {time.monotonic() - t0:.3f} s")
```
"""
REASONING_2 = "The user asks why decode is slower per token than prefill. Prefill is parallel over the prompt; "
ANSWER_SDK = """With the OpenAI SDK, stream and stamp the first chunk that carries text:

```python
stream = client.chat.completions.create(model=model, messages=msgs, stream=True)
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        print("first token after", time.monotonic() - t0)
        break
```
"""
ANSWER_2 = (
    "Decode makes **one token per step**, and every step re-reads the whole KV cache, "
    "so it is bound by memory bandwidth rather than compute. Prefill processes the prompt "
    "in parallel and is compute-bound: that is why a long prompt delays the first token, "
    "while a long answer slows everything after it."
)


def words(text: str) -> list[str]:
    out, cur = [], ""
    for ch in text:
        cur += ch
        if ch in " \n":
            out.append(cur)
            cur = ""
    return [*out, cur] if cur else out


def turn(first_ms: float, token_ms: float, answer: str, reasoning: str = "", jitter: int = 0) -> list[ev.Event]:
    t = T0 + int(first_ms * MS)
    events: list[ev.Event] = [ev.AttemptSent(T0, 1), ev.HeadersReceived(T0 + int(first_ms * 0.6 * MS), 1, 200)]
    for i, w in enumerate(words(reasoning)):
        events.append(ev.ReasoningDelta(t, w, 1))
        t += int((token_ms + (i * 7 % 5) * jitter) * MS)
    for i, w in enumerate(words(answer)):
        events.append(ev.TextDelta(t, w, 1))
        t += int((token_ms + (i * 7 % 5) * jitter) * MS)
    return events


async def main(out: Path) -> None:
    os.environ["TTFT_DATA_DIR"] = tempfile.mkdtemp(prefix="ttft-shot-")
    retry = [ev.AttemptSent(T0, 1), ev.HeadersReceived(T0 + 120 * MS, 1, 429, 1.0)]
    second = turn(1420, 22, ANSWER_SDK, jitter=3)
    second = [*retry, ev.AttemptSent(T0 + 1120 * MS, 2), *second[1:]]
    live = turn(380, 21, ANSWER_2[:170], REASONING_2 * 2, jitter=4)
    n_live = sum(isinstance(e, ev.ReasoningDelta | ev.TextDelta) for e in live)
    now_ms = (max(e.t_ns for e in live) - T0) / MS + 12
    turns = [finished(turn(310, 18, ANSWER_1, jitter=2), input_tokens=38), finished(second, input_tokens=214), live]

    class Backend(SequenceBackend):
        provider = "demo"

        async def stream(self, request):  # the last turn is released as the clock passes its stamps, then stays open
            live_turn = self.n == len(self.turns) - 1
            async for e in super().stream(request):
                while live_turn and clock[0] < e.t_ns:
                    await asyncio.sleep(0.001)
                yield e
            if live_turn:
                await asyncio.Event().wait()

    clock = [T0]
    app = ChatApp(
        "demo:scripted-model",
        factory=lambda spec, url: Backend(turns, model="scripted-model"),
        session_id="20260101-090000-a1b2",
        clock=lambda: clock[0],
        fps=1e-4,
    )
    app.chat.session.settings = app.chat.session.settings.with_(reasoning_effort="low", max_output_tokens=800)
    async with app.run_test(size=(160, 48)) as pilot:
        app.query_one("#prompt").cursor_blink = False
        prompts = ["What is TTFT? Show me how to time it.", "And in Python, with the SDK?", "Why is decode slower?"]
        for i, prompt in enumerate(prompts):
            app.query_one("#prompt").value = prompt
            await pilot.press("enter")
            if i < 2:
                await wait_until(pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy)
        # Replay the turn's frames: the clock steps 33 ms at a time, as the frame timer would, and the
        # backend releases each event once the clock has passed its stamp.
        stamps = sorted(e.t_ns for e in live if isinstance(e, ev.ReasoningDelta | ev.TextDelta))
        frame_ms = 0.0
        while frame_ms < now_ms:
            frame_ms = min(now_ms, frame_ms + 33)
            clock[0] = T0 + int(frame_ms * MS)
            due = sum(1 for t in stamps if t <= clock[0])
            await wait_until(pilot, lambda d=due: app.chat.live is not None and len(app.chat.live.recorder.chunks) >= d)
            app.chat.frame()
            await pilot.pause(0.02)
        await wait_until(pilot, lambda: len(app.chat.live.recorder.chunks) == n_live)
        app.chat.frame(force=True)
        await pilot.pause(0.2)
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(out.name, str(out.parent))
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/chat.svg")))
