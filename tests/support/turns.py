"""Hand-made event sequences with known timestamps, shared by the telemetry tests."""

from __future__ import annotations

from ttft.telemetry import events as ev
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.recorder import TurnRecorder
from ttft.telemetry.settings import TurnSettings

MS = 1_000_000
T0 = 5_000 * MS  # an arbitrary monotonic origin: nothing may assume it is zero


def recorder(prompt: str = "hi", **kw: object) -> TurnRecorder:
    return TurnRecorder(
        session_id="test",
        turn_index=0,
        provider="openai",
        api="chat.completions",
        model="m",
        base_url="http://127.0.0.1:1/v1",
        settings=TurnSettings(),
        prompt=prompt,
        input_chars=len(prompt),
        **kw,  # type: ignore[arg-type]
    )


def at(ms: float) -> int:
    return T0 + int(ms * MS)


def play(events: list[ev.Event], rec: TurnRecorder | None = None) -> dict:
    r = rec or recorder()
    for e in events:
        r.feed(e)
    return reads_back(r.finish().to_dict())


def reads_back(d: dict) -> dict:
    """``d``, once it is checked to read back as itself: every record the telemetry and backend
    tests produce goes through here, so the log's dicts are typed records."""
    back = TurnRecord.from_dict(d).to_dict()
    lost = sorted(k for k in d.keys() | back.keys() if back.get(k) != d.get(k))
    assert not lost, f"TurnRecord.from_dict does not read back {lost}: a new field needs reading there too"
    return d


def stream(
    *,
    first_ms: float = 200.0,
    gap_ms: float = 10.0,
    reasoning: int = 0,
    visible: int = 10,
    tokens_per_chunk: int = 1,
    usage: bool = True,
    hidden_reasoning_tokens: int = 0,
) -> list[ev.Event]:
    """A clean turn: sent at 0, headers at first_ms/2, reasoning chunks then visible chunks."""
    out: list[ev.Event] = [ev.AttemptSent(at(0), 1), ev.HeadersReceived(at(first_ms / 2), 1, 200)]
    t = first_ms
    for _ in range(reasoning):
        out.append(ev.ReasoningDelta(at(t), "r" * 4 * tokens_per_chunk, tokens_per_chunk))
        t += gap_ms
    for _ in range(visible):
        out.append(ev.TextDelta(at(t), "w" * 4 * tokens_per_chunk, tokens_per_chunk))
        t += gap_ms
    last = t - gap_ms
    if usage:
        n_out = (reasoning + visible) * tokens_per_chunk + hidden_reasoning_tokens
        out.append(
            ev.Usage(at(last), input=12, cached_input=4, output=n_out, reasoning=reasoning + hidden_reasoning_tokens)
        )
    out.append(ev.Finished(at(last + 1), "stop"))
    return out
