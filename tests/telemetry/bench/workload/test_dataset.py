"""telemetry.bench.workload.dataset: ShareGPT, chat messages and prompt lines, from untrusted files."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

import pytest
from ttft.telemetry import json_guard
from ttft.telemetry.bench.workload import dataset
from ttft.telemetry.bench.workload.dataset import DatasetError, read_dataset

SHAREGPT = [
    {
        "id": "a",
        "conversations": [
            {"from": "system", "value": "be nice"},
            {"from": "human", "value": "first question"},
            {"from": "gpt", "value": "x" * 400},  # ~100 tokens at 4 characters a token
            {"from": "human", "value": "second question"},
            {"from": "gpt", "value": "y" * 80},
            {"from": "human", "value": "unanswered"},
        ],
    },
    {"id": "b", "conversations": [{"from": "gpt", "value": "an answer with no question"}]},
    {"id": "c", "messages": [{"role": "user", "content": "chat form"}, {"role": "assistant", "content": "z" * 40}]},
    "not an object",
]


def test_sharegpt_json_keeps_human_turns_and_their_answer_lengths(tmp_path: Path) -> None:
    p = tmp_path / "sharegpt.json"
    p.write_text(json.dumps(SHAREGPT))
    data = read_dataset(p)
    assert len(data.conversations) == 2 and data.skipped == 2  # b has no human turn; the string is no record
    first, chat = data.conversations
    assert [t.text for t in first] == ["first question", "second question", "unanswered"]
    assert [t.answer_tokens for t in first] == [100, 20, None]
    assert chat[0].text == "chat form" and chat[0].answer_tokens == 10
    assert data.summary()["human_turns"] == 4 and data.summary()["with_answer_lengths"] == 3
    assert "skipped 2 records" in data.notes()[0]


def test_jsonl_of_prompts_and_of_conversations(tmp_path: Path) -> None:
    p = tmp_path / "prompts.jsonl"
    lines = [
        json.dumps({"prompt": "one", "output_tokens": 12}),
        json.dumps({"prompt": "two", "output_tokens": True}),  # not a count: no answer length
        "{broken",
        "",
        json.dumps(SHAREGPT[0]),
        json.dumps({"prompt": "   "}),
    ]
    p.write_text("\n".join(lines))
    data = read_dataset(p)
    assert [c[0].text for c in data.conversations] == ["one", "two", "first question"]
    assert [c[0].answer_tokens for c in data.conversations] == [12, None, 100]
    assert data.skipped == 2  # the broken line and the empty prompt


def test_a_dataset_with_nothing_usable_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("[1, 2,")
    with pytest.raises(DatasetError, match="not valid JSON"):
        read_dataset(tmp_path / "bad.json")
    (tmp_path / "none.jsonl").write_text('{"x": 1}\n')
    with pytest.raises(DatasetError, match="no conversation"):
        read_dataset(tmp_path / "none.jsonl")
    (tmp_path / "latin1.json").write_bytes(b'[{"prompt": "caf\xe9"}]')
    with pytest.raises(DatasetError, match="not UTF-8"):
        read_dataset(tmp_path / "latin1.json")
    with pytest.raises(DatasetError, match="cannot read"):
        read_dataset(tmp_path / "absent.json")


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 7 bytes and records of at most 200 characters: every record straddles a chunk's edge."""
    monkeypatch.setattr(dataset, "READ_CHUNK", 7)
    monkeypatch.setattr(dataset, "MAX_RECORD_CHARS", 200)


@pytest.mark.parametrize("form", ["list", "jsonl"])
def test_a_stream_read_in_small_chunks_reads_what_a_whole_read_does(
    tmp_path: Path, small_chunks: None, form: str
) -> None:
    rows = [{"prompt": f"prompt {i} é✓", "output_tokens": i + 1} for i in range(40)]
    p = tmp_path / "d"
    text = json.dumps(rows, indent=1) if form == "list" else "\r\n".join(json.dumps(r) for r in rows)
    p.write_bytes(b"\xef\xbb\xbf" + text.encode())  # with a byte-order mark, multi-byte characters cut by chunks
    data = read_dataset(p)
    assert [(c[0].text, c[0].answer_tokens) for c in data.conversations] == [
        (r["prompt"], r["output_tokens"]) for r in rows
    ]
    assert data.skipped == 0


