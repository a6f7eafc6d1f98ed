"""Messages -> the prompt a model expects (a named chat format or the GGUF's own Jinja template), and
the template's stop strings matched in the streamed answer."""

from __future__ import annotations

from dataclasses import dataclass

from ...telemetry.errors import ErrorKind
from ..base import Message
from ..think import partial_suffix
from . import llama_adapter as llama
from .models import LocalModelError

GEMMA_CHAT_FORMAT = "gemma"  # Gemma GGUFs without a template of their own
FALLBACK_CHAT_FORMAT = "chatml"


@dataclass(frozen=True, slots=True)
class FormattedPrompt:
    text: str
    add_bos: bool
    stop: tuple[str, ...]


class ChatTemplate:
    """Messages -> prompt: a named llama-cpp-python chat format, or the GGUF's own Jinja template."""

    def __init__(self, llm: llama.LlamaHandle, chat_format: str | None) -> None:
        self.name = ""
        self._fn: llama.FormatFn | None = None
        md = llm.metadata
        if chat_format is None and md.get("tokenizer.chat_template"):
            eos, bos = llm.token_eos(), llm.token_bos()
            try:
                self._fn = llama.jinja_format(
                    md["tokenizer.chat_template"],
                    eos_token=llm.token_text(eos) if eos != -1 else "",
                    bos_token=llm.token_text(bos) if bos != -1 else "",
                    eos_id=eos,
                )
                self.name = "gguf-template"
            except Exception:  # an unrenderable template: fall back to a named format
                self._fn = None
        if self._fn is None:
            name = chat_format or _guess_format(md)
            fn = llama.named_format(name)
            if fn is None:
                raise LocalModelError(
                    ErrorKind.BAD_CHAT_FORMAT,
                    f"unknown chat format {name!r}",
                    "use a llama-cpp-python chat format name such as gemma, chatml, llama-3, mistral-instruct",
                )
            self._fn = fn
            self.name = name

    def format(self, messages: tuple[Message, ...]) -> FormattedPrompt:
        msgs = [{"role": m.role, "content": m.text()} for m in messages]  # text files inline; images never get here
        if self.name == "gemma":
            msgs = _fold_system_into_first_user(msgs)  # Gemma has no system role
        assert self._fn is not None
        r = self._fn(msgs)
        return FormattedPrompt(r.prompt, add_bos=not r.added_special, stop=r.stop)


def _guess_format(md: dict[str, str]) -> str:
    arch = md.get("general.architecture", "")
    return GEMMA_CHAT_FORMAT if arch.startswith("gemma") else FALLBACK_CHAT_FORMAT


def _fold_system_into_first_user(msgs: list[dict[str, str]]) -> list[dict[str, str]]:
    system = "\n\n".join(m["content"] for m in msgs if m["role"] == "system")
    rest = [dict(m) for m in msgs if m["role"] != "system"]
    if system:
        for m in rest:
            if m["role"] == "user":
                m["content"] = f"{system}\n\n{m['content']}"
                break
    return rest


class StopMatcher:
    """Stop strings in streamed text; a tail that could start a stop string is held back."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = tuple(s for s in stops if s)
        self._held = ""

    def feed(self, text: str) -> tuple[str, bool]:
        if not self.stops:
            return text, False
        buf = self._held + text
        hits = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if hits:
            self._held = ""
            return buf[: min(hits)], True
        keep = max((partial_suffix(buf, s) for s in self.stops), default=0)
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held
