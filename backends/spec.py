"""The ``PROVIDER:MODEL`` syntax: the one place a model spec string is split (and ``PROVIDER:MODEL@URL``,
a spec with its own address, as compare's panes and the Python API take one).

Everything else takes a spec apart through :func:`split_spec`: checked, as a ``-m`` value, by
``backends.providers.config.parse_spec``; resolved against the config file into a Target by
``backends.providers.registry.resolve``. It imports nothing and sits outside ``backends.providers``, so
the display code (a compare pane's short name) and a build without the hosted backends can use it."""

from __future__ import annotations

from dataclasses import dataclass


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"PROVIDER:MODEL"`` -> (provider, model), at the first colon: the model may itself hold colons
    (``compat:qwen3:8b``, ``local:C:/models/x.gguf``). The model is None without a colon or after an
    empty one. Nothing is checked or stripped here: that is ``parse_spec``'s (a -m value) to do."""
    provider, sep, model = spec.partition(":")
    return provider, (model or None) if sep else None


@dataclass(frozen=True, slots=True)
class PaneSpec:
    spec: str  # PROVIDER:MODEL as -m takes it
    base_url: str | None


def parse_model(value: str, default_base_url: str | None) -> PaneSpec:
    """``PROVIDER:MODEL`` or ``PROVIDER:MODEL@URL`` (the URL wins over ``--base-url`` for that pane)."""
    # the first "@http(s)://": a URL's own "@" (user:password@host) is not the split
    at = min((i for i in (value.find("@http://"), value.find("@https://")) if i > 0), default=-1)
    if at > 0:
        return PaneSpec(value[:at], value[at + 1 :])
    return PaneSpec(value, default_base_url)
