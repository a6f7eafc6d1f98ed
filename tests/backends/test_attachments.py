"""Attachments (issue 23 item 5): each file read and checked once, its type told by its bytes, and every
file that cannot go refused with one sentence before anything is sent."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from ttft.backends.attachments import (
    ANTHROPIC_IMAGE_B64_BYTES,
    IMAGE_LIMIT_BYTES,
    TEXT_LIMIT_BYTES,
    Attachment,
    Refused,
    check_attachments,
    read_attachment,
)
from ttft.backends.base import Message, build_request
from ttft.telemetry.tokens import image_tokens

from tests.support import files


def _read(path: Path) -> Attachment:
    got = read_attachment(path)
    assert isinstance(got, Attachment), got
    return got


def _refused(path: str | Path) -> str:
    got = read_attachment(path)
    assert isinstance(got, Refused), got
    return got.sentence


@pytest.mark.parametrize(
    ("make", "media_type"),
    [
        (files.png, "image/png"),
        (files.jpeg, "image/jpeg"),
        (files.gif, "image/gif"),
        (files.webp_lossless, "image/webp"),
        (files.webp_extended, "image/webp"),
        (files.webp_lossy, "image/webp"),
    ],
)
def test_images_are_told_by_their_bytes_and_sized_from_their_header(tmp_path: Path, make, media_type: str) -> None:
    data = make(1234, 567)
    path = tmp_path / "picture.bin"  # no telling extension: the bytes decide
    path.write_bytes(data)
    a = _read(path)
    assert (a.media_type, a.width, a.height, a.size, a.is_image) == (media_type, 1234, 567, len(data), True)
    assert a.data == data and base64.b64decode(a.base64()) == data
    assert a.data_url() == f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def test_an_image_named_for_another_format_goes_as_what_its_bytes_are(tmp_path: Path) -> None:
    path = tmp_path / "photo.png"
    path.write_bytes(files.jpeg(10, 20))
    assert _read(path).media_type == "image/jpeg"


def test_a_file_named_as_an_image_that_is_none_is_refused(tmp_path: Path) -> None:
    lfs = tmp_path / "chart.png"  # e.g. a Git LFS pointer checked out without LFS
    lfs.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\n")
    assert "is named .png but its bytes are not a png, jpeg, gif or webp image" in _refused(lfs)
    broken = tmp_path / "cut.png"
    broken.write_bytes(files.png(4, 4)[:12])  # the signature, but no IHDR
    assert "header is damaged" in _refused(broken)


def test_text_files_go_as_text_and_their_type_comes_from_the_name(tmp_path: Path) -> None:
    md = tmp_path / "notes.md"
    md.write_text("# Title\nnon-ASCII: é ✓\n", encoding="utf-8")
    a = _read(md)
    assert (a.text, a.media_type, a.is_image) == ("# Title\nnon-ASCII: é ✓\n", "text/markdown", False)
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfhello")
    assert _read(bom).text == "hello"  # the byte-order mark is not text
    wide = tmp_path / "windows.txt"
    wide.write_bytes("héllo\r\n".encode("utf-16"))
    assert _read(wide).text == "héllo\r\n"  # CRLF kept: what the file holds is sent
    odd = tmp_path / "Makefile"
    odd.write_text("all:\n\techo hi\n")
    assert _read(odd).media_type == "text/plain"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "is a PDF"),
        (b"\x00\x01\x02binary\x00", "is of a type ttft does not send"),
        (b"caf\xe9 latin-1", "is of a type ttft does not send"),
        (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "is of a type ttft does not send"),  # a zip
    ],
)
def test_unknown_types_are_refused_with_what_ttft_sends(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "thing.dat"
    path.write_bytes(content)
    sentence = _refused(path)
    assert reason in sentence and sentence.startswith(str(path)), sentence
    assert "png, jpeg, gif or webp images, and UTF-8 text" in sentence


def test_missing_folders_and_devices_are_refused(tmp_path: Path) -> None:
    assert _refused(tmp_path / "nope.txt").endswith("nope.txt: no such file")
    assert _refused(tmp_path).endswith("is a folder, not a file")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert "is not a regular file" in _refused(fifo)  # never opened: a FIFO with no writer would block


def test_too_large_is_refused_before_it_is_read_naming_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    with big.open("wb") as f:  # sparse: no disk is filled
        f.truncate(TEXT_LIMIT_BYTES + 1)
    assert "the largest a text file ttft sends is 4.0 MB" in _refused(big)
    huge = tmp_path / "huge.png"
    huge.write_bytes(files.png(8, 8))
    with huge.open("r+b") as f:
        f.truncate(IMAGE_LIMIT_BYTES + 1)
    assert "the largest an image ttft sends is 20.0 MB" in _refused(huge)


def test_a_fence_inside_the_file_never_closes_its_block(tmp_path: Path) -> None:
    path = tmp_path / "README.md"
    path.write_text("Use:\n```sh\nmake\n```\nand ````` five.\n")
    block = _read(path).fenced()
    lines = block.splitlines()
    assert lines[0] == "README.md"  # the block sits under the file's name
    assert lines[1] == lines[-1] == "``````"  # six: longer than the longest run inside (five)
    assert block == f"README.md\n``````\n{path.read_text()}``````"
    plain = tmp_path / "a.txt"
    plain.write_text("no newline at the end")
    assert _read(plain).fenced() == "a.txt\n```\nno newline at the end\n```"


def test_a_message_inlines_its_text_files_before_the_prompt_and_keeps_content_the_prompt(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "pic.gif").write_bytes(files.gif(2, 2))
    a, pic = _read(tmp_path / "a.txt"), _read(tmp_path / "pic.gif")
    req = build_request("what is it?", attachments=[pic, a])
    assert req.prompt == "what is it?" and req.attachments == (pic, a)
    assert req.messages[-1].text() == "a.txt\n```\nalpha\n```\n\nwhat is it?"  # the image is not text
    assert Message("user", "", (a,)).text() == "a.txt\n```\nalpha\n```"


def test_the_repr_of_an_attachment_never_holds_its_contents(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("the launch code is 0000")
    (tmp_path / "pic.png").write_bytes(files.png(3, 3))
    text, pic = _read(tmp_path / "secret.txt"), _read(tmp_path / "pic.png")
    shown = repr(build_request("hi", attachments=[text, pic]))
    assert "launch code" not in shown and "PNG" not in shown and "secret.txt" in shown


def test_the_record_lists_name_size_type_and_the_estimate_never_the_contents(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x" * 400)
    (tmp_path / "pic.png").write_bytes(files.png(1024, 1024))
    text, pic = _read(tmp_path / "notes.txt"), _read(tmp_path / "pic.png")
    info = pic.info("messages").to_dict()
    assert info == {
        "name": "pic.png",
        "bytes": pic.size,
        "media_type": "image/png",
        "est_tokens": image_tokens("messages", 1024, 1024),
    }
    assert text.info("chat.completions").to_dict()["est_tokens"] == len(text.fenced()) // 4
    assert pic.info("llama.cpp").est_tokens is None  # no rule known where no image goes


def _image(tmp_path: Path, name: str, data: bytes) -> Attachment:
    path = tmp_path / name
    path.write_bytes(data)
    return _read(path)


def test_the_local_engine_and_text_only_models_are_refused_images(tmp_path: Path) -> None:
    pic = _image(tmp_path, "pic.png", files.png(4, 4))
    (tmp_path / "t.txt").write_text("ok")
    text = _read(tmp_path / "t.txt")
    local = check_attachments([text, pic], api="llama.cpp", model="smollm2")
    assert local is not None and local.path == "pic.png" and "local engine takes text only" in local.sentence
    assert check_attachments([text], api="llama.cpp", model="smollm2") is None  # text is fine
    old = check_attachments([pic], api="chat.completions", model="gpt-3.5-turbo")
    assert old is not None and "gpt-3.5-turbo takes text only" in old.reason
    routed = check_attachments([pic], api="chat.completions", model="openai/gpt-3.5-turbo")  # OpenRouter's naming
    assert routed is not None
    for api, model in (("chat.completions", "gpt-4o-mini"), ("responses", "gpt-5"), ("messages", "claude-x")):
        assert check_attachments([pic, text], api=api, model=model) is None


def test_each_apis_image_limits_are_its_own(tmp_path: Path) -> None:
    # Anthropic counts the base64 text: a 4 MB file is 5.3 MB of it, over its 5 MiB; OpenAI takes it.
    four_mb = _image(tmp_path, "big.png", files.png(16, 16) + b"\x00" * 4_000_000)
    refused = check_attachments([four_mb], api="messages", model="claude-x")
    assert refused is not None and "Anthropic takes images up to 5 MB once base64-encoded" in refused.reason
    assert "at most 3.9 MB" in refused.reason
    assert check_attachments([four_mb], api="chat.completions", model="gpt-4o") is None
    just_under = _image(tmp_path, "ok.png", files.png(16, 16).ljust(ANTHROPIC_IMAGE_B64_BYTES * 3 // 4, b"\x00"))
    assert check_attachments([just_under], api="messages", model="claude-x") is None
    wide = _image(tmp_path, "wide.png", files.png(8001, 1))
    assert (
        "up to 8000 px a side"
        in (check_attachments([wide], api="messages", model="claude-x") or Refused("", "")).reason
    )
    many = [four_mb] * 11  # 11 x 5.3 MB of base64: past OpenAI's 50 MB request
    total = check_attachments(many, api="responses", model="gpt-5")
    assert total is not None and "one request takes up to 50.0 MB" in total.reason
