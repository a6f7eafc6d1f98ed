"""argparse ``type=`` functions shared by the commands: a bad value is refused at the edge with a
message that says what was wrong, never sent to a server or silently replaced by a default."""

from __future__ import annotations

import argparse
import math


def model_spec(value: str) -> str:
    """``-m PROVIDER[:MODEL]``: ``''`` and ``openai:`` would otherwise mean the default model."""
    from backends.providers.registry import ProviderError, parse_spec  # late: `ttft --help` imports every command

    try:
        parse_spec(value)
    except ProviderError as exc:
        raise argparse.ArgumentTypeError(f"{exc} {exc.hint or ''}".strip()) from None
    return value.strip()


def _number(value: str, kind: type[int] | type[float]) -> int | float:
    try:
        n = kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from None
    if isinstance(n, float) and not math.isfinite(n):  # nan would reach the request body as invalid JSON
        raise argparse.ArgumentTypeError(f"expected a finite number, got {value!r}")
    return n


def positive_int(value: str) -> int:
    """``--max-output-tokens N``: at least 1 (0 or less is a request no server can answer)."""
    n = int(_number(value, int))
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def non_negative_int(value: str) -> int:
    """``--max-retries N``: 0 means no retry."""
    n = int(_number(value, int))
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {n}")
    return n


def gpu_layers(value: str) -> int:
    """``--gpu-layers N``: 0 (the CPU) or more, or -1 for every layer."""
    n = int(_number(value, int))
    if n < -1:
        raise argparse.ArgumentTypeError(f"must be 0 or more, or -1 for every layer, got {n}")
    return n


def seconds(value: str) -> float:
    """``--timeout S``: above 0 (0 would mean the default, a negative one nothing sensible)."""
    s = float(_number(value, float))
    if s <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {value!r}")
    return s


def temperature(value: str) -> float:
    """``--temperature T``: finite and not negative (each API caps it itself: 2 for OpenAI, 1 for Anthropic)."""
    t = float(_number(value, float))
    if t < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value!r}")
    return t


def deadline(value: str) -> float:
    """``--deadline S``: a positive, finite number of seconds for the whole turn."""
    try:
        secs = float(value)
    except ValueError:
        secs = float("nan")
    if not secs > 0 or secs == float("inf"):
        raise argparse.ArgumentTypeError(f"takes a positive number of seconds, not {value!r}")
    return secs
