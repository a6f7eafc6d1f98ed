"""What a model spec will talk to, for people: provider, model, where it runs, where the key comes from.

Read from the backend once it exists (its own provider and model names), else from the
spec and the config file, without creating anything: the greeting and the header show it
before the first prompt. A key's value is never read into this, only whether its
variable is set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..backends.base import Backend
from ..backends.spec import split_spec
from ..telemetry.log.urls import redact_url

# The provider tables are the resolved target's (backends.providers.registry): one set, read here.
try:
    from ..backends.providers.registry import API_NAMES, DEFAULT_HOSTS, KEY_REQUIRED
except ImportError:  # a build without the hosted backends: only the local engine is described
    API_NAMES = DEFAULT_HOSTS = {}
    KEY_REQUIRED = frozenset[str]()


@dataclass(frozen=True)
class TargetView:
    provider: str
    model: str | None  # None: the provider's default, named by the backend once it starts
    kind: str  # local | openai | openai-responses | anthropic | compat | "" (not known here)
    base_url: str | None = None
    key_env: str | None = None  # the variable's name, never its value
    key_set: bool = False
    configured: bool = False  # a named provider from config.toml
    problem: str | None = None  # why the first prompt will not start, when that is known now
    about: str | None = None  # a shipped local model's own one-line description

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}" if self.model else self.provider

    @property
    def key_missing(self) -> bool:
        """A hosted API's key variable is not set: the first prompt would fail."""
        return self.kind in KEY_REQUIRED and bool(self.key_env) and not self.key_set


def describe_target(spec: str, base_url: str | None = None, backend: Backend | None = None) -> TargetView:
    try:
        from ..backends.providers.registry import ProviderError, resolve
    except ImportError:  # a build without the hosted backends
        provider, bare = split_spec(spec)
        return _with_backend(TargetView(provider, bare, "local" if provider == "local" else ""), backend)
    try:
        r = resolve(spec, base_url=base_url)
    except ProviderError as exc:  # an unknown provider, a broken config file: the first prompt says so too
        provider, model = split_spec(spec)
        return _with_backend(TargetView(provider, model, "", base_url, problem=str(exc)), backend)
    if r.local:
        name, about = _local_model(r.model)
        return _with_backend(TargetView("local", name, "local", about=about), backend)
    key_set = bool(r.key_env and os.environ.get(r.key_env))
    problem = None  # a missing key is ``key_missing``: the greeting says it on the key's own line
    if r.kind == "compat" and not r.base_url:
        problem = "compat needs the server's address: add --base-url (or pick it in F2)."
    elif not r.model:
        problem = f"no model given: use -m {r.provider}:MODEL (or pick one in F2)."
    target = TargetView(
        r.provider,
        r.model,
        r.kind,
        r.base_url,
        r.key_env,
        key_set,
        configured=r.provider != r.kind,
        problem=problem,
    )
    return _with_backend(target, backend)


def _local_model(rest: str | None) -> tuple[str | None, str | None]:
    """The name the local backend will give ``-m local[:REST]`` (a shipped model's, or the file's
    stem), from the local package itself: the default model is its to choose."""
    try:
        from ..backends.local import models as local_model
    except ImportError:
        return (Path(rest).expanduser().stem if rest else None), None
    # looked up by name: a build whose local package predates shipped models still describes a path
    shipped = getattr(local_model, "shipped_model", None)
    m = (shipped(rest) if shipped else None) if rest else getattr(local_model, "DEFAULT_MODEL", None)
    if m is not None:
        return getattr(m, "name", None), getattr(m, "about", None) or None
    return (Path(rest).expanduser().stem if rest else None), None


def _with_backend(t: TargetView, backend: Backend | None) -> TargetView:
    """The backend's own names win: it knows the default model and what a file holds."""
    if backend is None:
        return t
    return TargetView(
        backend.provider,
        backend.model or t.model,
        t.kind,
        backend.base_url or t.base_url,
        t.key_env,
        t.key_set,
        t.configured,
        None,  # it started: whatever was missing was found
        t.about,
    )


def where_text(t: TargetView) -> str:
    """Where the turns go, in one line."""
    if t.kind == "local":
        return "runs on this machine (llama.cpp) · no API key, no network"
    if not t.kind:
        return f"provider {t.provider}"
    where = redact_url(t.base_url) or DEFAULT_HOSTS.get(t.kind, "")  # never its credentials or query values
    api = API_NAMES.get(t.kind, t.kind)
    head = f"{t.provider} ({api}, from config.toml)" if t.configured else api
    return f"{head} at {where}" if where else head


def key_text(t: TargetView) -> str | None:
    """Where the key comes from (its variable's name, never its value); None where none is asked for."""
    if t.kind in ("local", ""):
        return None
    if not t.key_env:
        return "no key sent"
    if t.key_missing:
        return f"${t.key_env} is not set: export it, or switch below"
    return f"key from ${t.key_env}" + ("" if t.key_set else " (not set; this server may need none)")
