"""The ``PROVIDER:MODEL`` syntax: the one place a model spec string is split.

Everything else takes a spec apart through :func:`split_spec`: checked, as a ``-m`` value, by
``backends.providers.config.parse_spec``; resolved against the config file into a Target by
``backends.providers.registry.resolve``. It imports nothing and sits outside ``backends.providers``, so
the display code (a compare pane's short name) and a build without the hosted backends can use it."""

from __future__ import annotations


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"PROVIDER:MODEL"`` -> (provider, model), at the first colon: the model may itself hold colons
    (``compat:qwen3:8b``, ``local:C:/models/x.gguf``). The model is None without a colon or after an
    empty one. Nothing is checked or stripped here: that is ``parse_spec``'s (a -m value) to do."""
    provider, sep, model = spec.partition(":")
    return provider, (model or None) if sep else None
