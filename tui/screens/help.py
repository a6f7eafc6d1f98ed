"""Key bindings, and one line per metric."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

NEWLINE_HELP = (
    "a new line in the prompt; shift+enter too where the terminal reports it apart from Enter (the kitty"
    " keyboard protocol: kitty, WezTerm, foot, Ghostty, iTerm2 with CSI u; not tmux, nor xterm by default)"
)
KEYS = (
    ("Enter", "send the prompt"),
    ("ctrl+j, alt+enter", NEWLINE_HELP),
    (
        "paste",
        "kept whole (tabs, blank lines, any script; CRLF becomes LF); a long paste shows folded and is sent whole",
    ),
    ("ctrl+e", "in the prompt: unfold a folded paste; else the end of the line"),
    ("↑ / ↓", "earlier / later prompts, on the prompt's first / last line (kept across chats)"),
    ("ctrl+r", "search earlier prompts as you type (Enter puts one in the prompt)"),
    ("click a prompt", "edit it and send it again: a new branch from there (also palette: Edit prompt N)"),
    ("click a code header", "copy that code block (OSC 52; palette: Copy code block N)"),
    ("/attach PATH", "attach a file to the next prompt (Tab completes); /detach N, or a click, removes it"),
    (
        "Esc",
        "cancel the turn in flight (what arrived is kept; the prompt keeps your text); stop editing; close a dialog",
    ),
    ("F5", "regenerate the last answer (a new branch in its place)"),
    ("ctrl+n", "new chat (a new session log)"),
    ("ctrl+y", "copy the last answer"),
    ("ctrl+s", "export the session as JSONL and CSV"),
    ("F2 / ctrl+l", "settings / change the model"),
    ("ctrl+t", "streaming on/off for the next turn"),
    ("ctrl+o", "next reasoning effort (default, minimal, low, medium, high)"),
    ("F3", "sessions: reopen a past chat"),
    ("F4", "show or hide the telemetry pane"),
    ("/tools", "the MCP tool servers (--mcp): each one's state, start times and tools"),
    ("a, A/s, d, x", "in a tool call's dialog: allow once, always allow the tool, deny (Esc too), stop the turn"),
    ("F9, /compare SPEC", "compare this model with another side by side (F10, Esc: back; /chat A: go on with pane A)"),
    ("ctrl+p", "command palette: every action above, and more"),
    ("F1", "this help"),
    ("ctrl+q", "quit"),
)

METRICS = (
    ("TTFT", "time to first token: send → first chunk carrying any token (reasoning or text)"),
    ("  wait", "where TTFT went: pool, network, server (request → headers), first token, retries; sum = TTFT"),
    ("  network", "dns + connect + TLS + send (the request written); 0 on a reused connection"),
    ("  connection", "new or reused, the HTTP version; the server's request id, for a support ticket"),
    ("  server part", "with a saved `ttft probe`: the prefill this prompt should take, and the rest (a queue)"),
    (
        "  server says",
        "the server's own account (vLLM per-request metrics, llama-server timings): its queue, its TTFT from"
        " scheduling, the rest of TTFT (network, client); vLLM's reasoning and answer start",
    ),
    ("TTFVT", "time to first visible token: send → first answer text; what a reader waits for"),
    ("reasoning delay", "first token → first visible text; estimated from usage × TPOT when thinking is hidden"),
    ("TPOT", "time per output token after the first: (last − first token) / (N − 1); decode speed"),
    ("ITL", "inter-token latency: gaps between token-bearing chunks (p50/p95/p99)"),
    ("E2E", "send → last token; 'stream end' is send → the stream closing"),
    ("tokens/s", "1 / TPOT: the speed one user gets; 'now' looks at the last second"),
    ("tokens", "input, cached input, reasoning, output; [usage] from the server, [estimated] otherwise"),
    ("ttft's own", "Enter → the send: ttft's own delay (shown from 5 ms), never inside TTFT"),
    ("retries", "earlier attempts (429, 5xx) and the time they cost, counted inside TTFT"),
    ("model load", "a local model loading: its own phase, never part of TTFT"),
    ("prefill/decode", "the engine's own split (llama-server timings, Ollama durations) when reported"),
    ("render lag", "a token's arrival → on screen; p95 under 100 ms means the display keeps up"),
    ("timeline", "each turn on one time scale: waiting, reasoning, streaming; ↻ retry, ! stall (gap ≥ 10× median)"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,f1,q", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90%; max-width: 110; height: 90%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for k, what in KEYS:  # Text, not str: a str cell is markup, and "[usage]" would vanish
            keys.add_row(Text(k), Text(what))
        metrics = Table.grid(padding=(0, 2))
        metrics.add_column(style="bold", no_wrap=True)
        metrics.add_column()
        for k, what in METRICS:
            metrics.add_row(Text(k), Text(what))
        with VerticalScroll():
            yield Static(Text("Keys", style="bold underline"))
            yield Static(keys)
            yield Static(Text("\nMetrics (all measured client-side on a monotonic clock)", style="bold underline"))
            yield Static(metrics)
            yield Static(Text("\nEsc closes this help.", style="dim"))
