"""Prompt datasets a bench sends: ShareGPT (JSON or JSONL), chat ``messages``, or JSONL with a ``prompt``.

A ShareGPT record is ``{"id", "conversations": [{"from": "human"|"gpt", "value": TEXT}, ...]}`` (a
JSON list of them, or one a line); the OpenAI form ``{"messages": [{"role": "user"|"assistant",
"content": TEXT}]}`` reads the same way; a ``{"prompt": TEXT}`` line is a one-turn conversation
(``output_tokens`` beside it, when given, is its answer's length). Each conversation keeps its
human turns in order, each with the length of the answer that followed it in the dataset (estimated
from its characters: the dataset's tokenizer is not the server's), so output lengths can come from
the dataset as ``vllm bench serve --dataset-name sharegpt`` takes them. System turns are left out.

The file is untrusted: a record that does not read is counted with the first reason, never raised;
a turn's text is bounded (:data:`MAX_TEXT_CHARS`). It is read as a stream, a line or a JSON list's
element at a time: a file past :data:`MAX_DATASET_BYTES` is refused (before a byte is read when its
size is known), a line or element past :data:`MAX_RECORD_CHARS` is skipped (a list's stops the read),
and reading stops after :data:`MAX_CONVERSATIONS` (said).
"""

from __future__ import annotations

import codecs
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ... import json_guard
from ...errors import TtftError
from ...json_guard import JsonRefused
from ...tokens import tokens_for_chars
from .lengths import MAX_TOKENS

MAX_TEXT_CHARS = 4_000_000  # one turn's text; a longer one is cut (and counted)
MAX_CONVERSATIONS = 1_000_000  # read no further: a bench sends far fewer
MAX_DATASET_BYTES = 1 << 30  # 1 GiB: ShareGPT's 642 MB list fits; past it, take a part of the file
MAX_RECORD_CHARS = 64 << 20  # one JSONL line, or one element of a JSON list
READ_CHUNK = 1 << 20
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
    stopped_at: int | None = None  # MAX_CONVERSATIONS read: the rest of the file was not

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
        if self.stopped_at is not None:
            out.append(f"read the first {self.stopped_at:,} conversations of {self.source}; the rest was not read")
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
    """The conversations in ``path`` (a JSON list or JSONL), read as a stream; DatasetError when none reads,
    or when the file passes :data:`MAX_DATASET_BYTES`."""
    data = Dataset(str(path))
    try:
        f = path.open("rb")
    except OSError as exc:
        raise DatasetError(f"cannot read the dataset {path}: {exc.strerror or exc}") from None
    with f:
        try:
            st = os.fstat(f.fileno())
        except OSError as exc:
            raise DatasetError(f"cannot read the dataset {path}: {exc.strerror or exc}") from None
        if stat.S_ISREG(st.st_mode) and st.st_size > MAX_DATASET_BYTES:
            raise DatasetError(_too_big(path, f"is {st.st_size:,} bytes"))
        try:
            for where, obj in _records(_Reader(f, path), data):
                if len(data.conversations) >= MAX_CONVERSATIONS:
                    data.stopped_at = MAX_CONVERSATIONS
                    break
                try:
                    conv = _conversation(obj, where, data)
                except ValueError as exc:
                    data.problem(str(exc))
                    continue
                data.conversations.append(conv)
        except OSError as exc:
            raise DatasetError(f"cannot read the dataset {path}: {exc.strerror or exc}") from None
    if not data.conversations:
        why = f" ({data.first_problem})" if data.first_problem else ""
        raise DatasetError(f"no conversation in the dataset {path} could be read{why}")
    return data


def _too_big(path: Path, what: str) -> str:
    return (
        f"the dataset {path} {what}, past the {MAX_DATASET_BYTES:,} bytes (1 GiB) ttft reads: take a part of it "
        f"(JSONL: head -n 100000 {path} > part.jsonl)"
    )


class _Reader:
    """The file's bytes as text, a chunk or a line at a time, never more than :data:`MAX_DATASET_BYTES` in
    all (a pipe has no size to check first)."""

    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f, self.path, self.read = f, path, 0
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")()

    def _count(self, raw: bytes) -> bytes:
        self.read += len(raw)
        if self.read > MAX_DATASET_BYTES:
            raise DatasetError(_too_big(self.path, f"holds more than {MAX_DATASET_BYTES:,} bytes"))
        return raw

    def text(self, raw: bytes, final: bool = False) -> str:
        try:
            return self._decoder.decode(raw, final)
        except UnicodeDecodeError:
            raise DatasetError(f"the dataset {self.path} is not UTF-8 text") from None

    def chunk(self, size: int) -> str | None:
        """The next ``size`` bytes or so as text; None at the end."""
        raw = self._count(self.f.read(size))
        if not raw:
            self.text(b"", final=True)  # a character cut at the file's end is not UTF-8 either
            return None
        return self.text(raw)


