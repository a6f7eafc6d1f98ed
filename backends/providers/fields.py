"""One field of a provider's answer, read alike from its JSON dict (the lean readers) or the SDK's model.

The SDKs build their models without validating and keep the fields they do not model yet in
``model_extra``; a dict has only its keys. Either way a missing field reads as None, so the code
that translates an answer (``messages_wire``, ``responses_wire``) is written once for both paths.
"""

from __future__ import annotations

from typing import Any


def field(obj: Any, name: str) -> Any:
    """``obj[name]`` for a dict, ``obj.name`` (or its ``model_extra`` entry) for a model; None when absent."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    v = getattr(obj, name, None)
    if v is None:
        v = (getattr(obj, "model_extra", None) or {}).get(name)
    return v


def require_object(item: Any) -> None:
    """Raise TypeError for a streamed event that is not a JSON object: the SDKs hand ``null``, a list, a
    number or a string over as they are, where the lean readers' dict lookups fail; either way
    :func:`backends.providers.answers.stream_shape.shape_checked` then reports the chunk as not this API's event."""
    if item is None or isinstance(item, list | str | int | float):
        raise TypeError(f"not an event: {type(item).__name__}")
