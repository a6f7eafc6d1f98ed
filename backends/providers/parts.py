"""A message's content as each API's own parts: the prompt's text, its text files, its images.

One function per wire format, each used by every reader of that format (the SDK backends and the
lean readers), so a request's body does not depend on which reader sends it:

- Chat Completions (:func:`chat_content`): ``{"type": "text"}`` and ``{"type": "image_url",
  "image_url": {"url": "data:image/png;base64,..."}}``;
- Responses (:func:`responses_content`): ``{"type": "input_text"}`` and ``{"type": "input_image",
  "image_url": "data:...", "detail": "auto"}``;
- Anthropic Messages (:func:`messages_content`): ``{"type": "text"}`` and ``{"type": "image",
  "source": {"type": "base64", "media_type": "image/png", "data": "..."}}``.

A message without images is one string on every API (text files inlined before the prompt by
:meth:`backends.base.Message.text`), which every compat server reads. With images, the parts
keep the order the files were given in, then the prompt's text: images before the question is
the order both vendors advise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base import Message

if TYPE_CHECKING:
    from ..attachments import Attachment

Content = str | list[dict[str, Any]]


def _parts(m: Message, text: str, image: Any) -> Content:
    if not any(a.is_image for a in m.attachments):
        return m.text()
    out: list[dict[str, Any]] = [image(a) if a.is_image else {"type": text, "text": a.fenced()} for a in m.attachments]
    if m.content:  # an empty text block is an error on Anthropic's API
        out.append({"type": text, "text": m.content})
    return out


def _chat_image(a: Attachment) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": a.data_url()}}


def _responses_image(a: Attachment) -> dict[str, Any]:
    return {"type": "input_image", "image_url": a.data_url(), "detail": "auto"}


def _messages_image(a: Attachment) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": a.media_type, "data": a.base64()}}


def chat_content(m: Message) -> Content:
    """The ``content`` of one Chat Completions message."""
    return _parts(m, "text", _chat_image)


def responses_content(m: Message) -> Content:
    """The ``content`` of one Responses ``input`` message."""
    return _parts(m, "input_text", _responses_image)


def messages_content(m: Message) -> Content:
    """The ``content`` of one Anthropic Messages message."""
    return _parts(m, "text", _messages_image)
