"""Attachments on the wire: each API's own image part and the text files inline, as the loopback server
received them from the real SDKs (and from the lean Chat Completions reader, byte for byte the same body)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.attachments import Attachment, read_attachment
from ttft.backends.base import Backend, build_request
from ttft.backends.providers.lean.chat import LeanChatBackend
from ttft.backends.turn import new_recorder, run_turn

from tests.fakes import FakeServer, Schedule
from tests.support import files
from tests.support.backend_util import backend_for

PROMPT = "what do these show?"


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def attached(tmp_path: Path) -> tuple[Attachment, Attachment]:
    (tmp_path / "pic.png").write_bytes(files.png(40, 30))
    (tmp_path / "notes.txt").write_text("first\n```\ninner fence\n```\n")
    pic, notes = read_attachment(tmp_path / "pic.png"), read_attachment(tmp_path / "notes.txt")
    assert isinstance(pic, Attachment) and isinstance(notes, Attachment)
    return pic, notes


async def _send(backend: Backend, attachments: tuple[Attachment, ...], srv: FakeServer) -> tuple[dict[str, Any], Any]:
    request = build_request(PROMPT, system="be brief", attachments=attachments)
    try:
        record = await run_turn(backend, request, new_recorder(backend, request, session_id="s", turn_index=0))
    finally:
        await backend.aclose()
    return srv.requests[-1].body, record


NOTES_BLOCK = "notes.txt\n````\nfirst\n```\ninner fence\n```\n````"


@pytest.mark.parametrize("lean", [False, True])
async def test_chat_completions_sends_an_image_url_data_part(
    attached: tuple[Attachment, Attachment], lean: bool
) -> None:
    pic, _ = attached
    with FakeServer(Schedule(visible_tokens=3)) as srv:
        if lean:
            backend: Backend = LeanChatBackend("gpt-4o", base_url=srv.openai_base_url, api_key="sk-test")
        else:
            backend = backend_for("chat", srv)
        body, record = await _send(backend, attached, srv)
    assert record.status == "ok"
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    image, text, prompt = body["messages"][1]["content"]
    assert image == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + pic.base64()}}
    assert base64.b64decode(image["image_url"]["url"].split(",", 1)[1]) == files.png(40, 30)
    assert text == {"type": "text", "text": NOTES_BLOCK} and prompt == {"type": "text", "text": PROMPT}


async def test_the_lean_reader_sends_the_sdks_body(attached: tuple[Attachment, Attachment]) -> None:
    with FakeServer(Schedule(visible_tokens=2)) as srv:
        sdk, _ = await _send(backend_for("chat", srv), attached, srv)
        lean, _ = await _send(
            LeanChatBackend("fake-model", base_url=srv.openai_base_url, api_key="sk-test"), attached, srv
        )
    assert lean == sdk


async def test_responses_sends_an_input_image(attached: tuple[Attachment, Attachment]) -> None:
    pic, _ = attached
    with FakeServer(Schedule(visible_tokens=3)) as srv:
        body, record = await _send(backend_for("responses", srv), attached, srv)
    assert record.status == "ok" and body["instructions"] == "be brief"
    (user,) = body["input"]
    assert user["content"] == [
        {"type": "input_image", "image_url": "data:image/png;base64," + pic.base64(), "detail": "auto"},
        {"type": "input_text", "text": NOTES_BLOCK},
        {"type": "input_text", "text": PROMPT},
    ]


async def test_anthropic_sends_a_base64_image_block_with_its_media_type(
    attached: tuple[Attachment, Attachment],
) -> None:
    pic, _ = attached
    with FakeServer(Schedule(visible_tokens=3)) as srv:
        body, record = await _send(backend_for("messages", srv), attached, srv)
    assert record.status == "ok" and body["system"] == "be brief"
    (user,) = body["messages"]
    image, text, prompt = user["content"]
    assert image == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": pic.base64()}}
    assert text == {"type": "text", "text": NOTES_BLOCK} and prompt == {"type": "text", "text": PROMPT}


@pytest.mark.parametrize("api", ["chat", "compat", "responses", "messages"])
async def test_text_files_alone_make_one_string_every_server_reads(
    attached: tuple[Attachment, Attachment], api: str
) -> None:
    _, notes = attached
    with FakeServer(Schedule(visible_tokens=2)) as srv:
        body, record = await _send(backend_for(api, srv), (notes,), srv)
    user = (body.get("messages") or body.get("input"))[-1]
    assert user["content"] == f"{NOTES_BLOCK}\n\n{PROMPT}"
    assert record.prompt == PROMPT  # the record keeps the typed prompt, never the file
    assert [a.to_dict() for a in record.attachments] == [notes.info(record.api).to_dict()]
    assert "inner fence" not in str(record.to_dict())


async def test_an_image_with_no_prompt_sends_no_empty_text_block(attached: tuple[Attachment, Attachment]) -> None:
    pic, _ = attached
    with FakeServer(Schedule(visible_tokens=2)) as srv:
        backend = backend_for("messages", srv)
        request = build_request("", attachments=(pic,))
        await run_turn(backend, request, new_recorder(backend, request, session_id="s", turn_index=0))
        await backend.aclose()
        body = srv.requests[-1].body
    assert [p["type"] for p in body["messages"][0]["content"]] == ["image"]  # Anthropic rejects an empty text block
