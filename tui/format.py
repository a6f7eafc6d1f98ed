"""Text formatting for figures the telemetry computed (no metric is computed here)."""

from __future__ import annotations

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

DASH = "–"


def fmt_ms(v: float | None, *, digits: int = 0) -> str:
    """230 ms, 1.8 s, 2 m 05 s."""
    if v is None:
        return DASH
    if v < 1000:
        return f"{v:.{digits}f} ms"
    if v < 60_000:
        return f"{v / 1000:.1f} s"
    return f"{int(v // 60_000)} m {int(v % 60_000 // 1000):02d} s"


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
