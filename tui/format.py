"""Text formatting for figures the telemetry computed (no metric is computed here)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..backends.spec import split_spec
from ..telemetry.duration import DASH
from ..telemetry.steps import step_count

if TYPE_CHECKING:
    from ..telemetry.record import TurnRecord

# One colour per phase, wherever a phase is named (pane, compare status lines).
PHASE_COLOR = {
    "queued": "dim",
    "loading": "blue",
    "waiting": "yellow",
    "reasoning": "magenta",
    "streaming": "green",
    "ok": "green",
    "error": "red",
    "cancelled": "yellow",
}


# --- text from outside, on a terminal ---------------------------------------------------------
# Model output, a server's error text, a log file's fields: none of it may drive the terminal
# (ESC ]0; sets the title, ESC [2J clears the screen, ESC ]52; writes the clipboard, ESC ]8; makes
# links, and the C1 byte 0x9b is a CSI by itself). So every control character but newline and tab
# is shown instead of sent: C0 as its Unicode control picture (ESC as "␛", BEL as "␇", CR as "␍"),
# DEL as "␡", C1 (0x80-0x9f, which have no pictures) as "<0x9b>".
#
# Nor may it reorder what the reader sees. The bidirectional embeddings, overrides and isolates
# (U+202A-U+202E LRE RLE PDF LRO RLO, U+2066-U+2069 LRI RLI FSI PDI) open a span that a terminal
# with bidi support lays out right to left, or in any order, until its terminator or the end of the
# line: "Trojan Source" (CVE-2021-42574) hides code or a command that way. They are shown as
# "<U+202E>". The marks (U+200E LRM, U+200F RLM, U+061C ALM) stay as they are: each is one
# invisible strong character with no span, so it can move only the neutral characters (spaces,
# punctuation) beside it, and Hebrew, Arabic or Persian text uses them all the time; showing them
# would clutter every such answer. The same nine, and no marks, are what rustc's
# text_direction_codepoint_in_literal lint and GCC's -Wbidi-chars flag.
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_VISIBLE = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
_VISIBLE[0x7F] = "\u2421"
_VISIBLE.update({c: f"<0x{c:02x}>" for c in range(0x80, 0xA0)})
_VISIBLE.update({ord(c): f"<U+{ord(c):04X}>" for c in BIDI_CONTROLS})


def visible_controls(text: str) -> str:
    """``text`` with every control character but newline and tab, and every bidi embedding, override
    and isolate, made visible (see above): never executed, never reordering the line.

    Cheap on clean text (one regex scan), so it runs on each streamed delta, not on each repaint.
    """
    if _CONTROLS.search(text) is None:
        return text
    return text.translate(_VISIBLE)


def fmt_num(v: float | int | None, unit: str = "", digits: int = 0) -> str:
    if v is None:
        return DASH
    s = f"{v:,.{digits}f}" if isinstance(v, float) else f"{v:,}"
    return f"{s} {unit}".strip()


def fmt_settings(settings: dict) -> str:
    """The latency-shaping settings, compactly, for the header and history."""
    parts: list[str] = []
    parts.append("stream" if settings.get("stream", True) else "no-stream")
    if settings.get("reasoning_effort"):
        parts.append(f"effort {settings['reasoning_effort']}")
    if settings.get("thinking_budget"):
        parts.append(f"think {settings['thinking_budget']}")
    if settings.get("thinking_display"):
        parts.append(f"thinking {settings['thinking_display']}")
    if settings.get("max_output_tokens"):
        parts.append(f"max {settings['max_output_tokens']} tok")
    if settings.get("temperature") is not None:
        parts.append(f"temp {settings['temperature']:g}")
    if settings.get("speculative"):
        parts.append("speculative")
    return " · ".join(parts)


ELLIPSIS = "…"
_SEPARATORS = "-_: "  # where a model name splits into readable parts ("." is not one: "Qwen2.5", "3.3")


def turn_label(index: object, prefix: str = "#") -> str:
    """How a person reads a turn: "#1" (or "turn 1", or "1" under a "#" heading) for ``turn_index`` 0.

    The log keeps ``turn_index`` 0-based (it is the schema); every screen, table and chart
    numbers turns from 1, through this one function. A missing index reads "?".
    """
    ok = isinstance(index, int) and not isinstance(index, bool) and index >= 0
    return prefix + (str(index + 1) if ok else "?")  # type: ignore[operator]


def short_model(name: str | None, width: int) -> str:
    """A model name that fits ``width`` characters and still says which model it is.

    Model names run from the general to the specific: family, version, size, then variant,
    date and quantization ("Llama-3.3-70B-Instruct-Q4_K_M", "claude-sonnet-4-5-20250929").
    So, only as far as needed to fit:

    1. the vendor or directory prefix goes ("meta-llama/", "/models/"; not in a label with
       spaces, such as a report's group name) and a ".gguf" extension;
    2. whole trailing parts go, cut at a separator (``-``, ``_``, ``:``, space) and marked with
       "…": "Llama-3.3-70B…", never "a-3.3-70B-Instruct" cut from the left;
    3. when that would keep less than half the width (one long part), the start and the
       end are kept around a "…" in the middle: "averylongm…name".

    The full name stays in the record (and the export); every place that shortens a name for
    people uses this function.
    """
    name = (name or "").strip()
    if width <= 0:
        return ""
    if len(name) <= width:
        return name
    base = name
    if not any(c.isspace() for c in name):  # an id or a path; a label with spaces keeps its "/" parts
        base = name.rstrip("/").rsplit("/", 1)[-1] or name
    if base.lower().endswith(".gguf"):
        base = base[: -len(".gguf")]
    if len(base) <= width:
        return base
    if width == 1:
        return ELLIPSIS
    room = width - 1
    cut = max((i for i in range(1, room + 1) if base[i] in _SEPARATORS), default=0)
    if cut >= width / 2:
        return base[:cut] + ELLIPSIS
    tail = room // 3
    return base[: room - tail] + ELLIPSIS + (base[-tail:] if tail else "")


def short_spec(provider: str | None, model: str | None, width: int, sep: str = ":") -> str:
    """``provider:model`` in ``width`` characters, each part shortened by :func:`short_model`.

    The model gets at least two thirds of the room (or all it needs): it says more about the
    latency than the provider does. Without room for the provider or five of its characters,
    only the model is shown.
    """
    if not provider:
        return short_model(model, width)
    if not model:
        return short_model(provider, width)
    model_room = min(len(model), max(width - len(provider) - len(sep), (width - len(sep)) * 2 // 3))
    provider_room = width - len(sep) - model_room
    if provider_room < min(5, len(provider)):
        return short_model(model, width)
    return f"{short_model(provider, provider_room)}{sep}{short_model(model, model_room)}"


def short_spec_str(spec: str, width: int) -> str:
    """:func:`short_spec` for a ``provider:model`` string (the model may itself hold colons)."""
    provider, model = split_spec(spec)
    return short_spec(provider, model, width) if model else short_model(spec, width)


def kept_after_cancel(record: TurnRecord) -> str:
    """What a cancelled turn kept, said after "cancelled; ": a tool-using turn that stopped with no answer
    text still kept every step that arrived, and must not read as if nothing had."""
    if record.answer:
        return "the partial answer is kept"
    steps = step_count(record.steps)
    if steps > 1:
        return f"the {steps} steps that arrived are kept"
    if record.tool_calls:
        return "the tool calls that arrived are kept"
    if record.reasoning:
        return "the reasoning that arrived is kept"
    return "nothing had arrived"
