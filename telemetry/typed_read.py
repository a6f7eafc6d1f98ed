"""Typed values from untrusted JSON: each field checked against its dataclass annotation.

Records come back from logs that older versions, other tools or a damaged disk wrote, so a
reader trusts no field's type. The rule for every field: absent (or null where null is not
allowed) takes the field's default; present with the wrong type is a ``RecordError`` that
names the field; names the dataclass does not know are ignored, because newer writers add
fields. A nested dataclass with its own ``from_dict`` reads itself.
"""

from __future__ import annotations

import dataclasses
import gc
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from .errors import TtftError

T = TypeVar("T")


class RecordError(TtftError, ValueError):
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


Reader = Callable[[object, str], Any]  # (value, where) -> the value as its annotation says, or RecordError

# One reader per annotation, made once: a log holds thousands of records of the same few types,
# and taking an annotation apart (get_origin, get_args) on every value cost most of a read.
_READERS: dict[Any, Reader] = {}


def convert(tp: Any, value: object, where: str) -> Any:
    """``value`` as annotation ``tp`` says, or RecordError naming ``where``."""
    return _cached(tp)(value, where)


_NONE = type(None)
_SCALARS = (bool, int, float, str)


def exact_types(tp: Any) -> tuple[type, ...] | None:
    """The Python types a JSON value of annotation ``tp`` passes through unchanged as (one check
    of ``type(value) in`` them spares a reader's call); None for ``Any``, which takes any value."""
    if tp is Any:
        return None
    if tp in _SCALARS:
        return (tp,)
    if get_origin(tp) in (Union, types.UnionType):
        out: tuple[type, ...] = ()
        for arm in get_args(tp):
            # an int met by a float arm first comes out a float: not unchanged
            if arm is _NONE or (arm in _SCALARS and not (arm is int and float in out)):
                out += (arm,)
        return out
    return ()


def _misfit(tp: Any) -> Callable[[object, str], RecordError]:
    name = getattr(tp, "__name__", tp)
    return lambda value, where: RecordError(f"{where} is {kind_of(value)}, which does not fit {name}")


def _reader(tp: Any) -> Reader:
    """The reader of one annotation (a ``TypeError`` when it is called, for a kind no reader knows)."""
    try:
        return _make_reader(tp)
    except TypeError as exc:
        problem = exc

        def unknown(value: object, where: str) -> Any:
            raise TypeError(f"{problem} ({where})")  # a bug here, not bad data

        return unknown


def _make_reader(tp: Any) -> Reader:
    origin = get_origin(tp)
    misfit = _misfit(tp)
    if tp is Any:
        return lambda value, where: value
    if origin in (Union, types.UnionType):
        return _union_reader(tp)
    if origin is Literal:  # a vocabulary: one of its words, nothing else
        words = get_args(tp)
        allowed = frozenset(words)
        listed = ", ".join(repr(w) for w in words)

        def read_word(value: object, where: str) -> Any:
            if type(value) is str and value in allowed:
                return value
            shown = repr(value)[:40] if isinstance(value, str) else kind_of(value)
            raise RecordError(f"{where} is {shown}, not one of {listed}")

        return read_word
    if tp is bool:

        def read_bool(value: object, where: str) -> Any:
            if isinstance(value, bool):
                return value
            raise misfit(value, where)

        return read_bool
    if tp is int:

        def read_int(value: object, where: str) -> Any:
            if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
                return value
            raise misfit(value, where)

        return read_int
    if tp is float:

        def read_float(value: object, where: str) -> Any:
            if type(value) is float:
                return value
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            raise misfit(value, where)

        return read_float
    if tp is str:

        def read_str(value: object, where: str) -> Any:
            if isinstance(value, str):
                return value
            raise misfit(value, where)

        return read_str
    if origin is dict:
        item_tp = get_args(tp)[1]
        exact = exact_types(item_tp)

        def read_dict(value: object, where: str) -> Any:
            if type(value) is not dict and not isinstance(value, Mapping):
                raise misfit(value, where)
            # The common case, checked in one sweep: JSON's keys, every item already what it should be.
            if all(type(k) is str for k in value) and (exact is None or all(type(v) in exact for v in value.values())):
                return dict(value)
            item = _cached(item_tp)
            try:  # no item is wrong, so no item's name is spelt out
                return {str(k): item(v, where) for k, v in value.items()}
            except RecordError:
                return {str(k): item(v, f"{where}.{k}") for k, v in value.items()}  # raises, naming the item

        return read_dict
    if origin is tuple:
        item_tp = get_args(tp)[0]

        def read_tuple(value: object, where: str) -> Any:
            if not isinstance(value, list | tuple):
                raise misfit(value, where)
            item = _cached(item_tp)
            try:
                return tuple(item(v, where) for v in value)
            except RecordError:
                return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(value))

        return read_tuple
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        reader = getattr(tp, "from_dict", None)
        if reader is None:
            return lambda value, where: build(tp, value, where)

        def read_own(value: object, where: str) -> Any:
            if not isinstance(value, Mapping):
                raise misfit(value, where)
            try:
                return reader(value)
            except RecordError:
                raise
            except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
                raise RecordError(f"{where} is not readable: {exc}") from exc

        return read_own
    raise TypeError(f"no reader for the annotation {tp!r}")


