"""Prompt datasets a bench sends: ShareGPT (JSON or JSONL), chat ``messages``, or JSONL with a ``prompt``.

A ShareGPT record is ``{"id", "conversations": [{"from": "human"|"gpt", "value": TEXT}, ...]}`` (a
JSON list of them, or one a line); the OpenAI form ``{"messages": [{"role": "user"|"assistant",
"content": TEXT}]}`` reads the same way; a ``{"prompt": TEXT}`` line is a one-turn conversation
(``output_tokens`` beside it, when given, is its answer's length). Each conversation keeps its
human turns in order, each with the length of the answer that followed it in the dataset (estimated
from its characters: the dataset's tokenizer is not the server's), so output lengths can come from
the dataset as ``vllm bench serve --dataset-name sharegpt`` takes them. System turns are left out.

The file is untrusted: a record that does not read is counted with the first reason, never raised;
a turn's text is bounded (:data:`MAX_TEXT_CHARS`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from telemetry import json_guard
from telemetry.bench.workload.lengths import MAX_TOKENS
from telemetry.errors import TtftError
from telemetry.json_guard import JsonRefused
from telemetry.tokens import tokens_for_chars

MAX_TEXT_CHARS = 4_000_000  # one turn's text; a longer one is cut (and counted)
MAX_CONVERSATIONS = 1_000_000
USER_ROLES = frozenset({"human", "user"})
ANSWER_ROLES = frozenset({"gpt", "assistant", "model", "chatgpt", "bing", "bard"})


@dataclass(frozen=True, slots=True)
class DatasetTurn:
    """One human turn and the length of the answer the dataset gave it (None: it gave none)."""

    text: str
    answer_tokens: int | None = None


@dataclass
class Dataset:
    source: str
    conversations: list[tuple[DatasetTurn, ...]] = field(default_factory=list)
    skipped: int = 0
    first_problem: str = ""
    cut_texts: int = 0

    def problem(self, why: str) -> None:
        self.skipped += 1
        self.first_problem = self.first_problem or why

    def notes(self) -> list[str]:
        out = []
        if self.skipped:
            s = "s" if self.skipped != 1 else ""
            out.append(
                f"skipped {self.skipped} record{s} of {self.source} that could not be read ({self.first_problem})"
            )
        if self.cut_texts:
            out.append(f"cut {self.cut_texts} turn(s) of {self.source} to {MAX_TEXT_CHARS:,} characters")
        return out

    def summary(self) -> dict[str, Any]:
        turns = [t for c in self.conversations for t in c]
        return {
            "source": self.source,
            "conversations": len(self.conversations),
            "human_turns": len(turns),
            "with_answer_lengths": sum(t.answer_tokens is not None for t in turns),
            "skipped_records": self.skipped,
        }


class DatasetError(TtftError, ValueError):
    """A dataset that cannot be used at all (unreadable, not JSON, no conversation in it): says why."""


def read_dataset(path: Path) -> Dataset:
    """The conversations in ``path`` (a JSON list or JSONL); DatasetError when none reads."""
    data = Dataset(str(path))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"cannot read the dataset {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DatasetError(f"the dataset {path} is not UTF-8 text") from None
    for where, obj in _records(text, data):
        if len(data.conversations) >= MAX_CONVERSATIONS:
            break
        try:
            conv = _conversation(obj, where, data)
        except ValueError as exc:
            data.problem(str(exc))
            continue
        data.conversations.append(conv)
    if not data.conversations:
        why = f" ({data.first_problem})" if data.first_problem else ""
        raise DatasetError(f"no conversation in the dataset {path} could be read{why}")
    return data


def _records(text: str, data: Dataset) -> Iterable[tuple[str, object]]:
    """A whole-file JSON list (or one object), else one JSON value a line."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            whole = json_guard.loads(stripped, f"the dataset {data.source}")
        except JsonRefused as exc:
            if exc.reason != "not_json":
                raise DatasetError(str(exc)) from None
            raise DatasetError(f"the dataset {data.source} starts like a JSON list but is not valid JSON") from None
        if isinstance(whole, list):
            yield from ((f"record {i + 1}", obj) for i, obj in enumerate(whole))
            return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"line {number}", json_guard.loads(line, f"line {number}")
        except JsonRefused as exc:
            data.problem(f"line {number} is not JSON" if exc.reason == "not_json" else str(exc))


def _text(v: object, where: str, data: Dataset) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{where}: a turn's text is not a string")
    if len(v) > MAX_TEXT_CHARS:
        data.cut_texts += 1
        return v[:MAX_TEXT_CHARS]
    return v


def _conversation(obj: object, where: str, data: Dataset) -> tuple[DatasetTurn, ...]:
    if not isinstance(obj, dict):
        raise ValueError(f"{where} is not an object")
    if "prompt" in obj and "conversations" not in obj and "messages" not in obj:
        text = _text(obj["prompt"], where, data)
        if not text.strip():
            raise ValueError(f"{where}: the prompt is empty")
        n = obj.get("output_tokens", obj.get("max_tokens"))
        answer = n if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_TOKENS else None
        return (DatasetTurn(text, answer),)
    if isinstance(obj.get("conversations"), list):
        pairs = [(m.get("from"), m.get("value")) if isinstance(m, dict) else (None, None) for m in obj["conversations"]]
    elif isinstance(obj.get("messages"), list):
        pairs = [(m.get("role"), m.get("content")) if isinstance(m, dict) else (None, None) for m in obj["messages"]]
    else:
        raise ValueError(f"{where} has no conversations, messages or prompt")
    turns: list[DatasetTurn] = []
    for role, value in pairs:
        who = str(role).lower() if isinstance(role, str) else ""
        if who in USER_ROLES:
            text = _text(value, where, data)
            if text.strip():
                turns.append(DatasetTurn(text))
        elif who in ANSWER_ROLES and turns and turns[-1].answer_tokens is None and isinstance(value, str):
            turns[-1] = DatasetTurn(turns[-1].text, max(1, tokens_for_chars(len(value))))
    if not turns:
        raise ValueError(f"{where} has no human turn")
    return tuple(turns)
