"""Settings that shape latency, applied to the next turn and recorded with it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, OptionList, Select, Static, Switch

from ...telemetry.settings import PROMPT_LOOKUP, TurnSettings
from ..format import visible_controls

EFFORT_OPTIONS = [("default", ""), ("minimal", "minimal"), ("low", "low"), ("medium", "medium"), ("high", "high")]
DISPLAY_OPTIONS = [("default", ""), ("summarized", "summarized"), ("omitted", "omitted")]
FLASH_ATTN_OPTIONS = [("default", ""), ("auto", "auto"), ("on", "on"), ("off", "off")]
# The local engine's load options, as TurnSettings.extra names them: a change reloads the model.
ENGINE_KEYS = ("n_gpu_layers", "n_threads", "flash_attn")

Result = tuple[str, str | None, TurnSettings]


def known_model_specs() -> list[str]:
    """Built-in providers with their default models, and the providers configured in config.toml."""
    try:
        from ...backends.providers import registry as providers
    except ImportError:
        return ["local"]
    specs = [f"{p}:{providers.DEFAULT_MODELS[p]}" if p in providers.DEFAULT_MODELS else p for p in providers.BUILTIN]
    try:
        configured = providers.configured_providers()
    except Exception:  # a broken config file must not break the settings screen
        configured = {}
    for name, cfg in configured.items():
        model = getattr(cfg, "default_model", None)
        specs.append(f"{name}:{model}" if model else name)
    return specs


def server_models(spec: str, base_url: str | None) -> list[str]:
    """The models a server lists at /v1/models, as specs for the same provider."""
    from ...backends.providers.registry import list_models, resolve

    target = resolve(spec, base_url=base_url)
    return [f"{target.provider}:{m}" for m in list_models(target)]


def _int(text: str, name: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        v = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number") from None
    if v <= 0:
        raise ValueError(f"{name} must be positive")
    return v


def _layers(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        v = int(text)
    except ValueError:
        raise ValueError("GPU layers must be a whole number (0: the CPU, -1: every layer)") from None
    if v < -1:
        raise ValueError("GPU layers must be 0 or more, or -1 for every layer")
    return v


def engine_options(settings: TurnSettings) -> dict[str, object]:
    """The settings' local-engine load options (GPU layers, threads, flash attention)."""
    return {k: settings.extra[k] for k in ENGINE_KEYS if k in settings.extra}


def _float(text: str, name: str) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number") from None