def _cached(tp: Any) -> Reader:
    read = _READERS.get(tp)
    if read is None:
        read = _READERS[tp] = _reader(tp)
    return read


def _union_reader(tp: Any) -> Reader:
    nullable = type(None) in get_args(tp)
    arms = [arm for arm in get_args(tp) if arm is not type(None)]
    if len(arms) == 1:
        (only,) = arms
        inner: list[Reader] = []  # the arm's reader, looked up on first use (an annotation may name itself)
        exact = exact_types(tp) or ()

        def read_optional(value: object, where: str) -> Any:
            if type(value) in exact:  # None (when allowed) or a scalar already of its type
                return value
            if value is None and nullable:
                return None
            if not inner:
                inner.append(_cached(only))
            return inner[0](value, where)

        return read_optional

    def read_union(value: object, where: str) -> Any:
        if value is None and nullable:
            return None
        errors = []
        for arm in arms:
            try:
                return _cached(arm)(value, where)
            except RecordError as exc:
                errors.append(exc)
        raise errors[0]

    return read_union


# Per dataclass, what build() needs of each field: its name, reader, whether it has a default,
# whether None is a value it may hold, and the types that pass unchanged (see exact_types).
Plan = list[tuple[str, Reader, bool, bool, tuple[type, ...] | None]]
_PLANS: dict[type, Plan] = {}


def _plan(cls: type) -> Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        hints = field_types(cls)
        plan = _PLANS[cls] = [
            (
                f.name,
                _cached(hints[f.name]),
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
                _optional(hints[f.name]),
                exact_types(hints[f.name]),
            )
            for f in dataclasses.fields(cls)
        ]
    return plan


def build(cls: type[T], data: object, where: str) -> T:
    """The dataclass ``cls`` from the JSON object ``data`` (see the module's rule for each field)."""
    if type(data) is not dict and not isinstance(data, Mapping):  # the ABC's check is slow: a dict first
        raise RecordError(f"{where} is {kind_of(data)}, not an object")
    kwargs: dict[str, Any] = {}
    for name, read, has_default, optional, exact in _plan(cls):
        value = data.get(name)
        if value is None and (has_default or not optional):
            if not has_default:
                raise RecordError(f"{where}.{name} is missing")
            continue
        if exact is None or type(value) in exact:
            kwargs[name] = value
        else:
            kwargs[name] = read(value, f"{where}.{name}")
    return cls(**kwargs)


@contextmanager
def bulk_read() -> Iterator[None]:
    """The cycle collector paused while many records are read: each allocates dozens of objects
    (its chunks), none in a cycle, and the collections they set off, each walking every record
    read so far, took half the read of a 10,000-request bench run."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
