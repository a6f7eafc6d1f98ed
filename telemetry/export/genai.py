"""One turn record as OpenTelemetry GenAI spans and metric points: the one mapping both exports share.

The live push (:mod:`backends.otel.push`, through the SDK) and the file export
(:mod:`telemetry.export.otlp_json`, OTLP/JSON) both draw a turn from here, so a collector gets the
same names, values and times from either. Pure data in, pure data out: no SDK, no I/O.

This module holds which conventions the mapping follows and the switches a user sets (the 1.44.0 names
beside the current ones, message content on spans); the mapping itself is in its siblings, one idea each:
:mod:`~telemetry.export.genai_values` (reading the record's untrusted values and times),
:mod:`~telemetry.export.genai_instruments` (the metric instruments), :mod:`~telemetry.export.genai_attrs`
(attributes), :mod:`~telemetry.export.genai_spans` (the span tree) and :mod:`~telemetry.export.genai_points`
(metric points).

It reads a typed :class:`~telemetry.record.TurnRecord` (a log line goes through
``TurnRecord.from_dict`` at the edge, which names a field of the wrong type). Its text is still
untrusted: control characters in labels are replaced, non-finite numbers left out.

Conventions followed: the GenAI semantic conventions :data:`GENAI_SEMCONV_VERSION` (the
``semantic-conventions-genai`` repository's first release), over the general conventions
:data:`SEMCONV_VERSION` they build on (written as ``schema_url``). In particular:

- the client span ``chat {model}`` (kind CLIENT; the conventions' ``gen_ai.client.inference`` span
  type) runs from the first send to the end of the stream, with ``gen_ai.usage.*`` token counts and
  ``gen_ai.response.time_to_first_chunk`` as *span* attributes (they would make one metric series
  per turn);
- the client histograms ``gen_ai.client.inference.{duration,time_to_first_chunk,
  time_per_output_chunk}`` hold the client's own measurements only; ``gen_ai.server.*`` (the model
  server's own figures) is never filled with them;
- ``time_to_first_chunk`` and ``time_per_output_chunk`` exist for streamed turns only, the
  latter once per chunk after the first (the gap since the previous chunk);
- token usage is the ``gen_ai.client.inference.usage.{input,output,cache_read.input,
  cache_write.input,reasoning.output}_tokens`` counters (with ``gen_ai.token.modality``) and the
  per-operation ``gen_ai.client.inference.operation.{input,output}_tokens`` histograms, from the
  server's usage only (an estimate is no usage to bill);
- a tool-using turn (its record's ``steps``) is an agent invocation: an ``invoke_agent`` span (INTERNAL,
  the loop is in-process) with a ``chat {model}`` span per model step and an ``execute_tool {name}``
  span per tool call, each at its step's times; each model step is an inference of its own in the
  client histograms, each tool call a point of ``gen_ai.execute_tool.duration`` and the turn one of
  ``gen_ai.invoke_agent.duration``. A turn without steps maps exactly as before;
- the names of semantic conventions 1.44.0 (``gen_ai.client.operation.*`` and the
  ``gen_ai.client.token.usage`` histogram) are emitted too, beside the new ones, when
  ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai/dup`` (the ``/dup`` of OpenTelemetry's stability
  migrations): a dashboard built on them keeps working while it moves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SEMCONV_VERSION = "1.44.0"
GENAI_SEMCONV_VERSION = "0.1.0"  # open-telemetry/semantic-conventions-genai
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
DUP = "gen_ai/dup"  # in OPT_IN_ENV: the 1.44.0 names too, beside the current ones
SCOPE = "ttft"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def legacy_names(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the 1.44.0 names go out too: ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai/dup``."""
    return DUP in {v.strip().lower() for v in env.get(OPT_IN_ENV, "").split(",")}


def capture_content(env: Mapping[str, str] = os.environ) -> bool:
    """Prompt and answer text go on spans only when the user asked for it, as the conventions say."""
    return env.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"