class SettingsScreen(ModalScreen[Result | None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel"), ("ctrl+s", "apply", "Apply")]
    DEFAULT_CSS = """
    SettingsScreen { align: center middle; }
    SettingsScreen > VerticalScroll {
        width: 90%; max-width: 90; height: auto; max-height: 95%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    SettingsScreen Grid { grid-size: 2; grid-columns: 22 1fr; grid-rows: auto; height: auto; grid-gutter: 0 1; }
    SettingsScreen Label { padding: 1 0 0 0; }
    SettingsScreen #settings-error { color: $error; height: auto; }
    SettingsScreen Horizontal { height: auto; align-horizontal: right; }
    SettingsScreen #local-knobs { align-horizontal: left; }
    SettingsScreen #local-knobs { padding: 0; }
    SettingsScreen #local-knobs .knob { width: auto; margin: 0 1 0 0; color: $text-muted; }
    SettingsScreen #local-knobs Input { width: 8; margin: 0 2 0 0; }
    SettingsScreen #local-knobs Select { width: 14; }
    SettingsScreen #local-label { height: 1; padding: 0; }
    SettingsScreen #model-list-box { height: auto; }
    SettingsScreen #model-list { height: auto; max-height: 8; display: none; }
    SettingsScreen #list-models { min-width: 10; }
    """

    def __init__(
        self,
        spec: str,
        base_url: str | None,
        settings: TurnSettings,
        *,
        focus: str | None = None,
        models: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.spec, self.base_url, self.settings = spec, base_url, settings
        self.focus_field = focus
        self.models = list(models) if models is not None else known_model_specs()

    def compose(self) -> ComposeResult:
        s = self.settings
        with VerticalScroll():
            yield Static("[b]Settings[/b] · apply to the next turn and are recorded with it")
            with Grid():
                yield Label("model")
                yield Input(
                    self.spec,
                    id="model",
                    placeholder="provider:model, e.g. local, openai:gpt-4.1-mini",
                    suggester=SuggestFromList(self.models, case_sensitive=False) if self.models else None,
                )
                yield Static("")
                yield Button("List the server's models", id="list-models")
                yield Static("")
                # In a box of its own: the hidden list (display none) would give up its grid cell and
                # shift every later label into the widgets' column.
                with Vertical(id="model-list-box"):
                    yield OptionList(id="model-list")
                yield Label("base URL")
                yield Input(self.base_url or "", id="base_url", placeholder="(the provider's default)")
                yield Label("reasoning effort")
                yield Select(EFFORT_OPTIONS, value=s.reasoning_effort or "", allow_blank=False, id="effort")
                yield Label("thinking budget")
                yield Input(str(s.thinking_budget or ""), id="budget", placeholder="tokens (Anthropic, Gemini)")
                yield Label("thinking display")
                yield Select(DISPLAY_OPTIONS, value=s.thinking_display or "", allow_blank=False, id="display")
                yield Label("max output tokens")
                yield Input(str(s.max_output_tokens or ""), id="max_tokens", placeholder="(model default)")
                yield Label("temperature")
                yield Input("" if s.temperature is None else f"{s.temperature:g}", id="temperature")
                yield Label("stream")
                yield Switch(s.stream, id="stream")
                yield Label("speculative (local)")
                yield Switch(bool(s.speculative), id="speculative")
                ex = s.extra
                fa = ex.get("flash_attn")
                # One compact row for the three: the screen still fits a 40-line terminal.
                yield Label("local engine", id="local-label")
                with Horizontal(id="local-knobs"):
                    yield Static("GPU layers", classes="knob")
                    yield Input(str(ex.get("n_gpu_layers", "")), id="gpu_layers", placeholder="all", compact=True)
                    yield Static("threads", classes="knob")
                    yield Input(str(ex.get("n_threads", "")), id="threads", placeholder="auto", compact=True)
                    yield Static("flash attn", classes="knob")
                    yield Select(
                        FLASH_ATTN_OPTIONS,
                        value=fa if fa in ("auto", "on", "off") else "",
                        allow_blank=False,
                        id="flash_attn",
                        compact=True,
                    )
            yield Static("", id="settings-error")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Apply", id="apply", variant="primary")

    def on_mount(self) -> None:
        target = {"model": "#model"}.get(self.focus_field or "", "#model")
        self.query_one(target).focus()

    def collect(self) -> Result:
        spec = self.query_one("#model", Input).value.strip() or self.spec
        base_url = self.query_one("#base_url", Input).value.strip() or None
        effort = self.query_one("#effort", Select).value or None
        display = self.query_one("#display", Select).value or None
        spec_on = self.query_one("#speculative", Switch).value
        engine = {
            "n_gpu_layers": _layers(self.query_one("#gpu_layers", Input).value),
            "n_threads": _int(self.query_one("#threads", Input).value, "threads"),
            "flash_attn": self.query_one("#flash_attn", Select).value or None,
        }
        extra = {k: v for k, v in self.settings.extra.items() if k not in ENGINE_KEYS}
        extra.update({k: v for k, v in engine.items() if v is not None})
        settings = self.settings.with_(
            reasoning_effort=effort,
            thinking_budget=_int(self.query_one("#budget", Input).value, "thinking budget"),
            thinking_display=display,
            max_output_tokens=_int(self.query_one("#max_tokens", Input).value, "max output tokens"),
            temperature=_float(self.query_one("#temperature", Input).value, "temperature"),
            stream=self.query_one("#stream", Switch).value,
            speculative=dict(self.settings.speculative or PROMPT_LOOKUP) if spec_on else None,
            extra=extra,
        )
        return spec, base_url, settings

    def action_apply(self) -> None:
        try:
            result = self.collect()
        except ValueError as exc:
            self.query_one("#settings-error", Static).update(str(exc))
            return
        self.dismiss(result)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_apply()
        elif event.button.id == "list-models":
            self.query_one("#settings-error", Static).update("asking the server for its models…")
            spec = self.query_one("#model", Input).value.strip() or self.spec
            self.list_models(spec, self.query_one("#base_url", Input).value.strip() or None)
        else:
            self.action_cancel()

    @work(thread=True, exclusive=True, group="list-models")
    def list_models(self, spec: str, base_url: str | None) -> None:
        try:
            models = server_models(spec, base_url)
        except Exception as exc:  # a ProviderError carries a printable message
            self.app.call_from_thread(self._show_models, [], str(exc))
            return
        self.app.call_from_thread(self._show_models, models, None)

    def _show_models(self, models: list[str], error: str | None) -> None:
        note = self.query_one("#settings-error", Static)
        if error or not models:  # a Text: the server's words are neither markup nor control sequences
            note.update(Text(visible_controls(error or "The server listed no models.")))
            return
        note.update(f"{len(models)} models: pick one")
        options = self.query_one("#model-list", OptionList)
        options.clear_options()
        options.add_options(models)
        options.display = True
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.query_one("#model", Input).value = str(event.option.prompt)
        event.option_list.display = False
        self.query_one("#model", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_apply()
