"""``dataclasses.asdict``'s result for records on the hot path, without its recursive walk.

``asdict`` deep-copies through ``copy.deepcopy`` and a generic walk; every bench request turns
several records into dicts, and that walk was a fifth of the client's work per request. These
give the same dict (same keys, same order, containers copied), walking only the containers.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

_LEAVES = frozenset({str, int, float, bool, type(None)})


def field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names in declaration order (the order ``asdict`` gives)."""
    return tuple(f.name for f in fields(cls))


def json_copy(value: Any) -> Any:
    """A JSON-shaped value with its dicts, lists and tuples copied, as ``asdict`` copies them."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is dict:
        return {k: json_copy(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return kind(json_copy(v) for v in value)
    if hasattr(kind, "__dataclass_fields__"):  # a record inside: as asdict turns it
        return asdict(value)
    return value


def as_dict(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """``asdict(obj)``: ``names`` its fields (:func:`field_names`)."""
    return {name: json_copy(getattr(obj, name)) for name in names}