def test_a_jsonl_line_past_the_record_limit_is_skipped_and_the_next_read(tmp_path: Path, small_chunks: None) -> None:
    p = tmp_path / "d.jsonl"
    lines = [json.dumps({"prompt": "before"}), json.dumps({"prompt": "x" * 500}), json.dumps({"prompt": "after"})]
    p.write_text("\n".join(lines))
    data = read_dataset(p)
    assert [c[0].text for c in data.conversations] == ["before", "after"]
    assert data.skipped == 1 and data.first_problem == "line 2 is longer than 200 characters"


def test_a_list_element_past_the_record_limit_stops_the_read_naming_it(tmp_path: Path, small_chunks: None) -> None:
    p = tmp_path / "d.json"
    p.write_text(json.dumps([{"prompt": "ok"}, {"prompt": "x" * 500}]))
    with pytest.raises(DatasetError, match=r"record 2 of the dataset .* is longer than 200 characters"):
        read_dataset(p)


@pytest.mark.parametrize("text", ["[{}, 1", '[{"prompt": "a"}] [1]', '[{"prompt": "a"} {"prompt": "b"}]', "["])
def test_a_broken_list_is_not_valid_json_whatever_the_chunks(tmp_path: Path, small_chunks: None, text: str) -> None:
    (tmp_path / "d.json").write_text(text)
    with pytest.raises(DatasetError, match="starts like a JSON list but is not valid JSON"):
        read_dataset(tmp_path / "d.json")


def test_an_empty_list_and_a_cut_character_are_said(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text(" [ ] \n")
    with pytest.raises(DatasetError, match="no conversation"):
        read_dataset(tmp_path / "empty.json")
    (tmp_path / "cut.jsonl").write_bytes(b'{"prompt": "a"}\n{"prompt": "\xc3')
    with pytest.raises(DatasetError, match="not UTF-8"):
        read_dataset(tmp_path / "cut.jsonl")


def test_a_file_past_the_size_limit_is_refused_before_a_byte_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dataset, "MAX_DATASET_BYTES", 1000)
    p = tmp_path / "big.jsonl"
    p.write_bytes(b"\xff" + b" " * 2000)  # read, its first byte would be "not UTF-8"
    with pytest.raises(DatasetError) as err:
        read_dataset(p)
    assert "is 2,001 bytes, past the 1,000 bytes" in str(err.value)
    assert f"head -n 100000 {p}" in str(err.value)


def test_a_pipe_past_the_size_limit_is_refused_as_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipe has no size to check first: the count of bytes read stops it."""
    monkeypatch.setattr(dataset, "MAX_DATASET_BYTES", 1000)
    monkeypatch.setattr(dataset, "READ_CHUNK", 64)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    lines = "".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(200)).encode()

    def feed() -> None:
        with contextlib.suppress(BrokenPipeError), fifo.open("wb") as w:
            w.write(lines)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        with pytest.raises(DatasetError, match="holds more than 1,000 bytes, past the 1,000 bytes"):
            read_dataset(fifo)
    finally:
        with contextlib.suppress(OSError):  # unblock a writer still waiting for a reader
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(5)


def test_reading_stops_at_the_conversation_limit_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataset, "MAX_CONVERSATIONS", 3)
    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(10)))
    data = read_dataset(p)
    assert len(data.conversations) == 3
    assert f"read the first 3 conversations of {p}; the rest was not read" in data.notes()


def test_a_list_element_past_the_guards_depth_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    """Each element goes through the JSON guard as it is read: 200 deep (the parser's stack holds it)
    is skipped with the guard's words; 100,000 deep (it does not) stops the read, named."""
    p = tmp_path / "d.json"
    p.write_text('[{"prompt": "a"}, ' + "[" * 200 + "]" * 200 + ', {"prompt": "b"}]')
    data = read_dataset(p)
    assert [c[0].text for c in data.conversations] == ["a", "b"]
    deep = f"JSON nested more than {json_guard.MAX_DEPTH} levels deep"
    assert data.first_problem == f"record 2: {deep}, past ttft's limit"
    p.write_text('[{"prompt": "a"}, ' + "[" * 100_000 + "]" * 100_000 + "]")
    with pytest.raises(DatasetError, match=f"record 2 of the dataset .*: {deep}"):
        read_dataset(p)
