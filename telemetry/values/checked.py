"""A value a person gives, checked once, in the words every front end says.

The command line's ``type=`` functions (``tui.commands.flags``) and the Python API (``backends.api``) read
the same settings: a count of tokens, a number of seconds, a temperature, an effort. Both check them here,
so ``ttft ask --temperature hot`` and ``ttft.run_turn(..., temperature="hot")`` are refused with the same
sentence, before anything is sent. A value may come as text (a flag) or as a Python number (the API); a
``bool`` is never a number here (``True`` is no count of tokens), and NaN or an infinity never passes (it
would reach a request body as invalid JSON).

Each check returns the value in its type or raises :class:`BadValue` with a sentence that does not name
the setting: argparse puts ``argument --temperature:`` before it, :func:`settings` the field's name.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any, TypedDict

from ..errors import TtftError
from ..log.quote import cut, quoted
from ..settings import TurnSettings

# Reasoning effort as the APIs take it (each model accepts a subset: the server says which).
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
SUMMARIES = ("auto", "concise", "detailed")
THINKING_DISPLAYS = ("summarized", "omitted")
ADAPTIVE = "adaptive"  # Anthropic's adaptive thinking, where a budget of tokens would go


class SettingsKw(TypedDict, total=False):
    """TurnSettings' fields as keyword arguments (``**settings: Unpack[SettingsKw]``): what ``help()`` and a
    type checker show of a call that takes a turn's settings."""

    stream: bool
    max_output_tokens: int | None
    temperature: float | None
    reasoning_effort: str | None  # one of EFFORTS
    reasoning_summary: str | None  # one of SUMMARIES
    thinking_budget: int | str | None  # tokens, or "adaptive"
    thinking_display: str | None  # one of THINKING_DISPLAYS
    speculative: dict[str, Any] | None
    max_retries: int
    deadline_s: float | None
    extra: dict[str, Any]


class BadValue(TtftError, ValueError):
    """A value that cannot be used as given; the message says what was expected and what came."""


def _shown(value: object) -> str:
    return quoted(value) if isinstance(value, str) else cut(repr(value))


def number(value: object, kind: type[int] | type[float] = float) -> int | float:
    """``value`` as a finite ``kind``: text is parsed, an int or float taken (a float with a fraction is
    no whole number), anything else refused."""
    what = "a whole number" if kind is int else "a number"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise BadValue(f"expected {what}, got {_shown(value)}")
    try:
        n = kind(value)
    except (ValueError, OverflowError):
        raise BadValue(f"expected {what}, got {_shown(value)}") from None
    if isinstance(value, float) and kind is int and value != n:
        raise BadValue(f"expected {what}, got {_shown(value)}")
    if isinstance(n, float) and not math.isfinite(n):
        raise BadValue(f"expected a finite number, got {_shown(value)}")
    return n


def positive_int(value: object) -> int:
    """A count that must be at least 1 (0 or less is a request no server can answer)."""
    n = int(number(value, int))
    if n < 1:
        raise BadValue(f"must be at least 1, got {cut(str(n))}")
    return n


def non_negative_int(value: object) -> int:
    """A count where 0 means none (retries)."""
    n = int(number(value, int))
    if n < 0:
        raise BadValue(f"must be 0 or more, got {cut(str(n))}")
    return n


def seconds(value: object) -> float:
    """A wait in seconds: above 0 (0 would mean the default, a negative one nothing sensible)."""
    s = float(number(value, float))
    if s <= 0:
        raise BadValue(f"must be a number of seconds above 0, got {_shown(value)}")
    return s


def temperature(value: object) -> float:
    """Finite and not negative (each API caps it itself: 2 for OpenAI, 1 for Anthropic)."""
    t = float(number(value, float))
    if t < 0:
        raise BadValue(f"must be 0 or more, got {_shown(value)}")
    return t


def choice(value: object, choices: Collection[str]) -> str:
    """One of ``choices``, as text."""
    if not isinstance(value, str) or value not in choices:
        raise BadValue(f"expected one of {', '.join(choices)}, got {_shown(value)}")
    return value


def thinking_budget(value: object) -> int | str:
    """A number of tokens (at least 1) or ``adaptive``."""
    if isinstance(value, str) and value.strip().lower() == ADAPTIVE:
        return ADAPTIVE
    try:
        return positive_int(value)
    except BadValue:
        raise BadValue(f"takes a number of tokens (at least 1) or 'adaptive', not {_shown(value)}") from None


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise BadValue(f"expected True or False, got {_shown(value)}")
    return value


def _mapping(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise BadValue(f"expected a dict, got {_shown(value)}")
    return dict(value)


def _or_none(check: Any) -> Any:
    return lambda v: None if v is None else check(v)


# Each TurnSettings field's check, as the flag that sets it checks it.
_CHECKS: dict[str, Any] = {
    "stream": _flag,
    "max_output_tokens": _or_none(positive_int),
    "temperature": _or_none(temperature),
    "reasoning_effort": _or_none(lambda v: choice(v, EFFORTS)),
    "reasoning_summary": _or_none(lambda v: choice(v, SUMMARIES)),
    "thinking_budget": _or_none(thinking_budget),
    "thinking_display": _or_none(lambda v: choice(v, THINKING_DISPLAYS)),
    "speculative": _or_none(_mapping),
    "max_retries": non_negative_int,
    "deadline_s": _or_none(seconds),
    "extra": _mapping,
}


def settings(**values: Any) -> TurnSettings:
    """TurnSettings from keyword arguments, each checked as its flag is: TypeError naming a keyword that is
    no setting, :class:`BadValue` naming the setting whose value is refused. ``thinking_budget="adaptive"``
    asks for adaptive thinking, as ``--thinking-budget adaptive`` does."""
    unknown = set(values) - set(_CHECKS)
    if unknown:
        raise TypeError(f"unknown turn settings {sorted(unknown)}; the settings are {sorted(_CHECKS)}")
    checked: dict[str, Any] = {}
    for name, value in values.items():
        try:
            checked[name] = _CHECKS[name](value)
        except BadValue as exc:
            raise BadValue(f"{name} {exc}") from None
    if checked.get("thinking_budget") == ADAPTIVE:
        checked["thinking_budget"] = None
        checked["extra"] = {**checked.get("extra", {}), "thinking": ADAPTIVE}
    return TurnSettings(**checked)
