"""The empty chat's greeting: which model answers, where it runs, and how to switch.

Every line is a Rich ``Text``, never markup, so a model name such as ``[usage]-7b`` shows
as typed. Each line is a label and a value that wraps under itself.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from ..format import short_spec
from ..target import TargetView, key_text, where_text
from ..terminal import visible_text

COMPAT_EXAMPLE = "ttft -m compat:MODEL --base-url http://127.0.0.1:8080/v1"
# (row, label): a row without a value for the target is hidden; a label shows on a block's first row
ROWS = (
    ("model", "model"),
    ("about", ""),
    ("where", ""),
    ("key", ""),
    ("problem", ""),
    ("settings", "switch"),
    ("hosted", ""),
    ("compat", ""),
    ("local", ""),
)


def _hosted_example() -> tuple[str, str]:
    """A hosted spec to copy, and the variable its key comes from (from the providers' own defaults)."""
    try:
        from ...backends.providers.registry import DEFAULT_MODELS, KEY_ENV
    except ImportError:
        return "openai:MODEL", "OPENAI_API_KEY"
    return f"openai:{DEFAULT_MODELS.get('openai', 'MODEL')}", KEY_ENV.get("openai", "OPENAI_API_KEY")


def model_line(target: TargetView, width: int) -> Text:
    """``provider:model``, shortened to one line of ``width``."""
    name = visible_text(Text(short_spec(target.provider, target.model, width), style="bold"))
    if target.model is None:  # the backend names its default when it starts
        name.append("  (its default model)", style="dim not bold")
    return name


def greeting_lines(target: TargetView) -> dict[str, Text | None]:
    """Every row but the model's (which depends on the width); None: not shown for this target."""
    hosted, key_env = _hosted_example()
    key = key_text(target)
    lines: dict[str, Text | None] = {
        # its first clause: the whole greeting must fit the empty chat at 80x24
        "about": Text(target.about.split(";")[0], style="dim") if target.about else None,
        "where": Text(where_text(target), style="dim"),
        "key": None if key is None else Text(key, style="yellow" if target.key_missing else "dim"),
        "problem": Text(f"! {target.problem}", style="yellow") if target.problem else None,
        "settings": Text.assemble(("F2", "bold"), (" settings: model, reasoning, max tokens, streaming", "dim")),
        # a hosted model to copy, unless that is what runs now
        "hosted": None
        if target.kind in ("openai", "openai-responses")
        else Text.assemble((f"ttft -m {hosted}", "bold"), (f"  key from ${key_env}", "dim")),
        "compat": Text(COMPAT_EXAMPLE, style="bold"),
        "local": None
        if target.kind == "local"
        else Text.assemble(("ttft -m local", "bold"), ("  a small model on this machine, no key", "dim")),
    }
    # names, addresses and descriptions come from the command line, config.toml or a server
    return {k: None if v is None else visible_text(v) for k, v in lines.items()}


class ModelLine(Widget):
    """The model's name, shortened to this line's width whenever it is drawn."""

    DEFAULT_CSS = "ModelLine { height: 1; width: 1fr; }"

    def __init__(self, target: TargetView) -> None:
        super().__init__(classes="greeting-value")
        self.target = target

    def render(self) -> Text:
        return model_line(self.target, self.size.width or 60)


class Greeting(Vertical):
    """Shown in the empty transcript; it goes when the first turn starts and is back on ctrl+n."""

    DEFAULT_CSS = """
    Greeting {
        height: auto;
        padding: 0 1;
        border: round $primary-darken-2;
        border-title-color: $text-muted;
        border-subtitle-color: $text-muted;
    }
    Greeting .greeting-row { height: auto; }
    Greeting .greeting-label { width: 8; color: $text-muted; }
    Greeting .greeting-value { width: 1fr; }
    """

    def __init__(self, target: TargetView) -> None:
        super().__init__(classes="greeting")
        self.target = target
        self.border_title = "ttft · where the latency comes from"
        self.border_subtitle = "F1 help: keys, what each figure means · ctrl+p every command"
        # Held, not queried: a model switch may land while these are still being mounted.
        self._model: ModelLine | None = None
        self._rows: dict[str, tuple[Horizontal, Static]] = {}

    def compose(self) -> ComposeResult:
        lines = greeting_lines(self.target)
        self._model = ModelLine(self.target)
        for key, label in ROWS:
            value = self._model if key == "model" else Static(lines[key] or "", classes="greeting-value")
            row = Horizontal(Static(Text(label), classes="greeting-label"), value, classes="greeting-row")
            row.display = key == "model" or lines[key] is not None  # laid out once, at its final height
            if isinstance(value, Static):
                self._rows[key] = (row, value)
            yield row

    def set_target(self, target: TargetView) -> None:
        """Another model before the first prompt (F2): the same rows, redrawn."""
        if target == self.target:
            return
        self.target = target  # not composed yet: compose draws this one
        if self._model is not None:
            self._model.target = target
            self._model.refresh()
        for key, text in greeting_lines(target).items():
            if key in self._rows:
                row, value = self._rows[key]
                row.display = text is not None
                if text is not None:
                    value.update(text)

    @property
    def plain(self) -> str:
        """What it says, one row a line (the model's name as drawn now)."""
        lines = []
        for row in self.query(".greeting-row").results(Horizontal):
            if row.display:
                value = row.query_one(".greeting-value")
                text = value.render().plain if isinstance(value, ModelLine) else str(value.content)  # type: ignore[attr-defined]
                label = str(row.query_one(".greeting-label", Static).content)
                lines.append(f"{label:<8}{text}".rstrip())
        return "\n".join(lines)