def _records(reader: _Reader, data: Dataset) -> Iterable[tuple[str, object]]:
    """The records of a JSON list (one element at a time), else one JSON value a line."""
    head = reader.chunk(READ_CHUNK) or ""
    if head.lstrip().startswith("["):
        yield from _list_items(reader, head, data)
    else:
        yield from _line_records(_lines(reader, head), data)


def _lines(reader: _Reader, buf: str) -> Iterator[tuple[int, str | None]]:
    """(number, text) per line; text None for a line past :data:`MAX_RECORD_CHARS` (the rest of it skipped)."""
    pos, number, skipping = 0, 0, False
    while True:
        nl = buf.find("\n", pos)
        if nl >= 0:
            if not skipping:
                number += 1
                yield number, buf[pos:nl]
            skipping, pos = False, nl + 1
            continue
        if not skipping and len(buf) - pos > MAX_RECORD_CHARS:
            number += 1
            yield number, None
            skipping = True
        got = reader.chunk(READ_CHUNK)
        if got is None:
            if pos < len(buf) and not skipping:
                yield number + 1, buf[pos:]
            return
        buf = (buf[pos:] if not skipping else "") + got
        pos = 0


def _line_records(lines: Iterable[tuple[int, str | None]], data: Dataset) -> Iterator[tuple[str, object]]:
    for number, line in lines:
        if line is None:
            data.problem(f"line {number} is longer than {MAX_RECORD_CHARS:,} characters")
            continue
        if not line.strip():
            continue
        try:
            yield f"line {number}", json_guard.loads(line, f"line {number}")
        except JsonRefused as exc:
            data.problem(f"line {number} is not JSON" if exc.reason == "not_json" else str(exc))


def _list_items(reader: _Reader, buf: str, data: Dataset) -> Iterator[tuple[str, object]]:
    """A JSON list's elements, decoded one at a time from a window of the file (one element at most
    :data:`MAX_RECORD_CHARS`), so the whole list is never in memory at once."""
    decoder = json.JSONDecoder()
    pos = buf.index("[") + 1
    done = False  # the file's end was read
    bad = DatasetError(f"the dataset {data.source} starts like a JSON list but is not valid JSON")

    def more(at_least: int) -> bool:
        nonlocal buf, pos, done
        if done:
            return False
        buf, pos = buf[pos:], 0  # what was decoded is let go
        got = reader.chunk(max(READ_CHUNK, at_least))
        if got is None:
            done = True
            return False
        buf += got
        return True

    index = 0
    while True:
        while True:  # the next element, or the list's end
            pos = _skip_space(buf, pos)
            if pos < len(buf) or not more(0):
                break
        if pos >= len(buf):
            raise bad  # the file ended inside the list
        if buf[pos] == "]" and index == 0:
            pos += 1
            break
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                break
            except RecursionError:  # nested past the stack before its end is known: the read stops
                deep = f"nested more than {json_guard.MAX_DEPTH} levels deep, past ttft's limit"
                raise DatasetError(f"record {index + 1} of the dataset {data.source}: JSON {deep}") from None
            except ValueError:
                if len(buf) - pos > MAX_RECORD_CHARS:
                    too_long = f"is longer than {MAX_RECORD_CHARS:,} characters"
                    raise DatasetError(f"record {index + 1} of the dataset {data.source} {too_long}") from None
                # read as much again: a long element is decoded a few times, not once per chunk
                if not more(len(buf) - pos):
                    raise bad from None
        index += 1
        try:  # the guard's bounds, as every JSON ttft reads: one element nested too deep is skipped
            json_guard.check(buf[pos:end], what=f"record {index}")
        except JsonRefused as exc:
            data.problem(str(exc))
        else:
            yield f"record {index}", obj
        pos = end
        while True:
            pos = _skip_space(buf, pos)
            if pos < len(buf) or not more(0):
                break
        if pos >= len(buf):
            raise bad
        if buf[pos] == "]":
            pos += 1
            break
        if buf[pos] != ",":
            raise bad
        pos += 1
    while True:  # nothing but space after the list
        if _skip_space(buf, pos) < len(buf):
            raise bad
        pos = len(buf)
        if not more(0):
            return


def _skip_space(buf: str, pos: int) -> int:
    while pos < len(buf) and buf[pos] in " \t\r\n":
        pos += 1
    return pos


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
