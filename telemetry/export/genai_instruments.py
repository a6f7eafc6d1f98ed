"""The GenAI metric instruments: each one's name, unit, description and advised buckets, and the
1.44.0 names emitted beside the current ones on opt-in (:func:`telemetry.export.genai.legacy_names`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The semantic conventions' advised bucket bounds (s, and tokens).
DURATION_BOUNDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
CHUNK_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
TOKEN_BOUNDS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)


@dataclass(frozen=True, slots=True)
class Instrument:
    """One metric instrument: a histogram (``bounds``: its advised buckets) or a monotonic counter."""

    name: str
    unit: str
    description: str
    bounds: tuple[float, ...] = ()
    kind: Literal["histogram", "counter"] = "histogram"


def _hist(name: str, unit: str, description: str, bounds: tuple[float, ...]) -> Instrument:
    return Instrument(name, unit, description, bounds)


def _counter(name: str, description: str) -> Instrument:
    return Instrument(name, "{token}", description, (), "counter")


_DURATION_DOC = "GenAI inference duration (first send to end of stream)"
_TTFC_DOC = "Time from the first send to the first chunk"
_TPOC_DOC = "Time since the previous chunk, for each chunk after the first"
DURATION = _hist("gen_ai.client.inference.duration", "s", _DURATION_DOC, DURATION_BOUNDS)
TIME_TO_FIRST_CHUNK = _hist("gen_ai.client.inference.time_to_first_chunk", "s", _TTFC_DOC, DURATION_BOUNDS)
TIME_PER_OUTPUT_CHUNK = _hist("gen_ai.client.inference.time_per_output_chunk", "s", _TPOC_DOC, CHUNK_BOUNDS)
OPERATION_INPUT = _hist(
    "gen_ai.client.inference.operation.input_tokens", "{token}", "Input tokens per inference", TOKEN_BOUNDS
)
OPERATION_OUTPUT = _hist(
    "gen_ai.client.inference.operation.output_tokens", "{token}", "Output tokens per inference", TOKEN_BOUNDS
)
USAGE_INPUT = _counter("gen_ai.client.inference.usage.input_tokens", "Input tokens used, cached ones included")
USAGE_OUTPUT = _counter("gen_ai.client.inference.usage.output_tokens", "Output tokens used, reasoning included")
USAGE_CACHE_READ = _counter(
    "gen_ai.client.inference.usage.cache_read.input_tokens", "Input tokens served from the provider's cache"
)
USAGE_CACHE_WRITE = _counter(
    "gen_ai.client.inference.usage.cache_write.input_tokens", "Input tokens written to the provider's cache"
)
USAGE_REASONING = _counter("gen_ai.client.inference.usage.reasoning.output_tokens", "Output tokens used for reasoning")
# A tool-using turn (its record's ``steps``): each tool call, and the whole turn as one agent invocation.
AGENT_DURATION_BOUNDS = (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6)
EXECUTE_TOOL_DURATION = _hist(
    "gen_ai.execute_tool.duration", "s", "The duration of a single tool execution", DURATION_BOUNDS
)
INVOKE_AGENT_DURATION = _hist(
    "gen_ai.invoke_agent.duration", "s", "A tool-using turn, from its first send to its end", AGENT_DURATION_BOUNDS
)
# Semantic conventions 1.44.0's names, emitted beside the current ones with OPT_IN_ENV=gen_ai/dup.
OLD_DURATION = _hist("gen_ai.client.operation.duration", "s", _DURATION_DOC, DURATION_BOUNDS)
OLD_TIME_TO_FIRST_CHUNK = _hist("gen_ai.client.operation.time_to_first_chunk", "s", _TTFC_DOC, DURATION_BOUNDS)
OLD_TIME_PER_OUTPUT_CHUNK = _hist("gen_ai.client.operation.time_per_output_chunk", "s", _TPOC_DOC, CHUNK_BOUNDS)
OLD_TOKEN_USAGE = _hist("gen_ai.client.token.usage", "{token}", "Tokens used per operation", TOKEN_BOUNDS)
CURRENT = (
    DURATION,
    TIME_TO_FIRST_CHUNK,
    TIME_PER_OUTPUT_CHUNK,
    OPERATION_INPUT,
    OPERATION_OUTPUT,
    USAGE_INPUT,
    USAGE_OUTPUT,
    USAGE_CACHE_READ,
    USAGE_CACHE_WRITE,
    USAGE_REASONING,
    EXECUTE_TOOL_DURATION,
    INVOKE_AGENT_DURATION,
)
LEGACY = (OLD_DURATION, OLD_TIME_TO_FIRST_CHUNK, OLD_TIME_PER_OUTPUT_CHUNK, OLD_TOKEN_USAGE)
INSTRUMENTS = (*CURRENT, *LEGACY)
RENAMED = {
    DURATION.name: OLD_DURATION,
    TIME_TO_FIRST_CHUNK.name: OLD_TIME_TO_FIRST_CHUNK,
    TIME_PER_OUTPUT_CHUNK.name: OLD_TIME_PER_OUTPUT_CHUNK,
}
