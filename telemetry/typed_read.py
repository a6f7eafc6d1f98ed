"""Typed values from untrusted JSON: each field checked against its dataclass annotation.

Records come back from logs that older versions, other tools or a damaged disk wrote, so a
reader trusts no field's type. The rule for every field: absent (or null where null is not
allowed) takes the field's default; present with the wrong type is a ``RecordError`` that
names the field; names the dataclass does not know are ignored, because newer writers add
fields. A nested dataclass with its own ``from_dict`` reads itself.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union, get_args, get_origin

T = TypeVar("T")


class RecordError(ValueError):
    """A value that is not the record it claims to be; the message names the field."""


def kind_of(value: object) -> str:
    """How a wrong value is named in an error: its JSON kind, not its Python repr (it may be huge)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


_HINTS: dict[type, dict[str, Any]] = {}  # resolved annotations per class: get_type_hints is slow


def field_types(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _optional(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp)


def convert(tp: Any, value: object, where: str) -> Any:
    """``value`` as annotation ``tp`` says, or RecordError naming ``where``."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in get_args(tp):
            return None
        errors = []
        for arm in get_args(tp):
            if arm is type(None):
                continue
            try:
                return convert(arm, value, where)
            except RecordError as exc:
                errors.append(exc)
        raise errors[0]
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif origin is dict:
        if isinstance(value, Mapping):
            _key, item = get_args(tp)
            return {str(k): convert(item, v, f"{where}.{k}") for k, v in value.items()}
    elif origin is tuple:
        if isinstance(value, list | tuple):
            item = get_args(tp)[0]
            return tuple(convert(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
        reader = getattr(tp, "from_dict", None)
        if reader is None:
            return build(tp, value, where)
        if isinstance(value, Mapping):
            try:
                return reader(value)
            except RecordError:
                raise
            except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
                raise RecordError(f"{where} is not readable: {exc}") from exc
    else:
        raise TypeError(f"no reader for the annotation {tp!r} ({where})")  # a bug here, not bad data
    raise RecordError(f"{where} is {kind_of(value)}, which does not fit {getattr(tp, '__name__', tp)}")


def build(cls: type[T], data: object, where: str) -> T:
    """The dataclass ``cls`` from the JSON object ``data`` (see the module's rule for each field)."""
    if not isinstance(data, Mapping):
        raise RecordError(f"{where} is {kind_of(data)}, not an object")
    hints = field_types(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # cls is a dataclass by contract
        tp = hints[f.name]
        value = data.get(f.name)
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if value is None and (has_default or not _optional(tp)):
            if not has_default:
                raise RecordError(f"{where}.{f.name} is missing")
            continue
        kwargs[f.name] = convert(tp, value, f"{where}.{f.name}")
    return cls(**kwargs)
