"""telemetry.bench.workload.dataset: ShareGPT, chat messages and prompt lines, from untrusted files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from telemetry.bench.workload.dataset import DatasetError, read_dataset

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
