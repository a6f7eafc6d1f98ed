"""Loopback fake LLM servers that speak the real streaming wire formats, on a schedule.

The real ``openai`` and ``anthropic`` SDKs run against these, so a test exercises the
same parsing, retries and HTTP client a user gets. One server answers every API:

- ``POST .../chat/completions``: OpenAI Chat Completions, SSE ``data:`` lines ending with
  ``data: [DONE]``; a usage-only last chunk when ``stream_options.include_usage``;
  reasoning as ``delta.reasoning_content``, ``delta.reasoning`` or ``<think>`` in content;
  llama-server ``timings`` / Ollama durations on the last chunk (llama-server's on every chunk too
  with ``timings_per_chunk``, its draft counts with ``draft``); non-streaming JSON when
  ``"stream"`` is false.
- ``POST .../responses``: OpenAI Responses, ``event:`` + ``data:`` lines in the real event
  order (created, in_progress, reasoning item with ``reasoning_summary_text.delta``, message
  item with ``output_text.delta``, ``response.completed`` with usage).
- ``POST .../messages``: Anthropic Messages, ``event:`` lines, ``thinking`` (with
  ``signature_delta``), ``redacted_thinking`` and ``text`` blocks, ``display: omitted``
  honoured from the request, usage in ``message_start`` and ``message_delta`` (with
  ``output_tokens_details.thinking_tokens``).
- Responses and Messages also answer non-streamed (``"stream"`` false or absent): the whole
  ``response`` object (reasoning item with its summary, message item with ``output_text``,
  usage) or ``message`` (``thinking`` / ``redacted_thinking`` and ``text`` blocks, usage), sent
  when the schedule's last token is due (``end_ms()``), like non-streamed Chat Completions.
- ``GET .../models``: OpenAI list shape, or Anthropic's when the request has ``anthropic-version``.

The path prefix does not matter (``/v1/chat/completions`` and ``/chat/completions`` both work),
so use ``server.openai_base_url`` (``http://127.0.0.1:PORT/v1``) for OpenAI clients and
``server.url`` (``http://127.0.0.1:PORT``) for Anthropic ones.

API
---
::

    from tests.fakes import FakeServer, Schedule

    with FakeServer(Schedule(first_token_ms=100, token_ms=10, reasoning_tokens=5, visible_tokens=20)) as srv:
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="sk-test")
        ...
        srv.requests[-1].body           # the JSON the SDK sent
        srv.requests[-1].headers        # its headers (lower-case keys)
        srv.requests[-1].query          # its URL's query parameters (the path, .path, has none)
        srv.schedule = Schedule(fail_status=429, fail_times=1, retry_after=0)   # resets attempt counting
        srv.schedules["slow-model"] = Schedule(first_token_ms=500)             # per-model schedule
        srv.wait_for(lambda r: r.disconnected, timeout=2)                      # e.g. after a cancel

``FakeServer`` runs aiohttp on its own event loop in a daemon thread, bound to 127.0.0.1 on a
free port, so it works from sync tests, async tests (any loop) and subprocesses (pass the URL).
``start()`` / ``stop()`` or use it as a context manager. The pytest fixture ``fake_server``
(import it into a test module: ``from tests.fakes import fake_server_fixture  # noqa: F401``) yields a
started server with the default schedule. ``python -m tests.fakes --port 8099`` runs one by hand.

Timing (all from the moment the request body was read; ``asyncio.sleep`` on an absolute
target, so no drift): headers after ``headers_ms``; token-bearing chunk ``j`` (counting all
chunks, reasoning first) at ``first_token_ms + j * tokens_per_chunk * token_ms``. So the
expected TTFT is ``first_token_ms``, TTFVT is ``first_token_ms + ceil(R/c) * c * token_ms``
(``expected_ttfvt_ms()``), and with one token per chunk TPOT is ``token_ms``. A role-only
chunk (Chat Completions) is sent right after the headers: it is not a token. Hidden reasoning
(``reasoning="hidden"``, or Anthropic ``display: omitted``) takes its time but streams nothing.

Every token is four characters (``"r07 "`` reasoning, ``"w07 "`` visible), so the 4-chars-a-token
estimate matches the schedule. Usage reports ``output = reasoning_tokens + visible_tokens``.

Failures (see ``Schedule``): ``fail_status`` for the first ``fail_times`` attempts (provider-shaped
error body, ``retry-after`` when ``retry_after`` is set); after ``*_after`` token chunks:
``error_after`` (mid-stream error event of the API's shape), ``drop_after`` (TCP connection closed
mid-body), ``malformed_after`` (a line of broken JSON), ``stall_after`` (silence for ``stall_s``);
``no_done`` ends the body cleanly without ``[DONE]`` / ``response.completed`` / ``message_stop``;
``reject_stream_options`` answers 400 to a request carrying ``stream_options`` (before any
``fail_status``, which the request sent again without it then meets); ``error_as_200`` answers
every generation request with HTTP 200 and the provider's error object as one JSON document
(``application/json``, not a stream).
Each ``RecordedRequest`` says whether the stream ``completed`` or the client ``disconnected``
(detected within ~10 ms, also while the server is sleeping).

vLLM's per-request metrics (``vllm_metrics``, ``output_token_metrics``, ``spec_decode``): a ``metrics``
object on the usage chunk, in ``response.completed``, at the top of a non-streamed answer, measured on
the fake's own clock (``RecordedRequest.server_metrics`` keeps it); ``metrics_json`` sends any text
there instead (hostile shapes). The scheduler: ``slots`` requests generate at once, a later one waits;
``queue_hold_ms`` holds each in the queue first; timing then counts from scheduling, so a test knows
each request's queue and TTFT.

Scripted content: ``texts`` gives the chunks' text (hostile text on any API's normal shape);
``raw_sse`` is sent verbatim as a streamed body (wire content the schedule cannot make).

Modules: ``schedule`` (Schedule, RecordedRequest), ``stream`` (SSE plumbing and injected failures
shared by every API), ``openai_chat``, ``openai_responses``, ``anthropic_messages`` (one wire format
each) and ``server`` (FakeServer: lifecycle, recording, routing). Other fakes (``batching_server``)
live beside them; the names below stay importable from ``tests.fakes``.
"""

from __future__ import annotations

from collections.abc import Iterator

from tests.fakes.schedule import RecordedRequest, Schedule
from tests.fakes.server import FakeServer, _main
from tests.fakes.stream import Stream

_Stream = Stream  # the name benchmarks patch to stamp each write

__all__ = ["FakeServer", "RecordedRequest", "Schedule", "_main", "fake_server_fixture"]

try:
    import pytest

    @pytest.fixture(name="fake_server")
    def fake_server_fixture() -> Iterator[FakeServer]:
        """A started FakeServer with the default schedule; stopped after the test."""
        with FakeServer() as srv:
            yield srv

except ImportError:  # pragma: no cover - the fakes also run outside pytest
    pass
